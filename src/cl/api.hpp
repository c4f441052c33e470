// api.hpp — the OpenCL entry points uvcl uses, as ONE dispatch table.
//
// The ICD loader is dlopen-ed at run time (never linked), so a machine
// without OpenCL gets a DyLibNotFound error instead of a link failure. Every
// function pointer is typed from the Khronos headers (decltype(&::clFoo)).
// The table is passed around as one object (const Api&).
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "uvcl/status.hpp"

namespace uvcl::cl {

// X(name): every entry point in the table. Adding one here adds the member,
// its lookup and its missing-symbol error.
#define UVCL_CL_ENTRY_POINTS(X) \
  X(clGetPlatformIDs)           \
  X(clGetPlatformInfo)          \
  X(clGetDeviceIDs)             \
  X(clGetDeviceInfo)            \
  X(clCreateContext)            \
  X(clReleaseContext)           \
  X(clCreateCommandQueue)       \
  X(clReleaseCommandQueue)      \
  X(clFlush)                    \
  X(clFinish)                   \
  X(clCreateBuffer)             \
  X(clRetainMemObject)          \
  X(clReleaseMemObject)         \
  X(clEnqueueWriteBuffer)       \
  X(clEnqueueReadBuffer)        \
  X(clEnqueueCopyBuffer)        \
  X(clEnqueueFillBuffer)        \
  X(clEnqueueMapBuffer)         \
  X(clEnqueueUnmapMemObject)    \
  X(clCreateProgramWithSource)  \
  X(clCreateProgramWithBinary)  \
  X(clBuildProgram)             \
  X(clGetProgramInfo)           \
  X(clGetProgramBuildInfo)      \
  X(clRetainProgram)            \
  X(clReleaseProgram)           \
  X(clCreateKernel)             \
  X(clGetKernelInfo)            \
  X(clGetKernelArgInfo)         \
  X(clGetKernelWorkGroupInfo)   \
  X(clSetKernelArg)             \
  X(clReleaseKernel)            \
  X(clEnqueueNDRangeKernel)     \
  X(clEnqueueMarkerWithWaitList) \
  X(clGetEventInfo)             \
  X(clGetEventProfilingInfo)    \
  X(clSetEventCallback)         \
  X(clRetainEvent)              \
  X(clReleaseEvent)             \
  X(clCreateUserEvent)          \
  X(clSetUserEventStatus)

struct Api {
// NOLINTNEXTLINE(bugprone-macro-parentheses): `name` is an identifier, not an expression
#define UVCL_CL_MEMBER(name) decltype(&::name) name = nullptr;
  UVCL_CL_ENTRY_POINTS(UVCL_CL_MEMBER)
#undef UVCL_CL_MEMBER

  std::string library_path;  // the library that was opened
  void* handle = nullptr;    // dlopen handle, closed by ~Library
};

// Owns the dlopen handle; the Api stays valid while the Library lives.
class Library {
 public:
  // Opens `explicit_path` if non-empty — only it: one that does not load
  // or lacks OpenCL is an error, never a fallback to another loader (a path
  // with a '/' must be a regular file) — else the first of libOpenCL.so.1,
  // libOpenCL.so and the usual library folders that loads. DyLibNotFound
  // names every path tried; MissingSymbol names the first entry point not found.
  static Result<std::unique_ptr<Library>> open(const std::string& explicit_path);
  // The paths open() tries, in order ({explicit_path} alone when non-empty).
  static std::vector<std::string> candidate_paths(const std::string& explicit_path);
  // Opens the first of `paths` that dlopen accepts, no others: open() is
  // open_first(candidate_paths(p)); tests use it to make loading fail.
  static Result<std::unique_ptr<Library>> open_first(const std::vector<std::string>& paths);
  // For tests: resolves symbols through `lookup` instead of dlsym.
  using Lookup = void* (*)(void* ctx, const char* name);
  static Result<Api> resolve(Lookup lookup, void* ctx, const std::string& path);

  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  const Api& api() const { return api_; }

 private:
  explicit Library(Api api) : api_(std::move(api)) {}
  Api api_;
};

// "CL_OUT_OF_RESOURCES", ... ; unknown codes give "CL_ERROR(-9999)".
const char* error_name(cl_int status) noexcept;

// "clFoo: CL_OUT_OF_RESOURCES" as an Error with the given status.
Error call_error(Status status, const char* call, cl_int code);

}  // namespace uvcl::cl
