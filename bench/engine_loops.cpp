// engine_loops — the engine's own work per command, for an instruction
// profiler: one kind of command issued back to back, three rounds of 3000,
// each round run to completion. Figures in bench/notes.md come from
//
//   valgrind --tool=callgrind --toggle-collect='uvcl::Engine::launch(*'
//       --toggle-collect='uvcl::Engine::finish(*' engine_loops launches
//   valgrind --tool=callgrind --toggle-collect='uvcl::Engine::read(*'
//       --toggle-collect='uvcl::Engine::run_until(*' engine_loops reads
//   valgrind --tool=callgrind --toggle-collect='uvcl::Engine::write(*' engine_loops writes
//   valgrind --tool=callgrind --toggle-collect='uvcl::Engine::allocate(*'
//       --toggle-collect='uvcl::Engine::launch(*' --toggle-collect='uvcl::Engine::release(*'
//       --toggle-collect='uvcl::Engine::finish(*' engine_loops frees
//
// ("frees" is figure 6's iteration: allocate a temporary, a kernel writes
// it, another reads it, release it; "spread" is figure 1 (b): each launch
// on the next of 1024 buffers, so over every queue)
// on the first device (PoCL here); a second argument picks another device by
// index (for perf on a GPU), a third, "gpu", gives the engine what "auto"
// gives a GPU (queues, spin, read bursts, events only where awaited, polled
// completion), to follow a GPU's path on a CPU device, and a fourth names
// the OpenCL library to load: libuvcl_cl_timing.so with
// UVCL_CL_TIMING_STUB_KERNELS stands in for a GPU driver's kernel launch,
// the caches it leaves cold included. It prints the wall time per
// iteration of its fastest round (and, through the timing library, the
// time outside OpenCL calls); exit status 1 with a message on error.
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "uvcl/config.hpp"
#include "uvcl/engine.hpp"
#include "cl_timing/cl_timing.h"

using namespace uvcl;

namespace {

int fail(const Error& e) {
  std::fprintf(stderr, "engine_loops: %s\n", e.to_string().c_str());
  return 1;
}

constexpr int kRounds = 3, kPerRound = 3000;

// The timing library's totals, if it is the library loaded: the time spent
// in OpenCL calls since the last call, in ns; 0 otherwise.
std::uint64_t driver_ns(UvclClTimingTakeFn take) {
  if (take == nullptr) return 0;
  std::array<UvclClTiming, 128> totals{};  // more than the dispatch table's entry points
  const std::size_t n = std::min(take(totals.data(), totals.size()), totals.size());
  std::uint64_t ns = 0;
  for (std::size_t i = 0; i < n; ++i) ns += totals[i].ns;
  return ns;
}

// Figure 6's iteration: a temporary written by one kernel, read by the next,
// released while both are in flight.
Result<void> free_in_flight(Engine& e, std::uint32_t device, Buffer in, Buffer out, Launch& produce, Launch& consume) {
  auto t = e.allocate(device, 4096);
  if (!t) return t.error();
  produce.args = {KernelArg::of(*t), KernelArg::of(in)};
  consume.args = {KernelArg::of(out), KernelArg::of(*t)};
  if (auto r = e.launch(produce); !r) return r;
  if (auto r = e.launch(consume); !r) return r;
  return e.release(*t);
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  const bool spread = std::strcmp(mode, "spread") == 0;
  if (std::strcmp(mode, "launches") != 0 && std::strcmp(mode, "reads") != 0 && std::strcmp(mode, "writes") != 0 &&
      std::strcmp(mode, "frees") != 0 && !spread) {
    std::fprintf(stderr, "usage: engine_loops launches|spread|reads|writes|frees [DEVICE [gpu [LIBRARY]]]\n");
    return 2;
  }
  std::uint32_t device = 0;
  if (argc > 2) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || v > 1024) {
      std::fprintf(stderr, "engine_loops: DEVICE: expected a device index, got \"%s\"\n", argv[2]);
      return 2;
    }
    device = static_cast<std::uint32_t>(v);
  }
  if (argc > 3 && (argc > 5 || std::strcmp(argv[3], "gpu") != 0)) {
    std::fprintf(stderr, "engine_loops: expected \"gpu\" or nothing after DEVICE, then a library, got \"%s\"\n",
                 argv[argc > 5 ? 5 : 3]);
    return 2;
  }
  Config config;
  if (argc > 3) {
    config.queues = kAutoGpuQueues;
    config.spin_us = kAutoSpinUs;
    config.read_burst_us = kAutoReadBurstUs;
    config.command_events = CommandEvents::Awaited;
    config.completion = CompletionMode::Poll;
  }
  if (argc > 4) config.library = argv[4];
  auto made = Engine::create(config);
  if (!made) return fail(made.error());
  Engine& e = **made;
  auto b = e.allocate(device, 4096);
  if (!b) return fail(b.error());
  auto out = e.allocate(device, 4096);
  if (!out) return fail(out.error());
  std::vector<std::byte> bytes(4096);
  Launch l, produce, consume;
  if (std::strcmp(mode, "frees") == 0) {
    auto p = e.compile_sync(device,
                            "__kernel void produce(__global float* t, __global const float* in) {"
                            "  t[get_global_id(0)] = in[get_global_id(0)] * 2.0f; }"
                            "__kernel void consume(__global float* out, __global const float* t) {"
                            "  out[get_global_id(0)] += t[get_global_id(0)]; }");
    if (!p) return fail(p.error());
    auto kp = e.kernel(*p, "produce");
    auto kc = e.kernel(*p, "consume");
    if (!kp) return fail(kp.error());
    if (!kc) return fail(kc.error());
    produce.kernel = *kp;
    produce.global = {1024};
    consume.kernel = *kc;
    consume.global = {1024};
  }
  std::vector<Buffer> many;
  for (std::size_t i = 0; spread && i < 1024; ++i) {
    auto m = e.allocate(device, 4096);  // add1 runs over 1024 floats
    if (!m) return fail(m.error());
    many.push_back(*m);
  }
  if (std::strcmp(mode, "launches") == 0 || spread) {
    auto p = e.compile_sync(device, "__kernel void add1(__global float* a, float s) { a[get_global_id(0)] += s; }");
    if (!p) return fail(p.error());
    auto k = e.kernel(*p, "add1");
    if (!k) return fail(k.error());
    l.kernel = *k;
    l.args = {KernelArg::of(*b), KernelArg::value(1.0f)};
    l.global = {1024};
  }
  if (auto r = e.finish(); !r) return fail(r.error());
  UvclClTimingTakeFn take = nullptr;
  if (!config.library.empty()) {
    if (void* lib = ::dlopen(config.library.c_str(), RTLD_NOW | RTLD_NOLOAD))
      take = reinterpret_cast<UvclClTimingTakeFn>(::dlsym(lib, kUvclClTimingTake));
  }
  double best_ns = 0, best_own_ns = 0;
  for (int round = 0; round < kRounds; ++round) {
    (void)driver_ns(take);
    const auto t0 = std::chrono::steady_clock::now();
    int got = 0;
    for (int i = 0; i < kPerRound; ++i) {
      Result<void> r;
      if (spread) l.args[0] = KernelArg::of(many[static_cast<std::size_t>(i) % many.size()]);
      if (mode[0] == 'l' || spread) r = e.launch(l);
      else if (mode[0] == 'f') r = free_in_flight(e, device, *b, *out, produce, consume);
      else if (mode[0] == 'r') r = e.read(*b, 0, bytes.size(), [&got](Result<std::span<const std::byte>>) { ++got; });
      else r = e.write(*b, 0, bytes, i % 2 ? WriteMode::Borrow : WriteMode::Copy);
      if (!r) return fail(r.error());
    }
    if (mode[0] == 'r') {
      if (auto r = e.run_until([&] { return got == kPerRound; }); !r) return fail(r.error());
    }
    if (auto r = e.finish(); !r) return fail(r.error());
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kPerRound;
    const double own_ns = ns - static_cast<double>(driver_ns(take)) / kPerRound;
    if (round == 0 || ns < best_ns) best_ns = ns;
    if (round == 0 || own_ns < best_own_ns) best_own_ns = own_ns;
  }
  std::printf("engine_loops %s: %.0f ns per iteration (best of %d rounds of %d)", mode, best_ns, kRounds, kPerRound);
  if (take != nullptr) std::printf(", %.0f ns outside OpenCL calls", best_own_ns);
  std::printf("\n");
  return 0;
}
