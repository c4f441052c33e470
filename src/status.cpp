#include "uvcl/status.hpp"

#include <cstdio>
#include <cstdlib>

namespace uvcl {

std::string_view status_name(Status s) noexcept {
  switch (s) {
    case Status::Ok: return "Ok";
    case Status::Initialization: return "Initialization";
    case Status::DyLibNotFound: return "DyLibNotFound";
    case Status::DeviceEnumeration: return "DeviceEnumeration";
    case Status::DeviceQuery: return "DeviceQuery";
    case Status::MemoryAllocation: return "MemoryAllocation";
    case Status::MemoryCopyH2P: return "MemoryCopyH2P";
    case Status::MemoryCopyP2H: return "MemoryCopyP2H";
    case Status::KernelCompilation: return "KernelCompilation";
    case Status::KernelLaunch: return "KernelLaunch";
    case Status::KernelSync: return "KernelSync";
    case Status::IncorrectKernelArg: return "IncorrectKernelArg";
    case Status::InvalidArgument: return "InvalidArgument";
    case Status::InvalidConfig: return "InvalidConfig";
    case Status::InvalidJob: return "InvalidJob";
    case Status::MissingSymbol: return "MissingSymbol";
    case Status::DeviceLost: return "DeviceLost";
    case Status::Io: return "Io";
    case Status::Cancelled: return "Cancelled";
  }
  return "Unknown";
}

std::string Error::to_string() const {
  std::string out(status_name(status));
  out += ": ";
  out += message;
  return out;
}

void detail::bad_result_access(const Error* error) noexcept {
  if (error != nullptr)
    std::fprintf(stderr, "uvcl: Result::value() of an error: %s\n", error->to_string().c_str());
  else
    std::fputs("uvcl: Result::error() of a result that holds a value (check ok() first)\n", stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace uvcl
