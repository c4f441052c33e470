// kernel_info.cpp — kernel argument info and the kernels of a program.
#include "cl/kernel_info.hpp"

#include <cctype>
#include <tuple>

#include "uvcl/types.hpp"

namespace uvcl::cl {

std::size_t type_size(std::string name) {
  for (const char* prefix : {"const ", "volatile ", "unsigned "}) {
    const std::string p = prefix;
    if (name.rfind(p, 0) == 0) {
      if (p == "unsigned ") name = "u" + name.substr(p.size());
      else name = name.substr(p.size());
    }
  }
  std::size_t digits = name.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(name[digits - 1]))) --digits;
  std::size_t lanes = 1;
  if (digits < name.size()) {
    lanes = std::stoul(name.substr(digits));
    if (lanes == 3) lanes = 4;  // 3-vectors occupy 4 lanes
    name.resize(digits);
  }
  if (auto t = scalar_type_from_name(name)) return scalar_size(*t) * lanes;
  if (name == "uchar" || name == "bool") return lanes;
  return 0;
}

std::string build_log(const Api& api, cl_program program, cl_device_id device) {
  std::size_t size = 0;
  std::string log;
  if (api.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) == CL_SUCCESS && size > 0) {
    log.resize(size);
    if (api.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr) != CL_SUCCESS)
      log.clear();
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  }
  return log;
}

Result<std::vector<KernelParam>> kernel_params(const Api& api, cl_kernel kernel) {
  std::vector<KernelParam> params;
  cl_uint n = 0;
  cl_int rc = api.clGetKernelInfo(kernel, CL_KERNEL_NUM_ARGS, sizeof n, &n, nullptr);
  if (rc != CL_SUCCESS) return call_error(Status::KernelCompilation, "clGetKernelInfo(CL_KERNEL_NUM_ARGS)", rc);
  for (cl_uint i = 0; i < n; ++i) {
    KernelParam param;
    cl_kernel_arg_address_qualifier addr = CL_KERNEL_ARG_ADDRESS_PRIVATE;
    cl_kernel_arg_type_qualifier tq = 0;
    rc = api.clGetKernelArgInfo(kernel, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof addr, &addr, nullptr);
    if (rc != CL_SUCCESS)
      return call_error(Status::KernelCompilation, "clGetKernelArgInfo(CL_KERNEL_ARG_ADDRESS_QUALIFIER)", rc);
    // A failed query must not guess: a const input taken as written, or a
    // scalar of unknown size, would change what the launch does.
    rc = api.clGetKernelArgInfo(kernel, i, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof tq, &tq, nullptr);
    if (rc != CL_SUCCESS)
      return call_error(Status::KernelCompilation, "clGetKernelArgInfo(CL_KERNEL_ARG_TYPE_QUALIFIER)", rc);
    for (auto [what, label, out] :
         {std::tuple{CL_KERNEL_ARG_TYPE_NAME, "clGetKernelArgInfo(CL_KERNEL_ARG_TYPE_NAME)", &param.type_name},
          std::tuple{CL_KERNEL_ARG_NAME, "clGetKernelArgInfo(CL_KERNEL_ARG_NAME)", &param.name}}) {
      std::size_t size = 0;
      rc = api.clGetKernelArgInfo(kernel, i, what, 0, nullptr, &size);
      if (rc == CL_SUCCESS && size > 0) {
        out->resize(size);
        rc = api.clGetKernelArgInfo(kernel, i, what, size, out->data(), nullptr);
        while (!out->empty() && out->back() == '\0') out->pop_back();
      }
      if (rc != CL_SUCCESS) return call_error(Status::KernelCompilation, label, rc);
    }
    switch (addr) {
      case CL_KERNEL_ARG_ADDRESS_GLOBAL:
        param.access = (tq & CL_KERNEL_ARG_TYPE_CONST) ? ParamAccess::ReadOnly : ParamAccess::Written;
        break;
      case CL_KERNEL_ARG_ADDRESS_CONSTANT: param.access = ParamAccess::ReadOnly; break;
      case CL_KERNEL_ARG_ADDRESS_LOCAL: param.access = ParamAccess::Local; break;
      default:
        param.access = ParamAccess::Scalar;
        param.scalar_size = type_size(param.type_name);
        break;
    }
    params.push_back(std::move(param));
  }
  return params;
}

Result<std::vector<KernelInfo>> program_kernels(const Api& api, cl_program program) {
  std::size_t names_size = 0;
  cl_int rc = api.clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &names_size);
  if (rc != CL_SUCCESS) return call_error(Status::KernelCompilation, "clGetProgramInfo(CL_PROGRAM_KERNEL_NAMES)", rc);
  std::string names(names_size, '\0');
  rc = api.clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, names_size, names.data(), nullptr);
  if (rc != CL_SUCCESS) return call_error(Status::KernelCompilation, "clGetProgramInfo(CL_PROGRAM_KERNEL_NAMES)", rc);
  while (!names.empty() && names.back() == '\0') names.pop_back();
  std::vector<KernelInfo> kernels;
  std::size_t start = 0;
  while (start < names.size()) {
    std::size_t end = names.find(';', start);
    if (end == std::string::npos) end = names.size();
    KernelInfo info{names.substr(start, end - start), {}};
    start = end + 1;
    if (info.name.empty()) continue;
    cl_kernel k = api.clCreateKernel(program, info.name.c_str(), &rc);
    if (rc != CL_SUCCESS) return call_error(Status::KernelCompilation, "clCreateKernel", rc).context(info.name);
    auto params = kernel_params(api, k);
    api.clReleaseKernel(k);
    if (!params) return std::move(params).error().context("kernel " + info.name);
    info.params = std::move(params.value());
    kernels.push_back(std::move(info));
  }
  return kernels;
}

}  // namespace uvcl::cl
