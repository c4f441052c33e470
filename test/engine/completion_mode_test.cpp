// Config::completion: how the loop hears of an awaited command's completion
// once it may sleep. Poll registers no driver callback (on NVIDIA's driver
// one callback slows every later launch of its context) and polls on a
// timer instead; the work still completes, with the right results.
#include <uv.h>

#include "../watchdog.hpp"
#include "engine_test_util.hpp"

namespace uvcl::testing {
namespace {

struct AwaitedRun {
  bool read_correct = false;
  bool finished = false;
  std::uint64_t callbacks = 0;  // EngineStats::callbacks at the end
  std::uint64_t polls = 0;      // EngineStats::polls at the end
};

// An engine with a ~100 ms launch ready: it writes res[0] =
// lcg_steps(seed, iters) (so the loop sleeps while it runs).
struct SlowKernel {
  std::unique_ptr<Engine> engine;
  Buffer in, res;
  std::uint32_t iters = 0;
  Launch launch;
};
std::optional<SlowKernel> slow_kernel_engine(const Config& c, std::uint32_t seed) {
  SlowKernel k;
  auto made = Engine::create(c);
  EXPECT_TRUE(made.ok()) << made.error().to_string();
  if (!made.ok()) return std::nullopt;
  k.engine = std::move(made.value());
  Engine& e = *k.engine;
  auto p = e.compile_sync(0, util::kKernels);
  EXPECT_TRUE(p.ok()) << p.error().to_string();
  if (!p.ok()) return std::nullopt;
  auto spin = e.kernel(*p, "spin");
  EXPECT_TRUE(spin.ok());
  auto in = e.allocate(0, 4), res = e.allocate(0, 4);
  EXPECT_TRUE(in.ok() && res.ok());
  if (!spin.ok() || !in.ok() || !res.ok()) return std::nullopt;
  k.in = *in;
  k.res = *res;
  const std::vector<std::uint32_t> seeds = {seed};
  EXPECT_TRUE(e.write(k.in, 0, bytes_of(seeds)).ok());
  k.iters = util::spin_iters_for(e, *spin, 100);
  k.launch = util::make_launch(*spin, {util::buf(k.in), util::buf(k.res), util::u32(k.iters), util::u32(1)}, {1}, {1});
  return k;
}

// A read behind the slow launch, then another launch and finish(): the
// read's callback and finish must both come without anyone else waking the
// loop.
AwaitedRun read_behind_a_slow_kernel(CompletionMode mode, std::optional<unsigned> spin_us) {
  AwaitedRun out;
  Config c = test_config();
  c.completion = mode;
  c.spin_us = spin_us;
  constexpr std::uint32_t kSeed = 7;
  auto k = slow_kernel_engine(c, kSeed);
  if (!k) return out;
  Engine& e = *k->engine;
  const Launch slow = k->launch;
  EXPECT_TRUE(e.launch(slow).ok());
  EXPECT_TRUE(e.read(k->res, 0, 4, [&](Result<std::span<const std::byte>> r) {
    EXPECT_TRUE(r.ok()) << r.error().to_string();
    if (!r.ok()) return;
    std::uint32_t v = 0;
    std::memcpy(&v, r->data(), 4);
    out.read_correct = v == util::lcg_steps(kSeed, k->iters);
  }).ok());
  uv_run(e.loop(), UV_RUN_DEFAULT);  // returns once nothing is in flight
  EXPECT_TRUE(e.launch(slow).ok());
  out.finished = e.finish().ok();
  out.callbacks = e.stats().callbacks;
  out.polls = e.stats().polls;
  EXPECT_TRUE(e.release(k->in).ok());
  EXPECT_TRUE(e.release(k->res).ok());
  return out;
}

TEST(CompletionMode, PollRegistersNoDriverCallbackAndStillCompletes) {
  Watchdog wd("awaited work with completion \"poll\"", 60);
  for (std::optional<unsigned> spin : {std::optional<unsigned>{0u}, std::optional<unsigned>{1u}}) {
    const AwaitedRun r = read_behind_a_slow_kernel(CompletionMode::Poll, spin);
    EXPECT_TRUE(r.read_correct) << "spin_us " << *spin;
    EXPECT_TRUE(r.finished) << "spin_us " << *spin;
    EXPECT_EQ(r.callbacks, 0u) << "spin_us " << *spin << ": a driver callback was registered";
    // 200 ms of waiting: the fine timer's polls, then the 1 ms poll.
    EXPECT_GT(r.polls, 0u) << "spin_us " << *spin << ": the loop never set its fine timer";
    EXPECT_LT(r.polls, 200u) << "spin_us " << *spin << ": the polls do not back off";
  }
}

TEST(CompletionMode, CallbackAndAutoOnPoclAskTheDriver) {
  Watchdog wd("awaited work with completion \"callback\"", 60);
  for (CompletionMode mode : {CompletionMode::Callback, CompletionMode::Auto}) {
    const AwaitedRun r = read_behind_a_slow_kernel(mode, 0u);
    EXPECT_TRUE(r.read_correct);
    EXPECT_TRUE(r.finished);
    EXPECT_GT(r.callbacks, 0u) << (mode == CompletionMode::Auto ? "auto" : "callback");
    EXPECT_EQ(r.polls, 0u);
  }
}

// finish() while the loop spins for an earlier read: its wait must still be
// polled for once the spin ends (it was dropped, leaving only the 1 ms poll).
TEST(CompletionMode, AFinishAskedWhileSpinningIsPolledForAfterTheSpin) {
  Watchdog wd("finish() during a spin with completion \"poll\"", 60);
  Config c = test_config();
  c.completion = CompletionMode::Poll;
  c.spin_us = 5000;
  auto k = slow_kernel_engine(c, 3);
  ASSERT_TRUE(k.has_value());
  Engine& e = *k->engine;
  auto quick = e.allocate(0, 4);
  ASSERT_TRUE(quick.ok());
  ASSERT_TRUE(e.write(*quick, 0, bytes_of(std::vector<std::uint32_t>{3})).ok());
  ASSERT_TRUE(e.finish().ok());
  ASSERT_TRUE(e.launch(k->launch).ok());
  bool read = false;
  ASSERT_TRUE(e.read(*quick, 0, 4, [&](Result<std::span<const std::byte>> r) { read = r.ok(); }).ok());  // starts a spin
  const std::uint64_t polls0 = e.stats().polls;
  ASSERT_TRUE(e.finish().ok());  // asks for the slow kernel's completion while spinning
  EXPECT_TRUE(read);
  EXPECT_GT(e.stats().polls - polls0, 0u) << "the wait finish() asked for during the spin was never polled for";
  EXPECT_EQ(e.stats().callbacks, 0u);
}

// Read bursts by default only where a flush costs more than a small read
// (GPUs): on a CPU device two reads issued back to back both go out at once.
TEST(ReadBurstAuto, ACpuDeviceSubmitsEveryReadAtOnce) {
  auto made = Engine::create(test_config());
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  Engine& e = **made;
  ASSERT_EQ(e.device(0)->type, DeviceType::Cpu);
  auto b = e.allocate(0, 64);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(e.finish().ok());
  int got = 0;
  const std::uint64_t submitted = e.stats().submitted;
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(e.read(*b, 0, 64, [&](Result<std::span<const std::byte>>) { ++got; }).ok());
  EXPECT_EQ(e.stats().submitted, submitted + 2);
  ASSERT_TRUE(e.run_until([&] { return got == 2; }).ok());
}

}  // namespace
}  // namespace uvcl::testing

namespace uvcl::testing {
namespace {

// opencl.queues "auto" (the default): kAutoCpuQueues on a CPU device, and
// the count is what DeviceInfo::queues and a job's stats report.
TEST(QueuesAuto, ACpuDeviceGetsTheCpuCount) {
  Config c = test_config();
  c.queues.reset();
  auto made = Engine::create(c);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  ASSERT_EQ((*made)->device(0)->type, DeviceType::Cpu);
  EXPECT_EQ((*made)->device(0)->queues, kAutoCpuQueues);
  c.queues = 3;
  auto three = Engine::create(c);
  ASSERT_TRUE(three.ok()) << three.error().to_string();
  EXPECT_EQ((*three)->device(0)->queues, 3u);
}

}  // namespace
}  // namespace uvcl::testing
