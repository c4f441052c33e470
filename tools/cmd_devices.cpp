// uvcl devices [--json]: every device, as a table or as JSON.
#include <cstdio>

#include "cl/api.hpp"
#include "cl/devices.hpp"
#include "program/device_json.hpp"
#include "cli.hpp"

namespace uvcl::cli {
namespace {

std::string human_bytes(std::uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ull << 30));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ull << 20));
  return buf;
}

}  // namespace

int cmd_devices(const Args& a, const uvcl::Config& config) {
  auto lib = uvcl::cl::Library::open(config.library);
  if (!lib) return fail(lib.error());
  auto devices = uvcl::cl::enumerate_devices(lib.value()->api(), config.platform_ids, config.debug_backends);
  if (!devices) return fail(devices.error());
  if (a.json) {
    std::string out = "[";
    for (std::size_t i = 0; i < devices->size(); ++i)
      out += (i ? ",\n " : "") + uvcl::device_info_json((*devices)[i].info);
    std::printf("%s]\n", out.c_str());
    return 0;
  }
  std::printf("%-5s %-28s %-36s %-5s %10s %4s %6s %4s %4s\n", "index", "platform", "name", "type", "memory", "CUs",
              "max-wg", "fp16", "fp64");
  for (const auto& d : devices.value()) {
    const uvcl::DeviceInfo& i = d.info;
    std::printf("%-5zu %-28.28s %-36.36s %-5s %10s %4u %6zu %4s %4s\n", i.index, i.platform_name.c_str(),
                i.name.c_str(), uvcl::device_type_name(i.type), human_bytes(i.global_memory).c_str(), i.compute_units,
                i.max_work_group_size, i.fp16 ? "yes" : "no", i.fp64 ? "yes" : "no");
  }
  if (devices->empty()) std::printf("(no OpenCL devices)\n");
  return 0;
}

}  // namespace uvcl::cli
