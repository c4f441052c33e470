// Heap allocations on the per-launch path, counted with a replaced global
// operator new (this executable only). In steady state a launch costs the
// engine no allocation: its lists are inline, its record and graph node
// reuse memory of retired ones; what remains is per window, not per launch.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "engine_fixture.hpp"

namespace {
std::atomic<long> g_allocations{0};
std::atomic<bool> g_counting{false};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace uvcl::testing::alloc {

double allocations_per_launch(CommandEvents events) {
  Config c = test_config();
  c.command_events = events;
  auto made = Engine::create(c);
  EXPECT_TRUE(made.ok()) << made.error().to_string();
  if (!made.ok()) return -1;
  Engine& e = *made.value();
  auto p = e.compile_sync(0, kTwiceKernel);
  EXPECT_TRUE(p.ok());
  auto k = e.kernel(*p, "twice");
  auto b = e.allocate(0, 64 * 4);
  EXPECT_TRUE(k.ok() && b.ok());
  const Launch l{*k, {KernelArg::of(*b), KernelArg::value<std::uint32_t>(64)}, {64}};
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

}  // namespace uvcl::testing::alloc
