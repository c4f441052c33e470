// devices.hpp — platform and device enumeration.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cl/api.hpp"
#include "uvcl/device_info.hpp"

namespace uvcl::cl {

struct Device {
  DeviceInfo info;
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
};

// Every device of every selected platform (all device types), in platform
// order then device order; DeviceInfo::index is the position in the result.
// platform_ids: nullopt = all platforms; empty = none (OpenCL configured out,
// zero devices, no error); otherwise those platform indexes (an index beyond
// the platform count is a DeviceEnumeration error naming it). A platform that
// fails to enumerate its devices is skipped; with `debug` a line saying why
// goes to stderr, and each device found is printed like zyx does.
Result<std::vector<Device>> enumerate_devices(const Api& api,
                                              const std::optional<std::vector<std::size_t>>& platform_ids,
                                              bool debug);

// Fills a DeviceInfo from clGetPlatformInfo/clGetDeviceInfo.
Result<DeviceInfo> query_device_info(const Api& api, cl_platform_id platform, cl_device_id device);
// The same for the device that enumeration places at `device_index` of
// platform `platform_index`: fills both indexes, and error messages name them
// ("clGetDeviceInfo(CL_DEVICE_NAME) on device 0: CL_INVALID_DEVICE").
Result<DeviceInfo> query_device_info(const Api& api, cl_platform_id platform, cl_device_id device,
                                     std::size_t platform_index, std::size_t device_index);

// Whether the space-separated CL_DEVICE_EXTENSIONS string lists `name`
// (a whole word: cl_khr_fp16 does not match cl_khr_fp16_foo).
bool has_extension(std::string_view extensions, std::string_view name) noexcept;

}  // namespace uvcl::cl
