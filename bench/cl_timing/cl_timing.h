// cl_timing.h — what the driver-call timing library hands the benchmark.
//
// libuvcl_cl_timing.so is an OpenCL library in its own right: it exports the
// entry points of uvcl's dispatch table (src/cl/api.hpp), forwards each call
// to the real OpenCL library and adds the call's wall time to a total per
// entry point. Loaded with `uvcl_bench --cl-library PATH` it sits under both
// the bare loops and the engines, so a figure can split a launch's host cost
// into the driver's share and uvcl's own where no profiler is installed.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

struct UvclClTiming {
  const char* name;     // "clEnqueueNDRangeKernel", ...
  std::uint64_t calls;  // since the last take
  std::uint64_t ns;     // wall time inside the real library, summed
};

// Fills `out` with min(cap, N) totals since the last take, in the dispatch
// table's order, and starts new ones; returns N, the number of entry points.
std::size_t uvcl_cl_timing_take(UvclClTiming* out, std::size_t cap);

}  // extern "C"

// The name the benchmark looks the function up by in the opened library.
inline constexpr const char* kUvclClTimingTake = "uvcl_cl_timing_take";
using UvclClTimingTakeFn = std::size_t (*)(UvclClTiming*, std::size_t);
