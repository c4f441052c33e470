// cl_timing.cpp — an OpenCL library that times every call made through it
// (cl_timing.h says what for).
//
// The real library is UVCL_CL_TIMING_REAL if set, else libOpenCL.so.1 (the
// ICD loader). A missing real library or entry point is reported on stderr
// and aborts the process: this is a measuring tool, and a run with half its
// calls unmeasured would report nonsense.
#include "cl_timing.h"

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "cl/api.hpp"

namespace {

// NOLINTNEXTLINE(bugprone-macro-parentheses): `name` is an identifier
#define UVCL_ENTRY_INDEX(name) k_##name,
enum Entry : std::size_t { UVCL_CL_ENTRY_POINTS(UVCL_ENTRY_INDEX) kEntries };
#undef UVCL_ENTRY_INDEX

#define UVCL_ENTRY_NAME(name) #name,
constexpr std::array<const char*, kEntries> kNames = {UVCL_CL_ENTRY_POINTS(UVCL_ENTRY_NAME)};
#undef UVCL_ENTRY_NAME

struct Totals {
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> ns{0};
};
std::array<Totals, kEntries> g_totals;

[[noreturn]] void give_up(const char* what, const char* name) {
  std::fprintf(stderr, "uvcl cl_timing: %s %s\n", what, name);
  std::abort();
}

uvcl::cl::Api load_real() {
  const char* env = std::getenv("UVCL_CL_TIMING_REAL");
  const char* path = env != nullptr && *env != '\0' ? env : "libOpenCL.so.1";
  void* handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) give_up("cannot open the real OpenCL library", path);
  uvcl::cl::Api api;
#define UVCL_RESOLVE(name)                                                  \
  api.name = reinterpret_cast<decltype(api.name)>(::dlsym(handle, #name)); \
  if (api.name == nullptr) give_up("the real OpenCL library lacks", #name);
  UVCL_CL_ENTRY_POINTS(UVCL_RESOLVE)
#undef UVCL_RESOLVE
  api.library_path = path;
  api.handle = handle;
  return api;
}

const uvcl::cl::Api& real() {
  static const uvcl::cl::Api api = load_real();
  return api;
}

using Clock = std::chrono::steady_clock;

// UVCL_CL_TIMING_STUB_KERNELS=KIB: a kernel launch is not forwarded; it
// reads and writes KIB kibibytes of memory of its own instead, standing in
// for a GPU driver's call: its time, and the caches it leaves cold for the
// code that runs next. With UVCL_CL_TIMING_STUB_CODE=1 it also runs 2048
// functions of its own with a branch each, as a driver's large code path
// does: the caller's code leaves the instruction cache and its branches
// the predictor. That measures a caller's own host cost per launch
// natively, where no GPU is. A launch that asks for an event or waits gets a
// marker with the same waits, so ordering still holds; kernels compute
// nothing.
struct KernelStub {
  bool on = false;
  bool code = false;
  std::vector<std::uint64_t> memory;
  std::uint64_t state = 88172645463325252ull;
};

template <unsigned N>
[[gnu::noinline]] std::uint64_t driver_code_step(std::uint64_t x) {
  if ((x >> (N % 61)) & 1) return x * 6364136223846793005ull + N;
  return x ^ (x >> (N % 29 + 1)) ^ N;
}

template <unsigned... Ns>
std::uint64_t run_driver_code(std::uint64_t x, std::integer_sequence<unsigned, Ns...>) {
  ((x = driver_code_step<Ns>(x)), ...);
  return x;
}

KernelStub load_stub() {
  KernelStub stub;
  const char* env = std::getenv("UVCL_CL_TIMING_STUB_KERNELS");
  if (env == nullptr || *env == '\0') return stub;
  char* end = nullptr;
  const unsigned long kib = std::strtoul(env, &end, 10);
  if (end == env || *end != '\0' || kib > 1024 * 1024) give_up("UVCL_CL_TIMING_STUB_KERNELS is not a size in KiB:", env);
  stub.on = true;
  stub.memory.resize(kib * 1024 / sizeof(std::uint64_t));
  const char* code = std::getenv("UVCL_CL_TIMING_STUB_CODE");
  if (code != nullptr && *code != '\0' && std::strcmp(code, "0") != 0 && std::strcmp(code, "1") != 0)
    give_up("UVCL_CL_TIMING_STUB_CODE is not 0 or 1:", code);
  stub.code = code != nullptr && std::strcmp(code, "1") == 0;
  return stub;
}

KernelStub& stub() {
  static KernelStub s = load_stub();
  return s;
}

void run_stub_kernel(KernelStub& s) {
  for (std::size_t i = 0; i < s.memory.size(); i += 8) s.memory[i] += 1;  // one touch per cache line
  if (s.code) s.state = run_driver_code(s.state, std::make_integer_sequence<unsigned, 2048>{});
}

void add(Entry e, Clock::time_point start) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  g_totals[e].calls.fetch_add(1, std::memory_order_relaxed);
  g_totals[e].ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
}

}  // namespace

extern "C" std::size_t uvcl_cl_timing_take(UvclClTiming* out, std::size_t cap) {
  for (std::size_t i = 0; i < kEntries; ++i) {
    const std::uint64_t calls = g_totals[i].calls.exchange(0, std::memory_order_relaxed);
    const std::uint64_t ns = g_totals[i].ns.exchange(0, std::memory_order_relaxed);
    if (i < cap) out[i] = UvclClTiming{kNames[i], calls, ns};
  }
  return kEntries;
}

// One definition per entry point of the dispatch table, its signature as in
// CL/cl.h: forward to the real library, time the call. A launch's
// entry point runs the stub instead when it is on.
// NOLINTBEGIN(bugprone-macro-parentheses): `params` and `args` are parenthesized lists
#define UVCL_TIMED(ret, name, params, args)          \
  extern "C" CL_API_ENTRY ret CL_API_CALL name params { \
    const Clock::time_point start = Clock::now();    \
    ret result = real().name args;                   \
    add(k_##name, start);                            \
    return result;                                   \
  }
#define UVCL_STUBBED(ret, name, params, args)            \
  extern "C" CL_API_ENTRY ret CL_API_CALL name params {     \
    const Clock::time_point start = Clock::now();        \
    ret result = CL_SUCCESS;                             \
    if (!stub().on) result = real().name args;           \
    else if (run_stub_kernel(stub()); event != nullptr || num_events_in_wait_list != 0) \
      result = real().clEnqueueMarkerWithWaitList(command_queue, num_events_in_wait_list, event_wait_list, event); \
    add(k_##name, start);                                \
    return result;                                       \
  }
UVCL_TIMED(cl_int, clGetPlatformIDs, (cl_uint num_entries, cl_platform_id * platforms, cl_uint * num_platforms), (num_entries, platforms, num_platforms))
UVCL_TIMED(cl_int, clGetPlatformInfo, (cl_platform_id platform, cl_platform_info param_name, size_t param_value_size, void * param_value, size_t * param_value_size_ret), (platform, param_name, param_value_size, param_value, param_value_size_ret))
UVCL_TIMED(cl_int, clGetDeviceIDs, (cl_platform_id platform, cl_device_type device_type, cl_uint num_entries, cl_device_id * devices, cl_uint * num_devices), (platform, device_type, num_entries, devices, num_devices))
UVCL_TIMED(cl_int, clGetDeviceInfo, (cl_device_id device, cl_device_info param_name, size_t param_value_size, void * param_value, size_t * param_value_size_ret), (device, param_name, param_value_size, param_value, param_value_size_ret))
UVCL_TIMED(cl_context, clCreateContext, (const cl_context_properties * properties, cl_uint num_devices, const cl_device_id * devices, void (CL_CALLBACK * pfn_notify)(const char * errinfo, const void * private_info, size_t cb, void * user_data), void * user_data, cl_int * errcode_ret), (properties, num_devices, devices, pfn_notify, user_data, errcode_ret))
UVCL_TIMED(cl_int, clReleaseContext, (cl_context context), (context))
UVCL_TIMED(cl_command_queue, clCreateCommandQueue, (cl_context context, cl_device_id device, cl_command_queue_properties properties, cl_int * errcode_ret), (context, device, properties, errcode_ret))
UVCL_TIMED(cl_int, clReleaseCommandQueue, (cl_command_queue command_queue), (command_queue))
UVCL_TIMED(cl_int, clFlush, (cl_command_queue command_queue), (command_queue))
UVCL_TIMED(cl_int, clFinish, (cl_command_queue command_queue), (command_queue))
UVCL_TIMED(cl_mem, clCreateBuffer, (cl_context context, cl_mem_flags flags, size_t size, void * host_ptr, cl_int * errcode_ret), (context, flags, size, host_ptr, errcode_ret))
UVCL_TIMED(cl_int, clRetainMemObject, (cl_mem memobj), (memobj))
UVCL_TIMED(cl_int, clReleaseMemObject, (cl_mem memobj), (memobj))
UVCL_TIMED(cl_int, clEnqueueWriteBuffer, (cl_command_queue command_queue, cl_mem buffer, cl_bool blocking_write, size_t offset, size_t size, const void * ptr, cl_uint num_events_in_wait_list, const cl_event * event_wait_list, cl_event * event), (command_queue, buffer, blocking_write, offset, size, ptr, num_events_in_wait_list, event_wait_list, event))
UVCL_TIMED(cl_int, clEnqueueReadBuffer, (cl_command_queue command_queue, cl_mem buffer, cl_bool blocking_read, size_t offset, size_t size, void * ptr, cl_uint num_events_in_wait_list, const cl_event * event_wait_list, cl_event * event), (command_queue, buffer, blocking_read, offset, size, ptr, num_events_in_wait_list, event_wait_list, event))
UVCL_TIMED(cl_int, clEnqueueCopyBuffer, (cl_command_queue command_queue, cl_mem src_buffer, cl_mem dst_buffer, size_t src_offset, size_t dst_offset, size_t size, cl_uint num_events_in_wait_list, const cl_event * event_wait_list, cl_event * event), (command_queue, src_buffer, dst_buffer, src_offset, dst_offset, size, num_events_in_wait_list, event_wait_list, event))
UVCL_TIMED(cl_int, clEnqueueFillBuffer, (cl_command_queue command_queue, cl_mem buffer, const void * pattern, size_t pattern_size, size_t offset, size_t size, cl_uint num_events_in_wait_list, const cl_event * event_wait_list, cl_event * event), (command_queue, buffer, pattern, pattern_size, offset, size, num_events_in_wait_list, event_wait_list, event))
UVCL_TIMED(void *, clEnqueueMapBuffer, (cl_command_queue command_queue, cl_mem buffer, cl_bool blocking_map, cl_map_flags map_flags, size_t offset, size_t size, cl_uint num_events_in_wait_list, const cl_event * event_wait_list, cl_event * event, cl_int * errcode_ret), (command_queue, buffer, blocking_map, map_flags, offset, size, num_events_in_wait_list, event_wait_list, event, errcode_ret))
UVCL_TIMED(cl_int, clEnqueueUnmapMemObject, (cl_command_queue command_queue, cl_mem memobj, void * mapped_ptr, cl_uint num_events_in_wait_list, const cl_event * event_wait_list, cl_event * event), (command_queue, memobj, mapped_ptr, num_events_in_wait_list, event_wait_list, event))
UVCL_TIMED(cl_program, clCreateProgramWithSource, (cl_context context, cl_uint count, const char ** strings, const size_t * lengths, cl_int * errcode_ret), (context, count, strings, lengths, errcode_ret))
UVCL_TIMED(cl_program, clCreateProgramWithBinary, (cl_context context, cl_uint num_devices, const cl_device_id * device_list, const size_t * lengths, const unsigned char ** binaries, cl_int * binary_status, cl_int * errcode_ret), (context, num_devices, device_list, lengths, binaries, binary_status, errcode_ret))
UVCL_TIMED(cl_int, clBuildProgram, (cl_program program, cl_uint num_devices, const cl_device_id * device_list, const char * options, void (CL_CALLBACK * pfn_notify)(cl_program program, void * user_data), void * user_data), (program, num_devices, device_list, options, pfn_notify, user_data))
UVCL_TIMED(cl_int, clGetProgramInfo, (cl_program program, cl_program_info param_name, size_t param_value_size, void * param_value, size_t * param_value_size_ret), (program, param_name, param_value_size, param_value, param_value_size_ret))
UVCL_TIMED(cl_int, clGetProgramBuildInfo, (cl_program program, cl_device_id device, cl_program_build_info param_name, size_t param_value_size, void * param_value, size_t * param_value_size_ret), (program, device, param_name, param_value_size, param_value, param_value_size_ret))
UVCL_TIMED(cl_int, clRetainProgram, (cl_program program), (program))
UVCL_TIMED(cl_int, clReleaseProgram, (cl_program program), (program))
UVCL_TIMED(cl_kernel, clCreateKernel, (cl_program program, const char * kernel_name, cl_int * errcode_ret), (program, kernel_name, errcode_ret))
UVCL_TIMED(cl_int, clGetKernelInfo, (cl_kernel kernel, cl_kernel_info param_name, size_t param_value_size, void * param_value, size_t * param_value_size_ret), (kernel, param_name, param_value_size, param_value, param_value_size_ret))
UVCL_TIMED(cl_int, clGetKernelArgInfo, (cl_kernel kernel, cl_uint arg_indx, cl_kernel_arg_info param_name, size_t param_value_size, void * param_value, size_t * param_value_size_ret), (kernel, arg_indx, param_name, param_value_size, param_value, param_value_size_ret))
UVCL_TIMED(cl_int, clGetKernelWorkGroupInfo, (cl_kernel kernel, cl_device_id device, cl_kernel_work_group_info param_name, size_t param_value_size, void * param_value, size_t * param_value_size_ret), (kernel, device, param_name, param_value_size, param_value, param_value_size_ret))
UVCL_TIMED(cl_int, clSetKernelArg, (cl_kernel kernel, cl_uint arg_index, size_t arg_size, const void * arg_value), (kernel, arg_index, arg_size, arg_value))
UVCL_TIMED(cl_int, clReleaseKernel, (cl_kernel kernel), (kernel))
UVCL_STUBBED(cl_int, clEnqueueNDRangeKernel, (cl_command_queue command_queue, cl_kernel kernel, cl_uint work_dim, const size_t * global_work_offset, const size_t * global_work_size, const size_t * local_work_size, cl_uint num_events_in_wait_list, const cl_event * event_wait_list, cl_event * event), (command_queue, kernel, work_dim, global_work_offset, global_work_size, local_work_size, num_events_in_wait_list, event_wait_list, event))
UVCL_TIMED(cl_int, clEnqueueMarkerWithWaitList, (cl_command_queue command_queue, cl_uint num_events_in_wait_list, const cl_event * event_wait_list, cl_event * event), (command_queue, num_events_in_wait_list, event_wait_list, event))
UVCL_TIMED(cl_int, clGetEventInfo, (cl_event event, cl_event_info param_name, size_t param_value_size, void * param_value, size_t * param_value_size_ret), (event, param_name, param_value_size, param_value, param_value_size_ret))
UVCL_TIMED(cl_int, clGetEventProfilingInfo, (cl_event event, cl_profiling_info param_name, size_t param_value_size, void * param_value, size_t * param_value_size_ret), (event, param_name, param_value_size, param_value, param_value_size_ret))
UVCL_TIMED(cl_int, clSetEventCallback, (cl_event event, cl_int command_exec_callback_type, void (CL_CALLBACK * pfn_notify)(cl_event event, cl_int event_command_status, void * user_data), void * user_data), (event, command_exec_callback_type, pfn_notify, user_data))
UVCL_TIMED(cl_int, clRetainEvent, (cl_event event), (event))
UVCL_TIMED(cl_int, clReleaseEvent, (cl_event event), (event))
UVCL_TIMED(cl_event, clCreateUserEvent, (cl_context context, cl_int * errcode_ret), (context, errcode_ret))
UVCL_TIMED(cl_int, clSetUserEventStatus, (cl_event event, cl_int execution_status), (event, execution_status))
#undef UVCL_TIMED
#undef UVCL_STUBBED
// NOLINTEND(bugprone-macro-parentheses)
