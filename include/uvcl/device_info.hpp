// uvcl/device_info.hpp — what uvcl knows about one OpenCL device.
//
// Read once at enumeration from clGetPlatformInfo/clGetDeviceInfo. Indexes
// are stable: platform order, then device order within the platform.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "uvcl/export.h"

namespace uvcl {

enum class DeviceType { Cpu, Gpu, Accelerator, Custom, Other };
UVCL_EXPORT const char* device_type_name(DeviceType t) noexcept;  // "cpu", "gpu", ...

struct DeviceInfo {
  std::size_t index = 0;           // engine-wide device index
  std::size_t platform_index = 0;  // index among all platforms of the loader
  std::string platform_name, platform_vendor, platform_version;
  std::string name, vendor, driver_version, device_version, opencl_c_version;
  DeviceType type = DeviceType::Other;
  std::uint32_t compute_units = 0;
  std::uint32_t max_clock_mhz = 0;
  std::uint64_t global_memory = 0;       // bytes
  std::uint64_t max_allocation = 0;      // bytes
  std::uint64_t local_memory = 0;        // bytes
  std::size_t max_work_group_size = 0;   // read from the device
  std::uint32_t max_work_item_dims = 0;
  std::vector<std::size_t> max_work_item_sizes;  // per axis
  std::vector<std::uint64_t> max_global_sizes;   // per axis
  std::uint32_t preferred_float_vector_width = 0;
  // NVIDIA: CL_DEVICE_WARP_SIZE_NV; AMD: CL_DEVICE_WAVEFRONT_WIDTH_AMD; CPU:
  // 1; any other device: 32 (a common SIMD width; documented in config.md).
  std::uint32_t warp_size = 0;
  bool fp16 = false, fp64 = false;
  bool matrix_units = false;  // cl_intel_subgroup_matrix_multiply_accumulate
  std::uint64_t profiling_timer_resolution_ns = 0;
  std::string extensions;
  unsigned queues = 0;  // the engine's in-order compute queues on it (Config::queues)
};

}  // namespace uvcl
