// Work that does not depend on a slow kernel does not wait for it: a read of
// another buffer, timed launches ordering, and a game loop's poll().
#include <chrono>
#include <thread>

#include "engine_test_util.hpp"

namespace uvcl::testing::overlap {

using util::buf;
using util::make_launch;
using util::u32;

class Overlap : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    Program p = compile(util::kKernels);
    spin_ = kernel(p, "spin");
    set_ = kernel(p, "set_value");
  }
  Kernel spin_, set_;
};

// A read waits for its buffer's last writer only, not for the device.
TEST_F(Overlap, ReadOfOneBufferCompletesWhileALongKernelRunsOnAnother) {
  const std::vector<std::uint32_t> a_values = util::iota_values(1024, 7, 3);
  Buffer a = upload(a_values);
  Buffer b_in = upload(std::vector<std::uint32_t>{12345u});
  auto b = eng().allocate(0, 4);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(eng().finish().ok());
  const std::uint32_t iters = util::spin_iters_for(eng(), spin_, 350.0);

  const std::uint64_t t0 = uv_hrtime();
  ASSERT_TRUE(eng().launch(make_launch(spin_, {buf(b_in), buf(b.value()), u32(iters), u32(1)}, {1}, {1})).ok());
  std::uint64_t t_a = 0, t_b = 0, in_flight_at_a = 0;
  std::vector<std::uint32_t> got_a;
  std::uint32_t got_b = 0;
  ASSERT_TRUE(eng()
                  .read(a, 0, a_values.size() * 4,
                        [&](Result<std::span<const std::byte>> r) {
                          t_a = uv_hrtime();
                          in_flight_at_a = eng().stats().in_flight;
                          ASSERT_TRUE(r.ok()) << r.error().to_string();
                          got_a.resize(r->size() / 4);
                          std::memcpy(got_a.data(), r->data(), r->size());
                        })
                  .ok());
  ASSERT_TRUE(eng()
                  .read(b.value(), 0, 4,
                        [&](Result<std::span<const std::byte>> r) {
                          t_b = uv_hrtime();
                          ASSERT_TRUE(r.ok()) << r.error().to_string();
                          std::memcpy(&got_b, r->data(), 4);
                        })
                  .ok());
  ASSERT_TRUE(eng().run_until([&] { return t_a != 0 && t_b != 0; }).ok());
  EXPECT_EQ(got_a, a_values);
  EXPECT_EQ(got_b, util::lcg_steps(12345u, iters));
  EXPECT_LT(t_a, t_b) << "the read of A waited for the kernel on B";
  EXPECT_GT(in_flight_at_a, 0u) << "nothing was in flight when A arrived";
  EXPECT_LT(t_a - t0, (t_b - t0) / 2) << "A took " << (t_a - t0) / util::kMs << " ms, B " << (t_b - t0) / util::kMs
                                      << " ms";
}

TEST_F(Overlap, TimedLaunchReportsTimesAndRunsAfterEarlierWork) {
  constexpr std::uint32_t kN = 64;
  Buffer x_in = upload(std::vector<std::uint32_t>{99u});
  auto x = eng().allocate(0, 4);
  auto y = eng().allocate(0, kN * 4);
  auto z = eng().allocate(0, kN * 4);
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  // Warm up set_value (PoCL compiles a kernel for its sizes at first launch).
  ASSERT_TRUE(eng().launch(make_launch(set_, {buf(z.value()), u32(1), u32(kN)}, {kN})).ok());
  ASSERT_TRUE(eng().finish().ok());
  const std::uint32_t slow = util::spin_iters_for(eng(), spin_, 60.0);

  // Alone: device time > 0, and wall time (submission to completion) >= it.
  // The engine stamps "submission" when clEnqueue* has returned, and PoCL may
  // start the kernel before that (this thread can be descheduled in between),
  // so the sound bound is wall + duration of the submitting call >= device.
  std::uint64_t alone_ns = 0;
  {
    bool done = false;
    Result<Timing> t = Error{Status::Cancelled, "not called"};
    Result<void> submitted;
    const util::CallTime call = util::time_call([&] {
      submitted = eng().timed_launch(make_launch(spin_, {buf(x_in), buf(x.value()), u32(slow), u32(1)}, {1}, {1}),
                                     [&](Result<Timing> r) {
                                       done = true;
                                       t = std::move(r);
                                     });
    });
    ASSERT_TRUE(submitted.ok()) << submitted.error().to_string();
    ASSERT_TRUE(eng().run_until([&] { return done; }).ok());
    ASSERT_TRUE(t.ok()) << t.error().to_string();
    EXPECT_GT(t->device_ns, 1 * util::kMs);
    EXPECT_GE(1.01 * static_cast<double>(t->wall_ns + call.ns), static_cast<double>(t->device_ns))
        << "wall " << t->wall_ns << " ns, device " << t->device_ns << " ns, timed_launch() took " << call.ns << " ns";
    alone_ns = t->device_ns;
    const auto got = download<std::uint32_t>(x.value(), 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], util::lcg_steps(99u, slow));
  }

  // After earlier work: the same slow kernel on X, then a timed launch on Y
  // (which shares no buffer with it), then ordinary work on Z.
  util::ScheduleLog log;
  log.attach(eng());
  const std::uint64_t t0 = uv_hrtime();
  ASSERT_TRUE(eng().launch(make_launch(spin_, {buf(x_in), buf(x.value()), u32(slow), u32(1)}, {1}, {1}, 1)).ok());
  std::uint64_t t_timed = 0;
  bool z_read = false;
  Result<Timing> timed = Error{Status::Cancelled, "not called"};
  ASSERT_TRUE(eng()
                  .timed_launch(make_launch(set_, {buf(y.value()), u32(500), u32(kN)}, {kN}, {}, 2),
                                [&](Result<Timing> r) {
                                  t_timed = uv_hrtime();
                                  timed = std::move(r);
                                })
                  .ok());
  ASSERT_TRUE(eng().launch(make_launch(set_, {buf(z.value()), u32(900), u32(kN)}, {kN}, {}, 3)).ok());
  ASSERT_TRUE(eng().read(z.value(), 0, 4, [&](Result<std::span<const std::byte>>) { z_read = true; }).ok());
  ASSERT_TRUE(eng().run_until([&] { return t_timed != 0 && z_read; }).ok());
  ASSERT_TRUE(eng().finish().ok());
  log.detach();
  ASSERT_TRUE(timed.ok()) << timed.error().to_string();
  EXPECT_GT(timed->device_ns, 0u);
  EXPECT_LT(timed->device_ns, alone_ns / 4) << "the device time includes the wait for earlier work";
  // It completed after the slow kernel could have (a third of its time
  // alone: the machine may be faster now than when that was measured).
  EXPECT_GT(t_timed - t0, alone_ns / 3) << "the timed launch did not wait for earlier work";
  EXPECT_GT(timed->wall_ns, alone_ns / 3) << "its wall time includes the wait for earlier work";
  const auto y_values = download<std::uint32_t>(y.value(), kN);
  ASSERT_EQ(y_values.size(), kN);
  for (std::uint32_t i = 0; i < kN; ++i) EXPECT_EQ(y_values[i], 500 + i);
  const auto z_values = download<std::uint32_t>(z.value(), kN);
  ASSERT_EQ(z_values.size(), kN);
  for (std::uint32_t i = 0; i < kN; ++i) EXPECT_EQ(z_values[i], 900 + i);

  // In the schedule: the timed launch after the slow kernel, later work after
  // the timed launch — and later work on a compute queue, not the profiling one.
  const ScheduleEntry* slow_e = log.find_tag("launch", 1);
  const ScheduleEntry* timed_e = log.find_tag("launch", 2);
  const ScheduleEntry* later_e = log.find_tag("launch", 3);
  ASSERT_TRUE(slow_e && timed_e && later_e);
  util::HappensBefore hb(log.entries());
  EXPECT_TRUE(hb.ordered(slow_e->id, timed_e->id)) << util::describe(*timed_e);
  EXPECT_TRUE(hb.ordered(timed_e->id, later_e->id)) << util::describe(*later_e);
  EXPECT_LT(later_e->queue, eng().device(0)->queues) << util::describe(*later_e);
  EXPECT_LT(slow_e->queue, eng().device(0)->queues) << util::describe(*slow_e);
}

// A game loop calls poll() once per frame: it never blocks.
TEST_F(Overlap, PollNeverBlocks) {
  Buffer in = upload(std::vector<std::uint32_t>{7u});
  auto out = eng().allocate(0, 4);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(eng().finish().ok());
  const std::uint32_t iters = util::spin_iters_for(eng(), spin_, 80.0);
  ASSERT_TRUE(eng().launch(make_launch(spin_, {buf(in), buf(out.value()), u32(iters), u32(1)}, {1}, {1})).ok());
  bool arrived = false;
  std::uint32_t value = 0;
  ASSERT_TRUE(eng()
                  .read(out.value(), 0, 4,
                        [&](Result<std::span<const std::byte>> r) {
                          arrived = true;
                          if (r.ok()) std::memcpy(&value, r->data(), 4);
                        })
                  .ok());
  int polls = 0, polls_in_flight = 0, slow_polls = 0;
  std::uint64_t worst = 0;
  const std::uint64_t deadline = uv_hrtime() + 20000 * util::kMs;
  while (!arrived && uv_hrtime() < deadline) {
    const util::CallTime t = util::time_call([&] { eng().poll(); });
    ++polls;
    if (!arrived && eng().stats().in_flight > 0) ++polls_in_flight;
    // A call that took long because the thread was descheduled did not block.
    if (t.ns >= 5 * util::kMs && !t.preempted) {
      ++slow_polls;
      worst = std::max(worst, t.ns);
    }
    EXPECT_LT(t.ns, 40 * util::kMs) << "poll() blocked";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(arrived) << "the read never arrived through poll()";
  EXPECT_EQ(value, util::lcg_steps(7u, iters));
  EXPECT_EQ(slow_polls, 0) << "worst poll " << worst / 1000 << " us";
  EXPECT_GE(polls_in_flight, 10) << "poll() returned only " << polls << " times while the kernel ran";
  EXPECT_TRUE(eng().finish().ok());
}

}  // namespace uvcl::testing::overlap
