// devices.cpp — platform and device enumeration, device info, its JSON form.
#include "cl/devices.hpp"

#include <CL/cl_ext.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>


namespace uvcl {

const char* device_type_name(DeviceType t) noexcept {
  switch (t) {
    case DeviceType::Cpu: return "cpu";
    case DeviceType::Gpu: return "gpu";
    case DeviceType::Accelerator: return "accelerator";
    case DeviceType::Custom: return "custom";
    case DeviceType::Other: return "other";
  }
  return "other";
}

}  // namespace uvcl

namespace uvcl::cl {

namespace {

// Vendor queries, defined here in case a header set predates them; the
// values are fixed by the extension specifications.
#ifndef CL_DEVICE_WARP_SIZE_NV
#define CL_DEVICE_WARP_SIZE_NV 0x4003
#endif
#ifndef CL_DEVICE_WAVEFRONT_WIDTH_AMD
#define CL_DEVICE_WAVEFRONT_WIDTH_AMD 0x4043
#endif

// A SIMD width to plan work-group shapes with when the driver has no query
// for it: a multiple of every common GPU width below 64 (documented in
// docs/config.md, and in DeviceInfo::warp_size).
constexpr std::uint32_t kDefaultWarpSize = 32;

std::string trimmed(std::vector<char> bytes) {
  std::string s(bytes.begin(), bytes.end());
  // Drivers count the terminating NUL and some pad names with blanks.
  const auto last = s.find_last_not_of(std::string_view("\0 \t\r\n", 5));
  if (last == std::string::npos) return {};
  s.erase(last + 1);
  const auto first = s.find_first_not_of(" \t\r\n");
  s.erase(0, first);
  return s;
}

// clGetPlatformInfo / clGetDeviceInfo with error messages that say which
// query failed on which object ("clGetDeviceInfo(CL_DEVICE_NAME) on device 0").
class Querier {
 public:
  Querier(const Api& api, cl_platform_id platform, cl_device_id device, std::string platform_label,
          std::string device_label)
      : api_(api),
        platform_(platform),
        device_(device),
        platform_label_(std::move(platform_label)),
        device_label_(std::move(device_label)) {}

  Result<std::string> platform_string(cl_platform_info param, const char* param_name) const {
    std::size_t size = 0;
    cl_int rc = api_.clGetPlatformInfo(platform_, param, 0, nullptr, &size);
    if (rc != CL_SUCCESS) return platform_error(param_name, rc);
    if (size == 0) return std::string();
    std::vector<char> bytes(size);
    rc = api_.clGetPlatformInfo(platform_, param, size, bytes.data(), nullptr);
    if (rc != CL_SUCCESS) return platform_error(param_name, rc);
    return trimmed(std::move(bytes));
  }

  Result<std::string> device_string(cl_device_info param, const char* param_name) const {
    std::size_t size = 0;
    cl_int rc = api_.clGetDeviceInfo(device_, param, 0, nullptr, &size);
    if (rc != CL_SUCCESS) return device_error(param_name, rc);
    if (size == 0) return std::string();
    std::vector<char> bytes(size);
    rc = api_.clGetDeviceInfo(device_, param, size, bytes.data(), nullptr);
    if (rc != CL_SUCCESS) return device_error(param_name, rc);
    return trimmed(std::move(bytes));
  }

  template <class T>
  Result<T> device_scalar(cl_device_info param, const char* param_name) const {
    T value{};
    const cl_int rc = api_.clGetDeviceInfo(device_, param, sizeof(T), &value, nullptr);
    if (rc != CL_SUCCESS) return device_error(param_name, rc);
    return value;
  }

  Result<std::vector<std::size_t>> device_sizes(cl_device_info param, const char* param_name,
                                                std::size_t count) const {
    std::vector<std::size_t> values(count);
    if (count == 0) return values;
    const cl_int rc = api_.clGetDeviceInfo(device_, param, count * sizeof(std::size_t), values.data(), nullptr);
    if (rc != CL_SUCCESS) return device_error(param_name, rc);
    return values;
  }

 private:
  Error platform_error(const char* param_name, cl_int rc) const {
    const std::string call = std::string("clGetPlatformInfo(") + param_name + ") on " + platform_label_;
    return call_error(Status::DeviceQuery, call.c_str(), rc);
  }
  Error device_error(const char* param_name, cl_int rc) const {
    const std::string call = std::string("clGetDeviceInfo(") + param_name + ") on " + device_label_;
    return call_error(Status::DeviceQuery, call.c_str(), rc);
  }

  const Api& api_;
  cl_platform_id platform_;
  cl_device_id device_;
  std::string platform_label_, device_label_;
};

// Spares each query its name spelled twice.
#define UVCL_Q(param) param, #param

#define UVCL_ASSIGN(target, expr)                                    \
  do {                                                               \
    auto uvcl_assign_result_ = (expr);                               \
    if (!uvcl_assign_result_.ok()) return std::move(uvcl_assign_result_).error(); \
    (target) = std::move(uvcl_assign_result_).value();               \
  } while (0)

DeviceType device_type_of(cl_device_type t) {
  // A device may also carry CL_DEVICE_TYPE_DEFAULT; the kind bits decide.
  if ((t & CL_DEVICE_TYPE_GPU) != 0) return DeviceType::Gpu;
  if ((t & CL_DEVICE_TYPE_CPU) != 0) return DeviceType::Cpu;
  if ((t & CL_DEVICE_TYPE_ACCELERATOR) != 0) return DeviceType::Accelerator;
  if ((t & CL_DEVICE_TYPE_CUSTOM) != 0) return DeviceType::Custom;
  return DeviceType::Other;
}

// OpenCL has no query for the largest global size of an axis. The spec's
// only bound is that global size (+ offset) fits the DEVICE's size_t
// (CL_INVALID_GLOBAL_WORK_SIZE otherwise), i.e. 2^address_bits - 1; the
// host's size_t caps it too, since that is the type the host passes.
std::uint64_t max_global_size(cl_uint address_bits) {
  constexpr std::uint64_t host_max = std::numeric_limits<std::size_t>::max();
  std::uint64_t device_max = std::numeric_limits<std::uint64_t>::max();
  if (address_bits > 0 && address_bits < 64) device_max = (std::uint64_t{1} << address_bits) - 1;
  return device_max < host_max ? device_max : host_max;
}

Result<DeviceInfo> query(const Api& api, cl_platform_id platform, cl_device_id device,
                         std::string platform_label, std::string device_label) {
  const Querier q(api, platform, device, std::move(platform_label), std::move(device_label));
  DeviceInfo info;
  UVCL_ASSIGN(info.platform_name, q.platform_string(UVCL_Q(CL_PLATFORM_NAME)));
  UVCL_ASSIGN(info.platform_vendor, q.platform_string(UVCL_Q(CL_PLATFORM_VENDOR)));
  UVCL_ASSIGN(info.platform_version, q.platform_string(UVCL_Q(CL_PLATFORM_VERSION)));

  UVCL_ASSIGN(info.name, q.device_string(UVCL_Q(CL_DEVICE_NAME)));
  UVCL_ASSIGN(info.vendor, q.device_string(UVCL_Q(CL_DEVICE_VENDOR)));
  UVCL_ASSIGN(info.driver_version, q.device_string(UVCL_Q(CL_DRIVER_VERSION)));
  UVCL_ASSIGN(info.device_version, q.device_string(UVCL_Q(CL_DEVICE_VERSION)));
  UVCL_ASSIGN(info.opencl_c_version, q.device_string(UVCL_Q(CL_DEVICE_OPENCL_C_VERSION)));
  UVCL_ASSIGN(info.extensions, q.device_string(UVCL_Q(CL_DEVICE_EXTENSIONS)));

  cl_device_type type = 0;
  UVCL_ASSIGN(type, q.device_scalar<cl_device_type>(UVCL_Q(CL_DEVICE_TYPE)));
  info.type = device_type_of(type);
  UVCL_ASSIGN(info.compute_units, q.device_scalar<cl_uint>(UVCL_Q(CL_DEVICE_MAX_COMPUTE_UNITS)));
  UVCL_ASSIGN(info.max_clock_mhz, q.device_scalar<cl_uint>(UVCL_Q(CL_DEVICE_MAX_CLOCK_FREQUENCY)));
  UVCL_ASSIGN(info.global_memory, q.device_scalar<cl_ulong>(UVCL_Q(CL_DEVICE_GLOBAL_MEM_SIZE)));
  UVCL_ASSIGN(info.max_allocation, q.device_scalar<cl_ulong>(UVCL_Q(CL_DEVICE_MAX_MEM_ALLOC_SIZE)));
  UVCL_ASSIGN(info.local_memory, q.device_scalar<cl_ulong>(UVCL_Q(CL_DEVICE_LOCAL_MEM_SIZE)));
  UVCL_ASSIGN(info.max_work_group_size, q.device_scalar<std::size_t>(UVCL_Q(CL_DEVICE_MAX_WORK_GROUP_SIZE)));
  UVCL_ASSIGN(info.max_work_item_dims, q.device_scalar<cl_uint>(UVCL_Q(CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS)));
  UVCL_ASSIGN(info.max_work_item_sizes,
              q.device_sizes(UVCL_Q(CL_DEVICE_MAX_WORK_ITEM_SIZES), info.max_work_item_dims));
  cl_uint address_bits = 0;
  UVCL_ASSIGN(address_bits, q.device_scalar<cl_uint>(UVCL_Q(CL_DEVICE_ADDRESS_BITS)));
  info.max_global_sizes.assign(info.max_work_item_dims, max_global_size(address_bits));
  UVCL_ASSIGN(info.preferred_float_vector_width,
              q.device_scalar<cl_uint>(UVCL_Q(CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT)));
  std::size_t timer_resolution = 0;
  UVCL_ASSIGN(timer_resolution, q.device_scalar<std::size_t>(UVCL_Q(CL_DEVICE_PROFILING_TIMER_RESOLUTION)));
  info.profiling_timer_resolution_ns = timer_resolution;

  // The vendor width queries and the fp64 config are hints: a driver that
  // advertises the extension but fails the query falls back to the default
  // rather than making the whole device unusable.
  if (has_extension(info.extensions, "cl_nv_device_attribute_query")) {
    auto w = q.device_scalar<cl_uint>(UVCL_Q(CL_DEVICE_WARP_SIZE_NV));
    if (w.ok()) info.warp_size = *w;
  } else if (has_extension(info.extensions, "cl_amd_device_attribute_query")) {
    auto w = q.device_scalar<cl_uint>(UVCL_Q(CL_DEVICE_WAVEFRONT_WIDTH_AMD));
    if (w.ok()) info.warp_size = *w;
  }
  if (info.warp_size == 0) info.warp_size = info.type == DeviceType::Cpu ? 1 : kDefaultWarpSize;

  info.fp16 = has_extension(info.extensions, "cl_khr_fp16");
  info.fp64 = has_extension(info.extensions, "cl_khr_fp64");
  if (!info.fp64) {
    // OpenCL 3.0 makes fp64 optional without the extension name; an OpenCL
    // 1.x device may reject the query, which also means no fp64.
    auto config = q.device_scalar<cl_device_fp_config>(UVCL_Q(CL_DEVICE_DOUBLE_FP_CONFIG));
    info.fp64 = config.ok() && *config != 0;
  }
  info.matrix_units = has_extension(info.extensions, "cl_intel_subgroup_matrix_multiply_accumulate");
  return info;
}

#undef UVCL_ASSIGN
#undef UVCL_Q

std::string memory_text(std::uint64_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (bytes >= (std::uint64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.1f GiB", b / (1u << 30));
  } else if (bytes >= (std::uint64_t{1} << 20)) {
    std::snprintf(text, sizeof text, "%.1f MiB", b / (1u << 20));
  } else if (bytes >= 1024) {
    std::snprintf(text, sizeof text, "%.1f KiB", b / 1024);
  } else {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return text;
}

std::string platform_label(std::size_t index) { return "platform " + std::to_string(index); }

// The platform's name for debug lines; a failed query only costs the name.
std::string platform_name_or_blank(const Api& api, cl_platform_id platform) {
  std::size_t size = 0;
  if (api.clGetPlatformInfo(platform, CL_PLATFORM_NAME, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "?";
  std::vector<char> bytes(size);
  if (api.clGetPlatformInfo(platform, CL_PLATFORM_NAME, size, bytes.data(), nullptr) != CL_SUCCESS) return "?";
  return trimmed(std::move(bytes));
}

void print_device(const DeviceInfo& d) {
  std::string sizes;
  for (std::size_t s : d.max_work_item_sizes) {
    if (!sizes.empty()) sizes += 'x';
    sizes += std::to_string(s);
  }
  std::fprintf(stderr,
               "uvcl:   device %zu: %s (%s, %s), %u compute units at %u MHz, %s global memory, "
               "%s max allocation, %s local memory, work-group %zu, work-items %s, warp %u%s%s%s\n",
               d.index, d.name.c_str(), device_type_name(d.type), d.device_version.c_str(), d.compute_units,
               d.max_clock_mhz, memory_text(d.global_memory).c_str(), memory_text(d.max_allocation).c_str(),
               memory_text(d.local_memory).c_str(), d.max_work_group_size, sizes.c_str(), d.warp_size,
               d.fp16 ? ", fp16" : "", d.fp64 ? ", fp64" : "", d.matrix_units ? ", matrix units" : "");
}

}  // namespace

bool has_extension(std::string_view extensions, std::string_view name) noexcept {
  if (name.empty()) return false;
  std::size_t pos = 0;
  while ((pos = extensions.find(name, pos)) != std::string_view::npos) {
    const std::size_t end = pos + name.size();
    const bool starts = pos == 0 || extensions[pos - 1] == ' ';
    const bool ends = end == extensions.size() || extensions[end] == ' ';
    if (starts && ends) return true;
    pos = end;
  }
  return false;
}

Result<DeviceInfo> query_device_info(const Api& api, cl_platform_id platform, cl_device_id device) {
  return query(api, platform, device, "the platform", "the device");
}

Result<DeviceInfo> query_device_info(const Api& api, cl_platform_id platform, cl_device_id device,
                                     std::size_t platform_index, std::size_t device_index) {
  auto info = query(api, platform, device, platform_label(platform_index), "device " + std::to_string(device_index));
  if (info.ok()) {
    info->index = device_index;
    info->platform_index = platform_index;
  }
  return info;
}

Result<std::vector<Device>> enumerate_devices(const Api& api,
                                              const std::optional<std::vector<std::size_t>>& platform_ids,
                                              bool debug) {
  std::vector<Device> devices;
  if (platform_ids && platform_ids->empty()) {
    if (debug) std::fprintf(stderr, "uvcl: OpenCL platforms: none selected\n");
    return devices;
  }

  cl_uint count = 0;
  cl_int rc = api.clGetPlatformIDs(0, nullptr, &count);
  // The ICD loader reports "no vendor installed" as an error code; for uvcl
  // it is a machine with zero devices, like one with zero platforms.
  if (rc == CL_PLATFORM_NOT_FOUND_KHR) count = 0;
  else if (rc != CL_SUCCESS) return call_error(Status::DeviceEnumeration, "clGetPlatformIDs", rc);
  std::vector<cl_platform_id> platforms(count);
  if (count > 0) {
    rc = api.clGetPlatformIDs(count, platforms.data(), &count);
    if (rc != CL_SUCCESS) return call_error(Status::DeviceEnumeration, "clGetPlatformIDs", rc);
    platforms.resize(count);  // a loader may report fewer the second time
  }
  if (debug) std::fprintf(stderr, "uvcl: OpenCL library %s: %zu platform(s)\n", api.library_path.c_str(), platforms.size());

  std::vector<bool> selected(platforms.size(), !platform_ids.has_value());
  if (platform_ids) {
    for (std::size_t id : *platform_ids) {
      if (id >= platforms.size()) {
        return make_error(Status::DeviceEnumeration, "OpenCL platform " + std::to_string(id) +
                                                         " does not exist (the OpenCL library lists " +
                                                         std::to_string(platforms.size()) + " platform(s))");
      }
      selected[id] = true;  // a repeated index selects its platform once
    }
  }

  // The first platform that failed to list its devices; reported only when
  // no platform yields a device, so one broken platform never hides the rest.
  std::optional<Error> skipped;
  for (std::size_t p = 0; p < platforms.size(); ++p) {
    if (!selected[p]) {
      if (debug) {
        std::fprintf(stderr, "uvcl: OpenCL platform %zu: %s: not selected\n", p,
                     platform_name_or_blank(api, platforms[p]).c_str());
      }
      continue;
    }
    cl_uint n = 0;
    rc = api.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, nullptr, &n);
    std::vector<cl_device_id> ids(n);
    if (rc == CL_SUCCESS && n > 0) rc = api.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, n, ids.data(), &n);
    // One broken platform must not hide the devices of the others.
    if (rc != CL_SUCCESS) {
      if (debug) {
        std::fprintf(stderr, "uvcl: OpenCL platform %zu: %s: skipped, clGetDeviceIDs: %s\n", p,
                     platform_name_or_blank(api, platforms[p]).c_str(), error_name(rc));
      }
      if (!skipped) {
        skipped = call_error(Status::DeviceEnumeration, "clGetDeviceIDs", rc);
        skipped->context("OpenCL platform " + std::to_string(p));
      }
      continue;
    }
    ids.resize(n);
    if (ids.empty()) {
      if (debug) {
        std::fprintf(stderr, "uvcl: OpenCL platform %zu: %s: no devices\n", p,
                     platform_name_or_blank(api, platforms[p]).c_str());
      }
      continue;
    }
    for (std::size_t d = 0; d < ids.size(); ++d) {
      auto info = query_device_info(api, platforms[p], ids[d], p, devices.size());
      if (!info.ok()) return std::move(info).error();
      if (debug && d == 0) {
        std::fprintf(stderr, "uvcl: OpenCL platform %zu: %s (%s, %s), %zu device(s)\n", p, info->platform_name.c_str(),
                     info->platform_vendor.c_str(), info->platform_version.c_str(), ids.size());
      }
      if (debug) print_device(*info);
      devices.push_back(Device{std::move(info).value(), platforms[p], ids[d]});
    }
  }
  if (devices.empty() && skipped) return std::move(*skipped);
  return devices;
}

}  // namespace uvcl::cl
