// Config::spin_us: the loop polls for completions without sleeping while a
// command someone waits for is in flight, and stops once the engine is idle.
#include <uv.h>

#include "../watchdog.hpp"
#include "engine/records.hpp"
#include "engine_test_util.hpp"

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
  std::uint64_t spin_ns = 0;  // EngineStats::spin_ns after the read
};

SpinRun read_back_with_spin(std::optional<unsigned> spin_us) {
  SpinRun out;
  Config c = test_config();
  c.spin_us = spin_us;
  // The idle handle also keeps the loop turning for outcomes an iteration
  // left over when it ran out of its budget (a slow, loaded or sanitized
  // build): with no bound there is none, and it is started only to spin.
  c.loop_budget_us = 0;  // 0: no bound
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
  out.spin_ns = e.stats().spin_ns;
  EXPECT_TRUE(e.release(*b).ok());
  return out;
}

TEST(SpinTest, SpinsWhileAReadIsInFlightAndStopsWhenIdle) {
  const SpinRun r = read_back_with_spin(1000000);  // a deadline far beyond the read
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(r.idle_during, 1) << "spin_us > 0: the loop spins while the read is in flight";
  EXPECT_EQ(r.idle_after, 0) << "still spinning after the engine went idle";
  EXPECT_GT(r.spin_ns, 0u) << "the spinning is not reported";
}

// A one-work-item kernel that runs for about `ms` and writes its result to
// `out`; `expect` is what it writes. Launched, not waited for.
void launch_slow_kernel(Engine& e, std::uint32_t seed, double ms, Buffer& out, std::uint32_t& expect) {
  auto p = e.compile_sync(0, util::kKernels);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  auto spin = e.kernel(*p, "spin");
  ASSERT_TRUE(spin.ok());
  auto in = e.allocate(0, 4), made = e.allocate(0, 4);
  ASSERT_TRUE(in.ok() && made.ok());
  out = *made;
  ASSERT_TRUE(e.write(*in, 0, bytes_of(std::vector<std::uint32_t>{seed})).ok());
  const std::uint32_t iters = util::spin_iters_for(e, *spin, ms);
  ASSERT_TRUE(e.finish().ok());
  expect = util::lcg_steps(seed, iters);
  ASSERT_TRUE(e.launch(util::make_launch(*spin, {util::buf(*in), util::buf(out), util::u32(iters), util::u32(1)}, {1}, {1})).ok());
}

// An engine spinning spin_us for awaited commands, with a ~100 ms kernel
// that writes `out` already launched (launch_slow_kernel).
struct BehindSlowKernel {
  std::unique_ptr<Engine> engine;
  Buffer out;
  std::uint32_t expect = 0;
};
void make_behind_slow_kernel(unsigned spin_us, BehindSlowKernel& s) {
  Config c = test_config();
  c.spin_us = spin_us;
  // The idle handle also keeps the loop turning for outcomes an iteration
  // left over when it ran out of its budget (a slow, loaded or sanitized
  // build): with no bound there is none, and it is started only to spin.
  c.loop_budget_us = 0;  // 0: no bound
  auto made = Engine::create(c);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  s.engine = std::move(made.value());
  ASSERT_NO_FATAL_FAILURE(launch_slow_kernel(*s.engine, 5, 100, s.out, s.expect));
}

std::uint32_t word_of(std::span<const std::byte> d) {
  std::uint32_t v = 0;
  std::memcpy(&v, d.data(), sizeof v);
  return v;
}

// Spinning ends (its deadline passes) while the read still runs behind a
// slow kernel: the driver's callback, asked for only then, must still bring
// the read's completion.
TEST(SpinTest, AReadOutlastingTheSpinStillCompletes) {
  Watchdog wd("a read that outlasts spin_us", 30);
  BehindSlowKernel s;
  ASSERT_NO_FATAL_FAILURE(make_behind_slow_kernel(1, s));
  Engine& e = *s.engine;
  const Buffer out = s.out;
  const std::uint32_t expect = s.expect;
  bool got = false;
  ASSERT_TRUE(e.read(out, 0, 4, [&](Result<std::span<const std::byte>> r) {
    got = true;
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(word_of(*r), expect);
  }).ok());
  uv_run(e.loop(), UV_RUN_DEFAULT);
  EXPECT_TRUE(got);
  EXPECT_EQ(active_idle_handles(e.loop()), 0);
}

// Reads issued while the loop spins, all still running behind a slow kernel
// when the spin ends: one driver callback for the queue, on the last read
// (the others complete before it on the in-order queue), not one per read.
// More reads than the 256 a list of waiting commands once kept before it
// was searched at every read: the cost of a read must not grow with the
// reads before it.
TEST(SpinTest, ReadsStillRunningWhenTheSpinEndsAskOneCallbackPerQueue) {
  Watchdog wd("reads that outlast spin_us", 60);
  Config c = test_config();
  c.spin_us = 50'000;  // all the reads are issued within one spin; the kernel outlasts it
  c.queues = 1;
  auto made = Engine::create(c);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  Engine& e = **made;
  Buffer out;
  std::uint32_t expect = 0;
  ASSERT_NO_FATAL_FAILURE(launch_slow_kernel(e, 7, 250, out, expect));
  const std::uint64_t callbacks0 = e.stats().callbacks;
  constexpr int kReads = 300;
  int good = 0;
  for (int i = 0; i < kReads; ++i)
    ASSERT_TRUE(e.read(out, 0, 4, [&](Result<std::span<const std::byte>> r) {
      ASSERT_TRUE(r.ok()) << r.error().to_string();
      if (word_of(*r) == expect) ++good;
    }).ok());
  ASSERT_TRUE(e.run_until([&] { return good == kReads; }).ok());
  EXPECT_EQ(good, kReads);
  EXPECT_LE(e.stats().callbacks - callbacks0, 1u) << "a driver callback per read still running when the spin ended";
}

// spin_ns is the loop's spinning, not the callbacks it delivered meanwhile:
// a read whose callback computes for 150 ms while the loop spins (a 1 s
// spin bound, so only idleness ends the spin) adds about the read's own
// latency, not the callback's time.
TEST(SpinTest, SpinTimeLeavesOutTheCallbacks) {
  Watchdog wd("a read whose callback computes while the loop spins", 60);
  Config c = test_config();
  c.spin_us = kMaxSpinUs;
  auto made = Engine::create(c);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  Engine& e = **made;
  auto b = e.allocate(0, 4096);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(e.finish().ok());
  constexpr std::uint64_t kCallbackNs = 150 * 1000 * 1000;
  bool got = false;
  const std::uint64_t t0 = uv_hrtime();
  ASSERT_TRUE(e.read(*b, 0, 4096, [&](Result<std::span<const std::byte>> r) {
    EXPECT_TRUE(r.ok());
    const std::uint64_t until = uv_hrtime() + kCallbackNs;
    while (uv_hrtime() < until) {
    }
    got = true;
  }).ok());
  uv_run(e.loop(), UV_RUN_DEFAULT);  // returns once nothing is in flight
  const std::uint64_t wall = uv_hrtime() - t0;
  ASSERT_TRUE(got);
  const std::uint64_t spin = e.stats().spin_ns;
  EXPECT_GT(spin, 0u) << "the spinning is not reported";
  EXPECT_GE(wall, kCallbackNs);
  EXPECT_LE(spin, wall - kCallbackNs) << "the callback's " << kCallbackNs / 1000000 << " ms counted as spinning";
  EXPECT_TRUE(e.release(*b).ok());
}

// The read behind a slow kernel outlasts its spin and comes by the driver's
// callback, outside any spin. Its callback issues another read, which starts
// a spin, and then computes for 150 ms: that time is the callback's, not the
// spin's.
TEST(SpinTest, ASpinStartedInsideACallbackLeavesOutTheRestOfIt) {
  Watchdog wd("a callback that starts a spin, then computes", 60);
  BehindSlowKernel s;
  ASSERT_NO_FATAL_FAILURE(make_behind_slow_kernel(1000, s));
  Engine& e = *s.engine;
  const Buffer out = s.out;
  constexpr std::uint64_t kCallbackNs = 150 * 1000 * 1000;
  int got = 0;
  std::uint64_t spin_before = 0;
  ASSERT_TRUE(e.read(out, 0, 4, [&](Result<std::span<const std::byte>> r) {
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    spin_before = e.stats().spin_ns;
    EXPECT_TRUE(e.read(out, 0, 4, [&](Result<std::span<const std::byte>>) { ++got; }).ok());
    const std::uint64_t until = uv_hrtime() + kCallbackNs;
    while (uv_hrtime() < until) {
    }
    ++got;
  }).ok());
  uv_run(e.loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(got, 2);
  const std::uint64_t spun = e.stats().spin_ns - spin_before;
  EXPECT_LT(spun, kCallbackNs / 2) << "the callback's time after its read counted as spinning";
}

TEST(SpinTest, NoSpinningAtZero) {
  const SpinRun r = read_back_with_spin(0u);
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(r.idle_during, 0);
  EXPECT_EQ(r.idle_after, 0);
  EXPECT_EQ(r.spin_ns, 0u);
}

// "auto" spins on GPUs only: on a CPU device the spinning core is one the
// kernels need.
TEST(SpinTest, AutoDoesNotSpinOnACpuDevice) {
  const SpinRun r = read_back_with_spin(std::nullopt);
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(r.idle_during, 0);
  EXPECT_EQ(r.spin_ns, 0u);
}

// "auto" on a GPU: a large awaited transfer spins for the length the last
// one of its kind took per byte, with a quarter to spare and a bound; small
// ones and kinds not seen yet get the plain spin only.
TEST(SpinTest, SpinRatesFollowTheLastLargeTransferOfEachKind) {
  SpinRates rates;
  const std::size_t mib = SpinRates::kMinBytes;
  EXPECT_EQ(rates.extra_ns(Op::Copy, 256 * mib), 0u) << "nothing learned yet";
  rates.learn(Op::Copy, 256 * mib, 1'000'000);  // 256 MiB in 1 ms
  EXPECT_EQ(rates.extra_ns(Op::Copy, 128 * mib), 625'000u);
  EXPECT_EQ(rates.extra_ns(Op::Read, 128 * mib), 0u) << "another kind of transfer";
  EXPECT_EQ(rates.extra_ns(Op::Copy, mib - 1), 0u) << "small: the plain spin covers it";
  rates.learn(Op::Copy, mib / 2, 1'000'000'000);  // too small to learn from
  EXPECT_EQ(rates.extra_ns(Op::Copy, 128 * mib), 625'000u);
  rates.learn(Op::Write, mib, 1'000'000'000);  // a second per MiB
  EXPECT_EQ(rates.extra_ns(Op::Write, 256 * mib), SpinRates::kMaxSpinNs) << "bounded";
  EXPECT_EQ(rates.extra_ns(Op::Launch, 256 * mib), 0u);
}

}  // namespace
}  // namespace uvcl::testing
