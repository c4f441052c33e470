// kernel_info.hpp — what a built program says about its kernels: their
// names and each parameter's address space, qualifiers, type and name
// (kernel argument info, so the program must be built with
// -cl-kernel-arg-info). Shared by the engine and the compiler process,
// which sends this info with each binary: argument info is only guaranteed
// for programs built from source.
#pragma once

#include <string>
#include <vector>

#include "cl/api.hpp"
#include "uvcl/kernel_param.hpp"
#include "uvcl/status.hpp"

namespace uvcl::cl {

struct KernelInfo {
  std::string name;
  std::vector<KernelParam> params;
};

// Every parameter of `kernel`, its access inferred from argument info:
// `const __global T*` and `__constant` read-only, other `__global` written,
// `__local` local, the rest scalar with the size of its type.
Result<std::vector<KernelParam>> kernel_params(const Api& api, cl_kernel kernel);

// Every kernel of a built program, with its parameters.
Result<std::vector<KernelInfo>> program_kernels(const Api& api, cl_program program);

// The build log of `program` for `device`, without trailing NULs and
// newlines; "" if the driver gives none.
std::string build_log(const Api& api, cl_program program, cl_device_id device);

// Size of an OpenCL C scalar or vector type as the compiler names it
// ("uint", "float4"); 0 when unknown (the size is then not checked).
std::size_t type_size(std::string name);

}  // namespace uvcl::cl
