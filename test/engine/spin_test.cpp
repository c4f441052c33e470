// Config::spin_us: the loop polls for completions without sleeping while a
// command someone waits for is in flight, and stops once the engine is idle.
#include <uv.h>

#include "engine_fixture.hpp"

namespace uvcl::testing {
namespace {

// Active idle handles on the loop: the engine spins through one.
int active_idle_handles(uv_loop_t* loop) {
  int n = 0;
  uv_walk(loop, [](uv_handle_t* h, void* arg) {
    if (h->type == UV_IDLE && uv_is_active(h)) ++*static_cast<int*>(arg);
  }, &n);
  return n;
}

struct SpinRun {
  bool correct = false;
  int idle_during = -1;  // active idle handles seen inside the read callback
  int idle_after = -1;
};

SpinRun read_back_with_spin(unsigned spin_us) {
  SpinRun out;
  Config c = test_config();
  c.spin_us = spin_us;
  auto made = Engine::create(c);
  EXPECT_TRUE(made.ok()) << made.error().to_string();
  if (!made.ok()) return out;
  Engine& e = **made;
  std::vector<int> v(1024);
  for (int i = 0; i < 1024; ++i) v[i] = 3 * i;
  auto b = e.allocate(0, v.size() * sizeof(int));
  EXPECT_TRUE(b.ok());
  if (!b.ok()) return out;
  EXPECT_TRUE(e.write(*b, 0, bytes_of(v)).ok());
  bool got = false;
  EXPECT_TRUE(e.read(*b, 0, v.size() * sizeof(int), [&](Result<std::span<const std::byte>> r) {
    got = true;
    out.idle_during = active_idle_handles(e.loop());
    out.correct = r.ok() && r->size() == v.size() * sizeof(int) && std::memcmp(r->data(), v.data(), r->size()) == 0;
  }).ok());
  uv_run(e.loop(), UV_RUN_DEFAULT);  // returns once nothing is in flight
  EXPECT_TRUE(got) << "uv_run returned before the read completed";
  out.idle_after = active_idle_handles(e.loop());
  EXPECT_TRUE(e.release(*b).ok());
  return out;
}

TEST(SpinTest, SpinsWhileAReadIsInFlightAndStopsWhenIdle) {
  const SpinRun r = read_back_with_spin(1000000);  // a deadline far beyond the read
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(r.idle_during, 1) << "spin_us > 0: the loop spins while the read is in flight";
  EXPECT_EQ(r.idle_after, 0) << "still spinning after the engine went idle";
}

TEST(SpinTest, NoSpinningByDefault) {
  const SpinRun r = read_back_with_spin(0);
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(r.idle_during, 0);
  EXPECT_EQ(r.idle_after, 0);
}

}  // namespace
}  // namespace uvcl::testing
