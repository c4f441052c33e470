// Lifetimes: buffers freed with work in flight, the loop exiting when idle,
// an engine on the caller's loop, and destroying an engine with work pending.
#include "engine_test_util.hpp"

namespace uvcl::testing::lifetime {

using util::buf;
using util::make_launch;
using util::u32;

// uv_run(loop, UV_RUN_DEFAULT) with a watchdog: a handle that wrongly keeps
// the loop alive makes the test fail after `limit_ms`, not hang. The watchdog
// timer is unref'd, so it never keeps the loop alive itself. Returns the
// milliseconds uv_run took.
double run_default(uv_loop_t* loop, std::uint64_t limit_ms = 3000) {
  struct Watchdog {
    uv_timer_t timer;
    bool fired = false;
  } w;
  uv_timer_init(loop, &w.timer);
  w.timer.data = &w;
  uv_timer_start(
      &w.timer,
      [](uv_timer_t* t) {
        static_cast<Watchdog*>(t->data)->fired = true;
        uv_stop(t->loop);
      },
      limit_ms, 0);
  uv_unref(reinterpret_cast<uv_handle_t*>(&w.timer));
  const std::uint64_t t0 = uv_hrtime();
  uv_run(loop, UV_RUN_DEFAULT);
  const double ms = static_cast<double>(uv_hrtime() - t0) / 1e6;
  uv_close(reinterpret_cast<uv_handle_t*>(&w.timer), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);  // runs the close callback: `w` may go now
  EXPECT_FALSE(w.fired) << "uv_run(UV_RUN_DEFAULT) did not return within " << limit_ms
                        << " ms: a handle keeps the loop alive";
  return ms;
}

class Lifetime : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    load_kernels();
  }
  void load_kernels() {
    Program p = compile(util::kKernels);
    spin_ = kernel(p, "spin");
    set_ = kernel(p, "set_value");
  }
  Kernel spin_, set_;
};

// Releasing temporaries right after launching slow kernels on them: release()
// returns at once (no drain), the handle is dead at once, the memory comes
// back only when the kernels are done, and their results are right.
TEST_F(Lifetime, ReleasingBuffersInUseNeverDrains) {
  constexpr std::uint32_t kN = 16;
  constexpr int kTemps = 4;
  constexpr std::size_t kTempBytes = std::size_t{1} << 20;
  const std::uint64_t before = eng().free_bytes(0);
  const std::vector<std::uint32_t> in_values = util::iota_values(kN, 40503u, 11);
  Buffer in = upload(in_values);
  auto result = eng().allocate(0, kTemps * kN * 4);
  ASSERT_TRUE(result.ok());
  ASSERT_TRUE(eng().finish().ok());
  const std::uint32_t iters = util::spin_iters_for(eng(), spin_, 40.0, kN);

  std::vector<Buffer> temps;
  for (int t = 0; t < kTemps; ++t) {
    auto b = eng().allocate(0, kTempBytes);
    ASSERT_TRUE(b.ok());
    temps.push_back(b.value());
  }
  const std::uint64_t with_temps = eng().free_bytes(0);
  EXPECT_EQ(with_temps, before - kN * 4 - kTemps * kN * 4 - kTemps * kTempBytes);
  const std::uint64_t live_with_temps = eng().stats().live_buffers;
  for (int t = 0; t < kTemps; ++t) {
    ASSERT_TRUE(eng()
                    .launch(make_launch(spin_, {buf(in), buf(temps[t]), u32(iters + static_cast<std::uint32_t>(t)), u32(kN)},
                                        {kN}, {kN}))
                    .ok());
    ASSERT_TRUE(eng().copy(temps[t], 0, result.value(), static_cast<std::size_t>(t) * kN * 4, kN * 4).ok());
  }
  eng().poll();  // submitted: the kernels are on the device now
  ASSERT_GT(eng().stats().in_flight, 0u);

  std::uint64_t slowest = 0;
  for (Buffer t : temps) {
    const util::CallTime c = util::time_call([&] { ASSERT_TRUE(eng().release(t).ok()); });
    if (!c.preempted) slowest = std::max(slowest, c.ns);
    // A drain would take the kernels' time (4 x 40 ms).
    EXPECT_LT(c.ns, 20 * util::kMs) << "release() waited for the device";
  }
  EXPECT_LT(slowest, 2 * util::kMs) << "release() took " << slowest / 1000 << " us";
  const std::uint64_t in_flight_after_release = eng().stats().in_flight;
  const std::uint64_t free_after_release = eng().free_bytes(0);
  for (Buffer t : temps) {
    auto size = eng().buffer_size(t);
    ASSERT_FALSE(size.ok()) << "a released buffer still answers buffer_size";
    EXPECT_EQ(size.status(), Status::InvalidArgument);
    EXPECT_NE(size.error().message.find("not a live buffer"), std::string::npos) << size.error().message;
    // Dying handles are dead for every use.
    EXPECT_EQ(eng().release(t).status(), Status::InvalidArgument);
    EXPECT_EQ(eng().retain(t).status(), Status::InvalidArgument);
    EXPECT_FALSE(eng().read(t, 0, 4, [](Result<std::span<const std::byte>>) { ADD_FAILURE() << "called"; }).ok());
  }
  EXPECT_GT(in_flight_after_release, 0u);
  EXPECT_EQ(free_after_release, with_temps) << "memory came back while the kernels still ran";

  // Memory comes back once the work is done; results are right.
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_EQ(eng().free_bytes(0), with_temps + kTemps * kTempBytes);
  EXPECT_EQ(eng().stats().live_buffers, live_with_temps - kTemps);
  const auto got = download<std::uint32_t>(result.value(), kTemps * kN);
  ASSERT_EQ(got.size(), kTemps * kN);
  for (int t = 0; t < kTemps; ++t)
    for (std::uint32_t i = 0; i < kN; ++i)
      ASSERT_EQ(got[t * kN + i], util::lcg_steps(in_values[i], iters + static_cast<std::uint32_t>(t))) << t << " " << i;
  ASSERT_TRUE(eng().release(in).ok());
  ASSERT_TRUE(eng().release(result.value()).ok());
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_EQ(eng().free_bytes(0), before);
}

// Released while its uses still sit in the window (not yet submitted).
TEST_F(Lifetime, ReleasingABufferWhoseUsesAreStillInTheWindow) {
  make_engine(test_config(8, 1000));
  load_kernels();
  constexpr std::uint32_t kN = 64;
  const std::uint64_t before = eng().free_bytes(0);
  auto tmp = eng().allocate(0, kN * 4);
  auto out = eng().allocate(0, kN * 4);
  ASSERT_TRUE(tmp.ok() && out.ok());
  ASSERT_TRUE(eng().launch(make_launch(set_, {buf(tmp.value()), u32(321), u32(kN)}, {kN})).ok());
  ASSERT_TRUE(eng().copy(tmp.value(), 0, out.value(), 0, kN * 4).ok());
  EXPECT_GT(eng().stats().pending, 0u);
  ASSERT_TRUE(eng().release(tmp.value()).ok());
  EXPECT_FALSE(eng().buffer_size(tmp.value()).ok());
  ASSERT_TRUE(eng().finish().ok());
  const auto got = download<std::uint32_t>(out.value(), kN);
  ASSERT_EQ(got.size(), kN);
  for (std::uint32_t i = 0; i < kN; ++i) ASSERT_EQ(got[i], 321 + i);
  EXPECT_EQ(eng().free_bytes(0), before - kN * 4);
  // retain/release: freed at the last reference only.
  ASSERT_TRUE(eng().retain(out.value()).ok());
  ASSERT_TRUE(eng().release(out.value()).ok());
  EXPECT_TRUE(eng().buffer_size(out.value()).ok());
  ASSERT_TRUE(eng().release(out.value()).ok());
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_EQ(eng().free_bytes(0), before);
}

// Handles are unref'd while idle: uv_run returns once nothing is in flight.
TEST_F(Lifetime, LoopExitsWhenIdle) {
  // Fresh engine, nothing done yet.
  EXPECT_LT(run_default(eng().loop()), 100.0) << "a fresh engine keeps its loop alive";
  constexpr std::uint32_t kN = 256;
  auto b = eng().allocate(0, kN * 4);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(eng().launch(make_launch(set_, {buf(b.value()), u32(5), u32(kN)}, {kN})).ok());
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_LT(run_default(eng().loop()), 100.0) << "uv_run did not return promptly: a handle keeps the idle loop alive";
}

// The seed submitted nothing until the window filled or a sync point came: a
// lone launch could sit unsubmitted forever. One loop iteration submits it.
TEST_F(Lifetime, ALoneLaunchIsSubmittedByTheNextLoopIteration) {
  constexpr std::uint32_t kN = 64;
  auto b = eng().allocate(0, kN * 4);
  ASSERT_TRUE(b.ok());
  const std::uint64_t submitted = eng().stats().submitted;
  ASSERT_TRUE(eng().launch(make_launch(set_, {buf(b.value()), u32(8), u32(kN)}, {kN})).ok());
  EXPECT_EQ(eng().stats().pending, 1u) << "a launch waits in the window";
  uv_run(eng().loop(), UV_RUN_NOWAIT);
  EXPECT_EQ(eng().stats().pending, 0u) << "the loop iteration did not submit the window";
  EXPECT_EQ(eng().stats().submitted, submitted + 1);
  // Busy while it runs: uv_run returns only once it is done.
  run_default(eng().loop());
  EXPECT_EQ(eng().stats().in_flight, 0u);
  const auto got = download<std::uint32_t>(b.value(), kN);
  ASSERT_EQ(got.size(), kN);
  EXPECT_EQ(got[kN - 1], 8 + kN - 1);
}

// ... and ref'd while busy: uv_run does not return before the work is done.
TEST_F(Lifetime, LoopStaysAliveWhileWorkIsInFlight) {
  Buffer in = upload(std::vector<std::uint32_t>{3u});
  auto out = eng().allocate(0, 4);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(eng().finish().ok());
  const std::uint32_t iters = util::spin_iters_for(eng(), spin_, 50.0);
  ASSERT_TRUE(eng().launch(make_launch(spin_, {buf(in), buf(out.value()), u32(iters), u32(1)}, {1}, {1})).ok());
  int calls = 0;
  std::uint32_t value = 0;
  ASSERT_TRUE(eng()
                  .read(out.value(), 0, 4,
                        [&](Result<std::span<const std::byte>> r) {
                          ++calls;
                          if (r.ok()) std::memcpy(&value, r->data(), 4);
                        })
                  .ok());
  run_default(eng().loop());
  EXPECT_EQ(calls, 1) << "uv_run returned before the read was delivered";
  EXPECT_EQ(value, util::lcg_steps(3u, iters));
  EXPECT_LT(run_default(eng().loop()), 100.0);
  EXPECT_EQ(calls, 1);
}

// A server's own loop: the engine runs on it, and leaves it closable.
TEST(LifetimeCallerLoop, EngineOnTheCallersLoop) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  int timer_fired = 0;
  {
    auto created = Engine::create(test_config(), &loop);
    ASSERT_TRUE(created.ok()) << created.error().to_string();
    std::unique_ptr<Engine> e = std::move(created.value());
    EXPECT_EQ(e->loop(), &loop);
    ASSERT_GE(e->device_count(), 1u);

    // A build, completed through the caller's uv_run.
    bool built = false;
    auto p = e->compile(0, util::kKernels, "", [&](Result<void> r) {
      EXPECT_TRUE(r.ok()) << r.error().to_string();
      built = true;
    });
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    run_default(&loop);
    ASSERT_TRUE(built) << "uv_run returned before the build was reported";
    auto k = e->kernel(p.value(), "set_value");
    ASSERT_TRUE(k.ok()) << k.error().to_string();

    // The caller's own handle shares the loop.
    uv_timer_t timer;
    uv_timer_init(&loop, &timer);
    timer.data = &timer_fired;
    uv_timer_start(&timer, [](uv_timer_t* t) { ++*static_cast<int*>(t->data); }, 1, 0);

    constexpr std::uint32_t kN = 128;
    auto b = e->allocate(0, kN * 4);
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(e->launch(make_launch(k.value(), {buf(b.value()), u32(1000), u32(kN)}, {kN})).ok());
    std::vector<std::uint32_t> got;
    ASSERT_TRUE(e->read(b.value(), 0, kN * 4,
                        [&](Result<std::span<const std::byte>> r) {
                          ASSERT_TRUE(r.ok()) << r.error().to_string();
                          got.resize(kN);
                          std::memcpy(got.data(), r->data(), kN * 4);
                        })
                    .ok());
    run_default(&loop);
    ASSERT_EQ(got.size(), kN) << "uv_run returned before the read was delivered";
    for (std::uint32_t i = 0; i < kN; ++i) EXPECT_EQ(got[i], 1000 + i);
    EXPECT_EQ(timer_fired, 1);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
    EXPECT_LT(run_default(&loop), 100.0) << "the idle engine keeps the caller's loop alive";
    // Destroyed with live buffers, kernels and programs: it releases them.
    e.reset();
  }
  // The engine's handles finish closing on this run.
  EXPECT_LT(run_default(&loop), 100.0);
  EXPECT_EQ(uv_loop_close(&loop), 0) << "a handle of the engine is still open";
}

// A caller's own I/O callback (here a uv_async) runs inside the caller's
// uv_run: a blocking convenience there would nest uv_run, so it is refused;
// outside uv_run the same call runs the loop itself.
TEST(LifetimeCallerLoop, BlockingCallsFromTheCallersIoCallbackAreRefused) {
  Watchdog dog("BlockingCallsFromTheCallersIoCallbackAreRefused", 60);
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  {
    auto created = Engine::create(test_config(), &loop);
    ASSERT_TRUE(created.ok()) << created.error().to_string();
    std::unique_ptr<Engine> e = std::move(created.value());
    auto b = e->allocate(0, 64);
    ASSERT_TRUE(b.ok());
    struct Seen {
      Engine* engine;
      Buffer buffer;
      Result<void> finish = Error{Status::Cancelled, "not called"};
      Result<std::vector<std::byte>> read = Error{Status::Cancelled, "not called"};
    } seen{e.get(), b.value()};
    uv_async_t async;
    ASSERT_EQ(uv_async_init(&loop, &async,
                            [](uv_async_t* a) {
                              auto* s = static_cast<Seen*>(a->data);
                              s->finish = s->engine->finish();
                              s->read = s->engine->read_sync(s->buffer, 0, 64);
                              uv_close(reinterpret_cast<uv_handle_t*>(a), nullptr);
                            }),
              0);
    async.data = &seen;
    ASSERT_EQ(uv_async_send(&async), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_FALSE(seen.finish.ok()) << "finish() nested uv_run inside the caller's callback";
    EXPECT_EQ(seen.finish.error().status, Status::InvalidArgument);
    EXPECT_NE(seen.finish.error().message.find("finish called from inside a callback of the running loop"),
              std::string::npos)
        << seen.finish.error().message;
    ASSERT_FALSE(seen.read.ok());
    EXPECT_EQ(seen.read.error().status, Status::InvalidArgument);
    // Outside uv_run: the call runs the loop itself.
    EXPECT_TRUE(e->finish().ok());
    auto again = e->read_sync(b.value(), 0, 64);
    EXPECT_TRUE(again.ok()) << again.error().to_string();
    e.reset();
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// Destroying the engine: what is still in a window is cancelled, what is on
// the device completes and is delivered.
TEST_F(Lifetime, DestroyCancelsTheWindowAndCompletesInFlightWork) {
  make_engine(test_config(8, 1000));
  load_kernels();
  Buffer in = upload(std::vector<std::uint32_t>{42u});
  auto x = eng().allocate(0, 4);
  auto y = eng().allocate(0, 4096);
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_TRUE(eng().finish().ok());
  const std::uint32_t iters = util::spin_iters_for(eng(), spin_, 50.0);

  ASSERT_TRUE(eng().launch(make_launch(spin_, {buf(in), buf(x.value()), u32(iters), u32(1)}, {1}, {1})).ok());
  int read_calls = 0;
  Result<std::uint32_t> read_value = Error{Status::Cancelled, "not called"};
  // A read is a sync point: it and the launch before it are on the device now.
  ASSERT_TRUE(eng()
                  .read(x.value(), 0, 4,
                        [&](Result<std::span<const std::byte>> r) {
                          ++read_calls;
                          if (!r.ok()) {
                            read_value = std::move(r).error();
                            return;
                          }
                          std::uint32_t v = 0;
                          std::memcpy(&v, r->data(), 4);
                          read_value = v;
                        })
                  .ok());
  // These stay in the (large) window: nothing submits them before the reset.
  std::vector<std::uint32_t> data(1024, 9u);
  std::vector<std::uint32_t> borrowed(1024, 8u);
  int copy_calls = 0, borrow_calls = 0, fill_calls = 0;
  Status copy_status = Status::Ok, borrow_status = Status::Ok, fill_status = Status::Ok;
  ASSERT_TRUE(eng()
                  .write(y.value(), 0, bytes_of(data), WriteMode::Copy,
                         [&](Result<void> r) {
                           ++copy_calls;
                           copy_status = r.status();
                         })
                  .ok());
  ASSERT_TRUE(eng()
                  .write(y.value(), 0, bytes_of(borrowed), WriteMode::Borrow,
                         [&](Result<void> r) {
                           ++borrow_calls;
                           borrow_status = r.status();
                         })
                  .ok());
  const std::uint32_t pattern = 1;
  ASSERT_TRUE(eng()
                  .fill(y.value(), std::as_bytes(std::span<const std::uint32_t>(&pattern, 1)), 0, 4096,
                        [&](Result<void> r) {
                          ++fill_calls;
                          fill_status = r.status();
                        })
                  .ok());
  EXPECT_EQ(eng().stats().pending, 3u);
  engine_.reset();

  EXPECT_EQ(copy_calls, 1);
  EXPECT_EQ(borrow_calls, 1);
  EXPECT_EQ(fill_calls, 1);
  EXPECT_EQ(copy_status, Status::Cancelled);
  EXPECT_EQ(borrow_status, Status::Cancelled);
  EXPECT_EQ(fill_status, Status::Cancelled);
  EXPECT_EQ(read_calls, 1);
  ASSERT_TRUE(read_value.ok()) << "in-flight work must complete: " << read_value.error().to_string();
  EXPECT_EQ(read_value.value(), util::lcg_steps(42u, iters));
}

}  // namespace uvcl::testing::lifetime
