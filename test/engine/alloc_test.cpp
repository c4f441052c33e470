// Heap allocations on the per-launch path, counted with a replaced global
// operator new (this executable only). In steady state a launch costs the
// engine no allocation: its lists are inline, its record and graph node
// reuse memory of retired ones; what remains is per window, not per launch.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "engine_fixture.hpp"
#include "uvcl/uvcl.h"

namespace {
std::atomic<long> g_allocations{0};
std::atomic<long> g_large_allocations{0};  // of at least kLargeBytes
std::atomic<bool> g_counting{false};
constexpr std::size_t kLargeBytes = 64 * 1024;
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (n >= kLargeBytes) g_large_allocations.fetch_add(1, std::memory_order_relaxed);
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The replaced operator new allocates with malloc, so free is the match; GCC
// sees only the free in a delete and warns.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace uvcl::testing::alloc {

constexpr int kZero = 0;

// An engine and a launch of kTwiceKernel over one buffer: what each test
// here issues over and over. No engine if a step failed (reported).
struct TwiceLaunch {
  std::unique_ptr<Engine> engine;
  Launch launch;
};
TwiceLaunch twice_launch(const Config& c) {
  TwiceLaunch t;
  auto made = Engine::create(c);
  EXPECT_TRUE(made.ok()) << made.error().to_string();
  if (!made.ok()) return t;
  auto p = made.value()->compile_sync(0, kTwiceKernel);
  EXPECT_TRUE(p.ok());
  if (!p.ok()) return t;
  auto k = made.value()->kernel(*p, "twice");
  auto b = made.value()->allocate(0, 64 * 4);
  EXPECT_TRUE(k.ok() && b.ok());
  if (!k.ok() || !b.ok()) return t;
  t.launch = Launch{*k, {KernelArg::of(*b), KernelArg::value<std::uint32_t>(64)}, {64}};
  t.engine = std::move(made.value());
  return t;
}

double allocations_per_launch(CommandEvents events) {
  Config c = test_config();
  c.command_events = events;
  TwiceLaunch t = twice_launch(c);
  if (!t.engine) return -1;
  Engine& e = *t.engine;
  const Launch& l = t.launch;
  auto chain = [&](int n) {
    for (int i = 0; i < n; ++i) EXPECT_TRUE(e.launch(l).ok());
    EXPECT_TRUE(e.finish().ok());
  };
  chain(3000);  // warm: pools, chunks and vectors at their working size
  constexpr int kLaunches = 20000;
  g_allocations = 0;
  g_counting = true;
  // Launches only: finish() runs the loop, whose callbacks are not the
  // launch path.
  for (int i = 0; i < kLaunches; ++i) EXPECT_TRUE(e.launch(l).ok());
  g_counting = false;
  const double per_launch = static_cast<double>(g_allocations.load()) / kLaunches;
  EXPECT_TRUE(e.finish().ok());
  return per_launch;
}

TEST(Allocations, ALaunchAllocatesNothingInSteadyState) {
  for (CommandEvents events : {CommandEvents::Awaited, CommandEvents::All}) {
    const double per_launch = allocations_per_launch(events);
    std::printf("%s: %.3f heap allocations per launch\n", events == CommandEvents::All ? "all" : "awaited",
                per_launch);
    // A window's batch vector and the completion step's lists are per window
    // (100 launches), not per launch.
    EXPECT_LT(per_launch, 0.1) << (events == CommandEvents::All ? "all" : "awaited");
  }
}

// Bursts of launches, each run to completion (a frame's work, a request's):
// once the first bursts have run (a burst's records may start anywhere in
// a block of them), the next ones find the engine's record storage still
// there. Freed and taken again per burst, its blocks are
// large enough that the allocator's free consolidates its heap.
TEST(Allocations, BurstsOfLaunchesAllocateNoLargeBlockOnceWarm) {
  TwiceLaunch t = twice_launch(test_config());
  ASSERT_TRUE(t.engine);
  Engine& e = *t.engine;
  const Launch& l = t.launch;
  constexpr int kBurst = 2000, kBursts = 5;
  auto burst = [&] {
    for (int i = 0; i < kBurst; ++i) EXPECT_TRUE(e.launch(l).ok());
  };
  for (int warm = 0; warm < 2; ++warm) {
    burst();
    ASSERT_TRUE(e.finish().ok());
  }
  g_large_allocations = 0;
  for (int n = 0; n < kBursts; ++n) {
    g_counting = true;
    burst();
    g_counting = false;
    ASSERT_TRUE(e.finish().ok());
  }
  EXPECT_EQ(g_large_allocations.load(), 0) << "over " << kBursts << " bursts of " << kBurst << " launches";
}

// A callback per launch, as a function and a pointer (Engine::launch's
// overload, and uvcl_launch of the C API, which reuses one uvcl::Launch per
// engine): no allocation for the callback either.
void count_done(int status, const char*, void* user_data) {
  auto* counts = static_cast<std::pair<long, long>*>(user_data);
  ++(status == 0 ? counts->first : counts->second);
}

TEST(Allocations, ALaunchWithAFunctionCallbackAllocatesNothingInSteadyState) {
  TwiceLaunch t = twice_launch(test_config());
  ASSERT_TRUE(t.engine);
  Engine& e = *t.engine;
  const Launch& l = t.launch;
  std::pair<long, long> counts{0, 0};
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(e.launch(l, count_done, &counts).ok());
  ASSERT_TRUE(e.finish().ok());
  constexpr int kLaunches = 20000;
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < kLaunches; ++i) EXPECT_TRUE(e.launch(l, count_done, &counts).ok());
  g_counting = false;
  const double per_launch = static_cast<double>(g_allocations.load()) / kLaunches;
  ASSERT_TRUE(e.finish().ok());
  std::printf("C++ launch with a function callback: %.3f heap allocations per launch\n", per_launch);
  EXPECT_LT(per_launch, 0.1);
  EXPECT_EQ(counts.first, 3000 + kLaunches);  // exactly once each, all succeeded
  EXPECT_EQ(counts.second, 0);
}

TEST(Allocations, ACApiLaunchWithACallbackAllocatesNothingInSteadyState) {
  uvcl_engine_t* e = nullptr;
  ASSERT_EQ(uvcl_engine_create(&e, nullptr, nullptr), 0) << uvcl_engine_last_error(e);
  uvcl_program_t prog = 0;
  uvcl_kernel_t k = 0;
  uvcl_buffer_t b = 0;
  ASSERT_EQ(uvcl_compile_sync(e, 0, kTwiceKernel, nullptr, UVCL_BUILD_OPTIONS_ADD, &prog), 0);
  ASSERT_EQ(uvcl_kernel_create(e, prog, "twice", nullptr, 0, &k), 0);
  ASSERT_EQ(uvcl_buffer_allocate(e, 0, 64 * 4, &b), 0);
  const uvcl_arg_t args[2] = {uvcl_arg_buffer(b), uvcl_arg_uint(64)};
  uvcl_launch_t l{};
  l.kernel = k;
  l.args = args;
  l.arg_count = 2;
  l.dims = 1;
  l.global[0] = 64;
  std::pair<long, long> counts{0, 0};
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(uvcl_launch(e, &l, count_done, &counts), 0);
  ASSERT_EQ(uvcl_finish(e), 0);
  constexpr int kLaunches = 20000;
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < kLaunches; ++i) EXPECT_EQ(uvcl_launch(e, &l, count_done, &counts), 0);
  g_counting = false;
  const double per_launch = static_cast<double>(g_allocations.load()) / kLaunches;
  ASSERT_EQ(uvcl_finish(e), 0) << uvcl_engine_last_error(e);
  std::printf("C API launch with a callback: %.3f heap allocations per launch\n", per_launch);
  EXPECT_LT(per_launch, 0.1);
  EXPECT_EQ(counts.first, 3000 + kLaunches);
  EXPECT_EQ(counts.second, 0);
  uvcl_engine_destroy(e);
}

// An awaited read, issued and completed, allocates nothing when the
// caller's callback fits std::function's own storage: the engine parks the
// callback with its staging block in a reused slot (wrapping the two in a
// new std::function cost one allocation per read), and the pinned block
// comes from a pool whose free lists keep their storage (a tree node per
// block given back cost one more).
TEST(Allocations, AnAwaitedReadAllocatesNothing) {
  auto made = Engine::create(test_config());
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  Engine& e = *made.value();
  auto b = e.allocate(0, 4096);
  ASSERT_TRUE(b.ok());
  int got = 0;
  auto reads = [&](int n) {
    for (int i = 0; i < n; ++i)
      EXPECT_TRUE(e.read(*b, 0, 4096, [&got](Result<std::span<const std::byte>> r) { got += r.ok() ? 1 : 0; }).ok());
    EXPECT_TRUE(e.run_until([&] { return got == n; }).ok());
    got = 0;
  };
  reads(500);  // warm: staging blocks, records, lists
  constexpr int kReads = 2000;
  g_allocations = 0;
  g_counting = true;
  reads(kReads);
  g_counting = false;
  const double per_read = static_cast<double>(g_allocations.load()) / kReads;
  std::printf("%.3f heap allocations per awaited read\n", per_read);
  EXPECT_LT(per_read, 0.5);
}

// A temporary allocated, written by one kernel, read by the next and
// released while both are in flight (figure 6's loop) allocates nothing
// once warm: the list of buffers a command frees and the buffer's list of
// readers keep their first entries inline.
TEST(Allocations, ATemporaryFreedInFlightAllocatesNothing) {
  auto made = Engine::create(test_config());
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  Engine& e = *made.value();
  auto p = e.compile_sync(0, R"CL(
__kernel void produce(__global int* t, __global const int* in) { t[get_global_id(0)] = in[get_global_id(0)] + 1; }
__kernel void consume(__global int* out, __global const int* t) { out[get_global_id(0)] += t[get_global_id(0)]; }
)CL");
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  auto produce = e.kernel(*p, "produce");
  auto consume = e.kernel(*p, "consume");
  auto in = e.allocate(0, 64 * 4);
  auto out = e.allocate(0, 64 * 4);
  ASSERT_TRUE(produce.ok() && consume.ok() && in.ok() && out.ok());
  ASSERT_TRUE(e.fill(*in, std::as_bytes(std::span<const int>(&kZero, 1)), 0, 64 * 4).ok());
  ASSERT_TRUE(e.fill(*out, std::as_bytes(std::span<const int>(&kZero, 1)), 0, 64 * 4).ok());
  Launch lp{*produce, {}, {64}}, lc{*consume, {}, {64}};
  auto loop = [&](int n) {
    for (int i = 0; i < n; ++i) {
      auto t = e.allocate(0, 64 * 4);
      ASSERT_TRUE(t.ok()) << t.error().to_string();
      lp.args = {KernelArg::of(*t), KernelArg::of(*in)};
      lc.args = {KernelArg::of(*out), KernelArg::of(*t)};
      EXPECT_TRUE(e.launch(lp).ok());
      EXPECT_TRUE(e.launch(lc).ok());
      EXPECT_TRUE(e.release(*t).ok());
    }
    EXPECT_TRUE(e.finish().ok());
  };
  loop(1000);  // warm
  constexpr int kIterations = 3000;
  g_allocations = 0;
  g_counting = true;
  loop(kIterations);
  g_counting = false;
  const double per_iteration = static_cast<double>(g_allocations.load()) / kIterations;
  std::printf("%.3f heap allocations per allocate -> 2 launches -> release\n", per_iteration);
  EXPECT_LT(per_iteration, 0.5);
  auto got = e.read_sync(*out, 0, 4);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(as_vector<int>(got.value())[0], 4000) << "every consume added its temporary (1) to out";
}

}  // namespace uvcl::testing::alloc
