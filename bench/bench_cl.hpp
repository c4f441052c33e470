// bench_cl.hpp — the bare-OpenCL side of the benchmarks: one context on the
// same device as the engine, driven through uvcl's own run-time loaded
// dispatch table (cl::Library), so both sides use the same driver in the
// same process.
#pragma once

#include <string>
#include <vector>

#include "bench_util.hpp"
#include "cl/api.hpp"
#include "cl/devices.hpp"

namespace bench {

// The options the engine builds every program with, so both sides compile
// the same thing.
inline constexpr const char* kBuildOptions =
    "-cl-finite-math-only -cl-no-signed-zeros -cl-mad-enable -cl-kernel-arg-info";

inline void ck(cl_int rc, const char* what) {
  if (rc != CL_SUCCESS) fail(std::string(what) + ": " + uvcl::cl::error_name(rc));
}

class Bare {
 public:
  Bare(const uvcl::cl::Api& api, const uvcl::cl::Device& dev, unsigned queues,
       cl_command_queue_properties props = 0)
      : api(api), device(dev.id) {
    cl_context_properties cp[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(dev.platform), 0};
    cl_int rc = CL_SUCCESS;
    ctx = api.clCreateContext(cp, 1, &device, nullptr, nullptr, &rc);
    ck(rc, "clCreateContext");
    for (unsigned i = 0; i < queues; ++i) {
      cl_command_queue q = api.clCreateCommandQueue(ctx, device, props, &rc);
      ck(rc, "clCreateCommandQueue");
      queue.push_back(q);
    }
  }
  ~Bare() {
    for (cl_command_queue q : queue) api.clFinish(q);
    for (cl_mem m : mems) api.clReleaseMemObject(m);
    for (cl_kernel k : kernels) api.clReleaseKernel(k);
    for (cl_program p : programs) api.clReleaseProgram(p);
    for (cl_command_queue q : queue) api.clReleaseCommandQueue(q);
    if (ctx) api.clReleaseContext(ctx);
  }
  Bare(const Bare&) = delete;
  Bare& operator=(const Bare&) = delete;

  cl_command_queue q(std::size_t i = 0) const { return queue[i]; }

  // clCreateProgramWithSource + clBuildProgram (blocking, as the API is),
  // with the engine's options and `extra` after them.
  cl_program build(const std::string& src, bool keep = true, const std::string& extra = {}) {
    const char* s = src.c_str();
    const std::size_t len = src.size();
    cl_int rc = CL_SUCCESS;
    cl_program p = api.clCreateProgramWithSource(ctx, 1, &s, &len, &rc);
    ck(rc, "clCreateProgramWithSource");
    const std::string options = extra.empty() ? std::string(kBuildOptions) : std::string(kBuildOptions) + " " + extra;
    rc = api.clBuildProgram(p, 1, &device, options.c_str(), nullptr, nullptr);
    if (rc != CL_SUCCESS) {
      std::size_t size = 0;
      api.clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
      std::string log(size, '\0');
      api.clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
      api.clReleaseProgram(p);
      fail(std::string("clBuildProgram: ") + uvcl::cl::error_name(rc) + "\n" + log);
    }
    if (keep) programs.push_back(p);
    return p;
  }
  // The device binary of a built program.
  std::vector<unsigned char> binary(cl_program p) {
    std::size_t size = 0;
    ck(api.clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr), "clGetProgramInfo(SIZES)");
    std::vector<unsigned char> bin(size);
    unsigned char* ptr = bin.data();
    ck(api.clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr), "clGetProgramInfo(BINARIES)");
    return bin;
  }
  cl_program from_binary(const std::vector<unsigned char>& bin, bool keep = true) {
    const unsigned char* b = bin.data();
    const std::size_t len = bin.size();
    cl_int status = CL_SUCCESS, rc = CL_SUCCESS;
    cl_program p = api.clCreateProgramWithBinary(ctx, 1, &device, &len, &b, &status, &rc);
    ck(rc, "clCreateProgramWithBinary");
    ck(api.clBuildProgram(p, 1, &device, kBuildOptions, nullptr, nullptr), "clBuildProgram(binary)");
    if (keep) programs.push_back(p);
    return p;
  }
  cl_kernel kernel(cl_program p, const char* name) {
    cl_int rc = CL_SUCCESS;
    cl_kernel k = api.clCreateKernel(p, name, &rc);
    ck(rc, "clCreateKernel");
    kernels.push_back(k);
    return k;
  }
  // A buffer released with the context (keep) or by the caller.
  cl_mem buffer(std::size_t bytes, cl_mem_flags flags = CL_MEM_READ_WRITE, bool keep = true) {
    cl_int rc = CL_SUCCESS;
    cl_mem m = api.clCreateBuffer(ctx, flags, bytes, nullptr, &rc);
    ck(rc, "clCreateBuffer");
    if (keep) mems.push_back(m);
    return m;
  }
  void zero(cl_mem m, std::size_t bytes) {
    const float z = 0;
    ck(api.clEnqueueFillBuffer(queue[0], m, &z, sizeof z, 0, bytes, 0, nullptr, nullptr), "clEnqueueFillBuffer");
    finish();
  }
  void arg(cl_kernel k, cl_uint i, cl_mem m) { api.clSetKernelArg(k, i, sizeof m, &m); }
  template <class T>
  void arg(cl_kernel k, cl_uint i, T v) {
    api.clSetKernelArg(k, i, sizeof v, &v);
  }
  void finish() {
    for (cl_command_queue q : queue) ck(api.clFinish(q), "clFinish");
  }

  const uvcl::cl::Api& api;
  cl_device_id device;
  cl_context ctx = nullptr;
  std::vector<cl_command_queue> queue;
  std::vector<cl_mem> mems;
  std::vector<cl_kernel> kernels;
  std::vector<cl_program> programs;
};

}  // namespace bench
