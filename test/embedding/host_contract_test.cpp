// The embedding contract: what a host does to the engine from inside the
// engine's callbacks and its own — destroy it when it says it closed, swap
// the error listener from inside the listener, release while closing, issue
// work from a callback that teardown cancels, re-arm a drain from a drain —
// on the host's own loop. Every case runs under a watchdog and asserts each
// callback ran exactly once.
#include "../faults/harness.hpp"

namespace uvcl::embedding::host_contract {
namespace {

using faults::kSource;
using faults::LoopEngine;
using faults::shim;
using faults::shim_config;
using faults::shim_ok;
using testing::Watchdog;

// Turns the host's loop (UV_RUN_ONCE) until done() or `seconds` pass; a
// one-shot timer keeps each turn from sleeping past the deadline.
bool turn_until(uv_loop_t* loop, const std::function<bool()>& done, double seconds = 10) {
  const std::uint64_t deadline = uv_hrtime() + static_cast<std::uint64_t>(seconds * 1e9);
  uv_timer_t tick;
  uv_timer_init(loop, &tick);
  uv_timer_start(&tick, [](uv_timer_t*) {}, 5, 5);
  while (!done() && uv_hrtime() < deadline) uv_run(loop, UV_RUN_ONCE);
  uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);  // its close callback: `tick` may go now
  return done();
}

class HostContract : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(shim_ok());
    shim().reset_faults();
    live0_ = shim().live("all");
    ASSERT_TRUE(le_.create(shim_config(4)).ok());
  }
  void TearDown() override {
    EXPECT_EQ(le_.destroy(), 0) << "uv_loop_close: a handle of the engine was left open";
    shim().reset_faults();
    EXPECT_EQ(shim().live("all") - live0_, 0) << "OpenCL objects leaked";
  }
  Engine& e() { return *le_.engine; }
  uv_loop_t* loop() { return le_.loop.get(); }
  Kernel advance_kernel() {
    auto p = e().compile_sync(0, kSource);
    EXPECT_TRUE(p.ok()) << p.error().to_string();
    if (!p) return {};
    auto k = e().kernel(*p, "advance");
    EXPECT_TRUE(k.ok()) << k.error().to_string();
    return k.ok() ? *k : Kernel{};
  }
  static Launch advance(Kernel k, Buffer in, Buffer out, std::uint32_t n) {
    return Launch{k,
                  {KernelArg::of(in), KernelArg::of(out), KernelArg::value<std::uint32_t>(3),
                   KernelArg::value<std::uint32_t>(1), KernelArg::value<std::uint32_t>(n)},
                  {n},
                  {64}};
  }
  Buffer buffer(std::uint32_t n) {
    auto b = e().allocate(0, n * 4);
    EXPECT_TRUE(b.ok());
    return b.ok() ? *b : Buffer{};
  }

  LoopEngine le_;
  int live0_ = 0;
};

// --- close and destroy ---------------------------------------------------------

// The most natural thing a host does: free the engine when it says it closed.
TEST_F(HostContract, DestroyFromOnClosed) {
  Watchdog wd("destroy from on_closed", 30);
  Kernel k = advance_kernel();
  Buffer a = buffer(256), b = buffer(256);
  ASSERT_TRUE(e().launch(advance(k, a, b, 256)).ok());
  int closed = 0;
  ASSERT_TRUE(e().close([&] {
                   ++closed;
                   le_.engine.reset();
                 })
                  .ok());
  EXPECT_TRUE(turn_until(loop(), [&] { return closed > 0; }));
  EXPECT_EQ(closed, 1);
  EXPECT_EQ(le_.engine, nullptr);
}

// The same on the engine's own loop, turned by poll() as a game loop does.
TEST(HostContractOwnLoop, DestroyFromOnClosedDuringPoll) {
  ASSERT_TRUE(shim_ok());
  Watchdog wd("destroy from on_closed, own loop", 30);
  auto made = Engine::create(shim_config(2));
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  std::unique_ptr<Engine> engine = std::move(made.value());
  Engine* raw = engine.get();
  int closed = 0;
  ASSERT_TRUE(raw->close([&] {
                   ++closed;
                   engine.reset();
                 })
                  .ok());
  for (int i = 0; i < 100000 && closed == 0; ++i) raw->poll();
  EXPECT_EQ(closed, 1);
  EXPECT_EQ(engine, nullptr);
}

// libuv's rule: a close callback, once accepted, runs. Destroying the engine
// before it ran runs it from the destructor, after everything is released.
TEST_F(HostContract, DestroyBeforeOnClosedRunsIt) {
  Watchdog wd("destroy before on_closed", 30);
  Buffer a = buffer(256);
  const std::vector<std::uint32_t> v(256, 1);
  ASSERT_TRUE(e().write(a, 0, std::as_bytes(std::span(v))).ok());
  int closed = 0;
  ASSERT_TRUE(e().close([&] { ++closed; }).ok());
  le_.engine.reset();
  EXPECT_EQ(closed, 1);
}

// Work that teardown cancels: its callback, told Cancelled, issues a timed
// launch (and other work). Teardown refuses it — it must never wait on work
// that cannot start — and ends.
TEST_F(HostContract, WorkIssuedByACallbackThatTeardownCancelsIsRefused) {
  Watchdog wd("teardown with a timed launch issued during it", 30);
  Kernel k = advance_kernel();
  Buffer a = buffer(256), b = buffer(256);
  const std::vector<std::uint32_t> v(256, 1);
  int calls = 0;
  std::optional<Status> cancelled, timed, write;
  Engine* engine = le_.engine.get();  // reset() clears le_.engine before the destructor runs
  ASSERT_TRUE(e().write(a, 0, std::as_bytes(std::span(v)), WriteMode::Copy,
                        [&](Result<void> r) {
                          ++calls;
                          cancelled = r.status();
                          timed = engine->timed_launch(advance(k, a, b, 256), [](Result<Timing>) {
                                       ADD_FAILURE() << "a refused timed launch's callback ran";
                                     }).status();
                          write = engine->write(b, 0, std::as_bytes(std::span(v))).status();
                        })
                  .ok());
  le_.engine.reset();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cancelled, Status::Cancelled);
  EXPECT_EQ(timed, Status::Cancelled);
  EXPECT_EQ(write, Status::Cancelled);
}

// What close() cancels says the engine was closing, not destroyed.
TEST_F(HostContract, CloseNamesItselfInWhatItCancels) {
  Watchdog wd("close cancels windowed work", 30);
  Buffer a = buffer(256);
  const std::vector<std::uint32_t> v(256, 1);
  std::optional<Error> error;
  ASSERT_TRUE(e().write(a, 0, std::as_bytes(std::span(v)), WriteMode::Copy,
                        [&](Result<void> r) {
                          if (!r) error = r.error();
                        })
                  .ok());
  int closed = 0;
  ASSERT_TRUE(e().close([&] { ++closed; }).ok());
  EXPECT_TRUE(turn_until(loop(), [&] { return closed > 0; }));
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->status, Status::Cancelled);
  EXPECT_NE(error->message.find("closed"), std::string::npos) << error->message;
  EXPECT_EQ(error->message.find("destroyed"), std::string::npos) << error->message;
}

// A host lets go of its objects while the engine closes.
TEST_F(HostContract, ReleaseWhileClosing) {
  Watchdog wd("release while closing", 30);
  Kernel k = advance_kernel();
  Buffer a = buffer(256), b = buffer(256);
  ASSERT_TRUE(e().launch(advance(k, a, b, 256)).ok());
  int closed = 0;
  ASSERT_TRUE(e().close([&] { ++closed; }).ok());
  EXPECT_TRUE(e().release(a).ok());
  EXPECT_TRUE(e().release(k).ok());
  EXPECT_TRUE(turn_until(loop(), [&] { return closed > 0; }));
  // Closed: everything is released already; releasing again is harmless.
  EXPECT_TRUE(e().release(b).ok());
  EXPECT_EQ(closed, 1);
}

// --- builds --------------------------------------------------------------------

// A program released before its build finished: its on_built runs once,
// with Cancelled, not with a success for a program the caller gave up.
TEST_F(HostContract, ReleasingAProgramBeforeOnBuiltCancelsIt) {
  Watchdog wd("release a program while it builds", 60);
  std::optional<Status> built;
  int calls = 0;
  auto p = e().compile(0, kSource, "-DRELEASED_EARLY", [&](Result<void> r) {
    ++calls;
    built = r.status();
  });
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  ASSERT_TRUE(e().release(*p).ok());
  EXPECT_TRUE(turn_until(loop(), [&] { return calls > 0; }, 30));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(built, Status::Cancelled);
}

TEST_F(HostContract, CompileWithoutACallbackIsRefused) {
  auto p = e().compile(0, kSource, "", BuildCallback{});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().status, Status::InvalidArgument);
  EXPECT_NE(p.error().message.find("callback"), std::string::npos) << p.error().message;
}

// --- the error listener --------------------------------------------------------

// A listener that replaces itself from inside its call: the new one hears
// the next failure, the old one is not called again.
TEST_F(HostContract, ListenerReplacesItselfInItsCall) {
  Watchdog wd("listener replaces itself", 30);
  Buffer a = buffer(256);
  const std::vector<std::uint32_t> v(256, 1);
  int first = 0, second = 0;
  e().set_error_listener([&](const Error&) {
    ++first;
    e().set_error_listener([&](const Error&) { ++second; });
  });
  for (int round = 0; round < 2; ++round) {
    shim().set_fault("clEnqueueWriteBuffer:1:CL_OUT_OF_RESOURCES");
    bool done = false;
    ASSERT_TRUE(e().write(a, 0, std::as_bytes(std::span(v)), WriteMode::Copy, [&](Result<void>) { done = true; }).ok());
    EXPECT_TRUE(turn_until(loop(), [&] { return done && first + second > round; }));
  }
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 1);
}

TEST_F(HostContract, ListenerClearsItselfInItsCall) {
  Watchdog wd("listener clears itself", 30);
  Buffer a = buffer(256);
  const std::vector<std::uint32_t> v(256, 1);
  int heard = 0;
  e().set_error_listener([&](const Error&) {
    ++heard;
    e().set_error_listener({});
  });
  for (int round = 0; round < 2; ++round) {
    shim().set_fault("clEnqueueWriteBuffer:1:CL_OUT_OF_RESOURCES");
    std::optional<Status> done;
    ASSERT_TRUE(e().write(a, 0, std::as_bytes(std::span(v)), WriteMode::Copy, [&](Result<void> r) { done = r.status(); }).ok());
    EXPECT_TRUE(turn_until(loop(), [&] { return done.has_value() && e().stats().unfinished == 0; }));
    EXPECT_EQ(done, Status::MemoryCopyH2P);
  }
  EXPECT_EQ(heard, 1);
}

// --- the loop ------------------------------------------------------------------

// A drain whose callback drains again, on an idle engine: each round is a
// step of its own, so the host's timer fires while the rounds go on.
TEST_F(HostContract, ADrainThatReArmsItselfLetsTheHostsTimersRun) {
  Watchdog wd("drain re-armed from its callback", 30);
  struct Rounds {
    int in_this_iteration = 0, most_in_one_iteration = 0, total = 0;
    bool timer_fired = false;
    std::uint64_t armed_ns = 0, fired_ns = 0;
  } rounds;
  uv_check_t check;
  uv_check_init(loop(), &check);
  check.data = &rounds;
  uv_check_start(&check, [](uv_check_t* c) { static_cast<Rounds*>(c->data)->in_this_iteration = 0; });
  uv_timer_t timer;
  uv_timer_init(loop(), &timer);
  timer.data = &rounds;
  rounds.armed_ns = uv_hrtime();
  uv_timer_start(&timer, [](uv_timer_t* t) {
    auto* r = static_cast<Rounds*>(t->data);
    r->timer_fired = true;
    r->fired_ns = uv_hrtime();
  }, 2, 0);
  std::function<void(Result<void>)> again = [&](Result<void>) {
    ++rounds.total;
    rounds.most_in_one_iteration = std::max(rounds.most_in_one_iteration, ++rounds.in_this_iteration);
    if (!rounds.timer_fired && rounds.total < 100000) e().drain(again);
  };
  e().drain(again);
  EXPECT_TRUE(turn_until(loop(), [&] { return rounds.timer_fired || rounds.total >= 100000; }));
  EXPECT_TRUE(rounds.timer_fired) << rounds.total << " drain rounds ran before the host's 2 ms timer";
  EXPECT_LE(rounds.most_in_one_iteration, 2) << "drain rounds in one loop iteration";
  // The figure, not a target: how late the host's timer fired.
  if (rounds.timer_fired)
    std::printf("host timer due in 2 ms fired after %.3f ms, %d drain rounds meanwhile\n",
                static_cast<double>(rounds.fired_ns - rounds.armed_ns) / 1e6, rounds.total);
  EXPECT_TRUE(turn_until(loop(), [&] { return !e().stats().unfinished; }));
  uv_close(reinterpret_cast<uv_handle_t*>(&check), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
  uv_run(loop(), UV_RUN_NOWAIT);
}

// A blocking helper called from a timer of the host's loop would run that
// loop from inside itself: refused, saying why and what to call instead.
TEST_F(HostContract, BlockingHelpersFromAHostTimerAreRefused) {
  Watchdog wd("blocking helpers from a host timer", 30);
  Buffer a = buffer(256);
  struct Seen {
    Engine* engine;
    Buffer a;
    std::vector<Error> errors;
    bool fired = false;
  } seen{le_.engine.get(), a, {}, false};
  uv_timer_t timer;
  uv_timer_init(loop(), &timer);
  timer.data = &seen;
  uv_timer_start(
      &timer,
      [](uv_timer_t* t) {
        auto& s = *static_cast<Seen*>(t->data);
        s.fired = true;
        Engine& e = *s.engine;
        if (auto r = e.finish(); !r) s.errors.push_back(r.error());
        if (auto r = e.read_sync(s.a, 0, 16); !r) s.errors.push_back(r.error());
        if (auto r = e.compile_sync(0, kSource); !r) s.errors.push_back(r.error());
        if (auto r = e.run_until([] { return true; }); !r) s.errors.push_back(r.error());
      },
      1, 0);
  EXPECT_TRUE(turn_until(loop(), [&] { return seen.fired; }));
  ASSERT_EQ(seen.errors.size(), 4u);
  for (const Error& err : seen.errors) {
    EXPECT_EQ(err.status, Status::InvalidArgument) << err.to_string();
    EXPECT_NE(err.message.find("uv_run is not re-entrant"), std::string::npos) << err.message;
    EXPECT_NE(err.message.find("callback form"), std::string::npos) << err.message;
  }
  // Outside the loop's callbacks the same calls work.
  EXPECT_TRUE(e().finish().ok());
  EXPECT_TRUE(e().read_sync(a, 0, 16).ok());
  uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
  uv_run(loop(), UV_RUN_NOWAIT);
}

}  // namespace
}  // namespace uvcl::embedding::host_contract
