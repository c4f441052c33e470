// The engine core under one injected failure: a failure poisons what the
// command wrote before any user code can read it; user code raised inside a
// submission keeps program order; a write-only use makes a buffer valid
// again; error scopes and drains see only the errors of their own commands.
#include <thread>

#include "harness.hpp"

namespace uvcl::faults::core_faults_test {
namespace {

class CoreFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(shim_ok());
    shim().reset_faults();
  }
  void TearDown() override { shim().reset_faults(); }

  // An engine with the `advance` kernel; `declared` as in Engine::kernel.
  void make(unsigned queues, std::vector<ParamAccess> declared = {},
            CommandEvents events = CommandEvents::Auto) {
    Config c = shim_config(queues);
    c.command_events = events;
    ASSERT_TRUE(le_.create(c).ok());
    auto p = e().compile_sync(0, kSource);
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    auto k = e().kernel(*p, "advance", std::move(declared));
    ASSERT_TRUE(k.ok()) << k.error().to_string();
    kern_ = *k;
  }
  Engine& e() { return *le_.engine; }
  Launch advance(Buffer in, Buffer out, std::uint32_t n) {
    return Launch{kern_,
                  {KernelArg::of(in), KernelArg::of(out), KernelArg::value<std::uint32_t>(3),
                   KernelArg::value<std::uint32_t>(1), KernelArg::value<std::uint32_t>(n)},
                  {n},
                  {64}};
  }
  Buffer buffer(std::uint32_t n, std::uint32_t value) {
    auto b = e().allocate(0, n * 4);
    EXPECT_TRUE(b.ok());
    const std::vector<std::uint32_t> v(n, value);
    EXPECT_TRUE(e().write(*b, 0, std::as_bytes(std::span(v))).ok());
    return b.ok() ? *b : Buffer{};
  }
  std::optional<std::vector<std::uint32_t>> read_words(Buffer b, std::uint32_t n, std::string* error = nullptr) {
    auto r = e().read_sync(b, 0, n * 4);
    if (!r.ok()) {
      if (error) *error = r.error().to_string();
      return std::nullopt;
    }
    std::vector<std::uint32_t> v(n);
    std::memcpy(v.data(), r->data(), n * 4);
    return v;
  }

  LoopEngine le_;
  Kernel kern_{};
};

// A fill fails on the device in the same completion batch as an earlier
// write whose on_done reads the filled buffer: the read must report the
// fill's failure, not the buffer's old contents as a success.
// The device is lost under three small reads into the caller's memory made
// in one burst: the third's enqueue and every marker after say
// CL_DEVICE_NOT_AVAILABLE. The first two were enqueued, so the driver may
// still write into the caller's memory: each is reported only as the driver
// says it ended — here both ran, and their data is there. (They shared the
// third's event, which never came, and no fence could be had: they were
// failed at once while the driver went on to write the memory.) Events only
// where awaited, as on a GPU (PoCL gives every command one), and reads held
// for a burst, as on a GPU (a CPU device submits each at once).
TEST(CoreFaultsLost, AReadIntoCallerMemoryIsFailedOnlyOnceTheDriverIsDoneWithIt) {
  Watchdog wd("reads into caller memory on a device lost under them", 60);
  ASSERT_TRUE(shim_ok());
  shim().reset_faults();
  Config config = shim_config(1);
  config.command_events = CommandEvents::Awaited;
  config.read_burst_us = 100000;
  LoopEngine le;
  ASSERT_TRUE(le.create(config).ok());
  Engine& e = *le.engine;
  constexpr std::uint32_t n = 16;
  auto b = e.allocate(0, n * 4);
  ASSERT_TRUE(b.ok());
  const std::vector<std::uint32_t> sevens(n, 7);
  ASSERT_TRUE(e.write(*b, 0, std::as_bytes(std::span(sevens))).ok());
  ASSERT_TRUE(e.finish().ok());
  std::vector<std::vector<std::uint32_t>> into(3, std::vector<std::uint32_t>(n, 0));
  std::vector<std::optional<Result<void>>> done(3);
  // Every marker from now on fails too: no fence can be had.
  shim().set_fault("clEnqueueReadBuffer:3:CL_DEVICE_NOT_AVAILABLE");
  for (int i = 1; i <= 8; ++i)
    shim().set_fault(("clEnqueueMarkerWithWaitList:" + std::to_string(i) + ":CL_DEVICE_NOT_AVAILABLE").c_str());
  for (std::size_t i = 0; i < 3; ++i)
    ASSERT_TRUE(e.read_into(*b, 0, std::as_writable_bytes(std::span(into[i])), [&done, i](Result<void> r) {
                   done[i] = std::move(r);
                 }).ok());
  EXPECT_EQ(run_for(e, [&] { return done[0] && done[1] && done[2]; }, 10), "");
  const int fired = shim().fired();
  shim().reset_faults();
  ASSERT_TRUE(done[0] && done[1] && done[2]);
  ASSERT_GE(fired, 1) << "the third read was not enqueued";
  EXPECT_TRUE(e.device_lost(0));
  EXPECT_FALSE(done[2]->ok());
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(done[i]->ok()) << "read " << i << ", enqueued, was failed before the driver said so: "
                               << done[i]->error().to_string();
    EXPECT_EQ(into[i], std::vector<std::uint32_t>(n, 7)) << "read " << i;
  }
  (void)e.release(*b);
  EXPECT_EQ(le.destroy(), 0);
}

TEST_F(CoreFaults, ReadInACallbackAfterAFailedWriterIsNotStale) {
  Watchdog wd("read after a failed writer", 60);
  make(1);  // one queue: the write completes, then the fill, in one batch
  constexpr std::uint32_t n = 1024;
  const Buffer x = buffer(n, 1);
  const Buffer y = buffer(n, 2);
  ASSERT_TRUE(e().finish().ok());
  std::optional<Result<void>> read;
  const std::vector<std::uint32_t> host(n, 3);
  ASSERT_TRUE(e().write(y, 0, std::as_bytes(std::span(host)), WriteMode::Copy, [&](Result<void>) {
    auto r = e().read(x, 0, n * 4, [&](Result<std::span<const std::byte>> d) {
      read = d ? Result<void>{} : Result<void>{d.error()};
    });
    EXPECT_TRUE(r.ok()) << r.error().to_string();
  }).ok());
  shim().set_fault("event:clEnqueueFillBuffer:1:CL_OUT_OF_RESOURCES");
  const std::uint32_t five = 5;
  // on_done: the fill gets an event of its own, the one the fault fails.
  ASSERT_TRUE(e().fill(x, std::as_bytes(std::span(&five, 1)), 0, n * 4, [](Result<void>) {}).ok());
  bool drained = false;
  e().drain([&](Result<void>) { drained = true; });  // submits both, collects nothing
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(run_for(e(), [&] { return read.has_value() && drained; }, 20), "");
  ASSERT_EQ(shim().fired(), 1);
  ASSERT_TRUE(read.has_value());
  ASSERT_FALSE(read->ok()) << "the read returned x's old contents as a success after its writer failed";
  EXPECT_NE(read->error().to_string().find("CL_OUT_OF_RESOURCES"), std::string::npos) << read->error().to_string();
}

// The error listener hears of an enqueue failure while the window is being
// submitted; a read it issues comes after the fill made before it.
TEST_F(CoreFaults, ReadFromTheErrorListenerKeepsProgramOrder) {
  Watchdog wd("read from the error listener", 60);
  make(8);
  constexpr std::uint32_t n = 256;
  const Buffer a = buffer(n, 1), b = buffer(n, 1), x = buffer(n, 1);
  ASSERT_TRUE(e().finish().ok());
  std::optional<std::vector<std::uint32_t>> seen;
  int errors = 0;
  e().set_error_listener([&](const Error&) {
    if (errors++ > 0) return;
    auto r = e().read(x, 0, n * 4, [&](Result<std::span<const std::byte>> d) {
      ASSERT_TRUE(d.ok()) << d.error().to_string();
      seen.emplace(n);
      std::memcpy(seen->data(), d->data(), n * 4);
    });
    EXPECT_TRUE(r.ok()) << r.error().to_string();
  });
  shim().set_fault("clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES");
  ASSERT_TRUE(e().launch(advance(a, b, n)).ok());
  const std::uint32_t five = 5;
  ASSERT_TRUE(e().fill(x, std::as_bytes(std::span(&five, 1)), 0, n * 4).ok());
  (void)e().finish();
  // The listener runs after the step that raised the error: its read may
  // come after the drain above.
  EXPECT_EQ(run_for(e(), [&] { return seen.has_value(); }, 20), "");
  e().set_error_listener({});
  ASSERT_EQ(shim().fired(), 1);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(*seen, std::vector<std::uint32_t>(n, 5)) << "the listener's read ran ahead of the fill";
}

// Work the error listener issues goes out in the loop step that heard the
// error, also when the listener hears of it in the step's second round
// (the launch it issued in the first round failed too): not a poll
// interval later.
TEST_F(CoreFaults, WorkFromTheErrorListenerGoesOutInTheStepThatHeardIt) {
  Watchdog wd("work from the error listener", 60);
  make(8);
  constexpr std::uint32_t n = 256;
  const Buffer a = buffer(n, 1), b1 = buffer(n, 1), b2 = buffer(n, 1), b3 = buffer(n, 1);
  ASSERT_TRUE(e().finish().ok());
  int heard = 0;
  e().set_error_listener([&](const Error&) {
    ++heard;
    if (heard <= 2) {
      EXPECT_TRUE(e().launch(advance(a, heard == 1 ? b2 : b3, n)).ok());
    }
  });
  shim().set_fault("clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES");
  shim().set_fault("clEnqueueNDRangeKernel:2:CL_OUT_OF_RESOURCES");
  const long launches = shim().calls("clEnqueueNDRangeKernel");
  ASSERT_TRUE(e().launch(advance(a, b1, n)).ok());
  uv_run(e().loop(), UV_RUN_NOWAIT);  // one loop step: its prepare submits the windows
  EXPECT_EQ(heard, 2);
  EXPECT_EQ(shim().calls("clEnqueueNDRangeKernel"), launches + 3)
      << "the launch the listener issued in the step's second round waited for a later step";
  (void)e().finish();  // reports the two failed launches
  e().set_error_listener({});
  EXPECT_EQ(shim().fired(), 2);
  std::vector<std::uint32_t> want(n);
  for (std::uint32_t i = 0; i < n; ++i) want[i] = 1 * 3 + 1 + i;
  EXPECT_EQ(read_words(b3, n), want);
}

// After one failed writer, a kernel that only writes the buffer makes it
// valid again; one that may read it (Written) keeps failing with the cause.
TEST_F(CoreFaults, WriteOnlyUseClearsPoison) {
  Watchdog wd("write-only use", 60);
  make(8, {ParamAccess::ReadOnly, ParamAccess::WriteOnly, ParamAccess::Scalar, ParamAccess::Scalar,
           ParamAccess::Scalar});
  constexpr std::uint32_t n = 256;
  const Buffer in = buffer(n, 10), out = buffer(n, 1);
  ASSERT_TRUE(e().finish().ok());
  shim().set_fault("event:clEnqueueFillBuffer:1:CL_OUT_OF_RESOURCES");
  const std::uint32_t five = 5;
  ASSERT_TRUE(e().fill(out, std::as_bytes(std::span(&five, 1)), 0, n * 4, [](Result<void>) {}).ok());
  ASSERT_FALSE(e().finish().ok()) << "drain missed the failed fill";
  ASSERT_EQ(shim().fired(), 1);
  shim().reset_faults();
  std::string why;
  ASSERT_FALSE(read_words(out, n, &why).has_value()) << "the failed fill did not poison the buffer";
  ASSERT_TRUE(e().launch(advance(in, out, n)).ok());
  auto got = read_words(out, n, &why);
  ASSERT_TRUE(got.has_value()) << "a write-only launch did not make the buffer valid: " << why;
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ((*got)[i], 10u * 3u + 1u + i) << "element " << i;
  ASSERT_TRUE(e().finish().ok());
}

// A failure inside a pushed scope goes to that scope's pop, not to a later
// drain; a scope whose commands all succeed pops with success.
TEST_F(CoreFaults, ErrorScopesGetOnlyTheirOwnErrors) {
  Watchdog wd("error scopes", 60);
  make(8);
  constexpr std::uint32_t n = 256;
  const Buffer a = buffer(n, 1), b = buffer(n, 1), c = buffer(n, 1), d = buffer(n, 1);
  ASSERT_TRUE(e().finish().ok());
  std::optional<Result<void>> failing, clean, drained;
  e().push_error_scope();
  shim().set_fault("clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES");
  ASSERT_TRUE(e().launch(advance(a, b, n)).ok());
  e().push_error_scope();  // nested: its commands are its own
  ASSERT_TRUE(e().launch(advance(c, d, n)).ok());
  ASSERT_TRUE(e().pop_error_scope([&](Result<void> r) { clean = std::move(r); }).ok());
  ASSERT_TRUE(e().pop_error_scope([&](Result<void> r) { failing = std::move(r); }).ok());
  e().drain([&](Result<void> r) { drained = std::move(r); });
  EXPECT_EQ(run_for(e(), [&] { return failing && clean && drained; }, 20), "");
  ASSERT_EQ(shim().fired(), 1);
  ASSERT_TRUE(failing && clean && drained);
  ASSERT_FALSE(failing->ok()) << "the scope of the failed launch popped with success";
  EXPECT_NE(failing->error().to_string().find("clEnqueueNDRangeKernel"), std::string::npos)
      << failing->error().to_string();
  EXPECT_TRUE(clean->ok()) << "the nested scope got its parent's error: " << clean->error().to_string();
  EXPECT_TRUE(drained->ok()) << "drain reported a scope's error: " << drained->error().to_string();
  auto none = e().pop_error_scope([](Result<void>) { ADD_FAILURE() << "callback of a refused pop ran"; });
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status(), Status::InvalidArgument);
}

// Without scopes, drain() reports the failures of the commands made since
// the previous drain, and only those.
TEST_F(CoreFaults, DrainReportsErrorsOfItsOwnCommandsOnly) {
  Watchdog wd("drain scope", 60);
  make(8);
  constexpr std::uint32_t n = 256;
  const Buffer a = buffer(n, 1), b = buffer(n, 1), c = buffer(n, 1);
  ASSERT_TRUE(e().finish().ok());
  shim().set_fault("clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES");
  ASSERT_TRUE(e().launch(advance(a, b, n)).ok());
  auto first = e().finish();
  ASSERT_FALSE(first.ok()) << "drain missed the failure of a command made before it";
  ASSERT_TRUE(e().launch(advance(a, c, n)).ok());
  EXPECT_TRUE(e().finish().ok());
}

// A command waits for a command of another queue, whose queue is flushed
// first (OpenCL requires it). When that clFlush fails, the queue must still
// be flushed by the next flush of every queue (here finish()'s): on a driver
// that starts only flushed commands, the waiting command would otherwise
// wait for good.
constexpr const char* kFlushRetrySource = R"CL(
__kernel void spin(__global uint* out, uint iters) {
  uint v = out[0];
  for (uint i = 0; i < iters; ++i) v = v * 1664525u + 1013904223u;
  out[get_global_id(0)] = v;
}
__kernel void copy_words(__global const uint* in, __global uint* out) {
  out[get_global_id(0)] = in[get_global_id(0)];
}
)CL";

// Two spins on two queues and a copy that waits across them: a window of
// one, so each command goes out as it is made, queue choice sees no later
// consumer and the two spins land on two queues.
class CoreFaultsFlush : public ::testing::Test {
 protected:
  static constexpr std::uint32_t n = 64;
  void make(CommandEvents events) {
    ASSERT_TRUE(shim_ok());
    shim().reset_faults();
    Config config = shim_config(2, 1);
    config.command_events = events;
    ASSERT_TRUE(le.create(config).ok());
    Engine& e = *le.engine;
    auto made = e.compile_sync(0, kFlushRetrySource);
    ASSERT_TRUE(made.ok()) << made.error().to_string();
    p = *made;
    auto s = e.kernel(*p, "spin");
    auto c = e.kernel(*p, "copy_words", {ParamAccess::ReadOnly, ParamAccess::WriteOnly});
    ASSERT_TRUE(s.ok() && c.ok());
    spin = *s;
    copy = *c;
    auto a = e.allocate(0, n * 4);
    auto b = e.allocate(0, n * 4);
    ASSERT_TRUE(a.ok() && b.ok());
    x = *a;
    y = *b;
  }
  void TearDown() override { shim().reset_faults(); }

  LoopEngine le;
  std::optional<Program> p;
  std::optional<Kernel> spin, copy;
  std::optional<Buffer> x, y;
};

TEST_F(CoreFaultsFlush, AFailedFlushBeforeACrossQueueWaitIsTriedAgain) {
  Watchdog wd("flush before a cross-queue wait", 60);
  make(CommandEvents::Awaited);
  Engine& e = *le.engine;
  std::vector<ScheduleEntry> schedule;
  e.set_schedule_recorder([&](const ScheduleEntry& s) { schedule.push_back(s); });
  // x on one queue and y on the other, both still running when the copy
  // y -> x goes onto y's queue and waits for x's writer.
  auto round = [&](const char* fault) -> long {
    schedule.clear();
    EXPECT_TRUE(e.finish().ok());
    const long flushes0 = shim().calls("clFlush");
    if (fault) shim().set_fault(fault);
    for (Buffer b : {*x, *y})
      EXPECT_TRUE(e.launch(Launch{*spin, {KernelArg::of(b), KernelArg::value<std::uint32_t>(4u << 20)}, {n}}).ok());
    EXPECT_TRUE(e.launch(Launch{*copy, {KernelArg::of(*y), KernelArg::of(*x)}, {n}}).ok());
    EXPECT_TRUE(e.finish().ok());
    if (fault) {
      EXPECT_EQ(shim().fired(), 1) << "the flush before the wait was not made";
    }
    shim().reset_faults();
    EXPECT_EQ(schedule.size(), 3u);
    if (schedule.size() == 3) {
      EXPECT_NE(schedule[0].queue, schedule[1].queue) << "the two spins share a queue: no cross-queue wait";
      EXPECT_EQ(schedule[2].queue, schedule[1].queue);
      EXPECT_EQ(schedule[2].waits, std::vector<std::uint64_t>{schedule[0].id})
          << "the copy did not wait across queues (the spin finished first?)";
    }
    return shim().calls("clFlush") - flushes0;
  };
  const long clean = round(nullptr);
  const long failed_once = round("clFlush:1:CL_OUT_OF_RESOURCES");
  // The failed call, then the flush it still owes, made by finish().
  EXPECT_EQ(failed_once, clean + 1) << "the queue whose flush failed was not flushed again";
  e.set_schedule_recorder({});
}

// A launch fails on the device while a command on another queue waits for
// it (its wait list names the failed event) and the driver fails that
// command for the wait: the listener hears the one failure once, whichever
// of the two events the engine reads first, and a read of what the waiter
// wrote names the first failure.
TEST_F(CoreFaultsFlush, AFailureThatFailsAWaiterOnAnotherQueueIsReportedOnce) {
  Watchdog wd("a waiter on another queue behind a failed launch", 60);
  make(CommandEvents::Auto);
  Engine& e = *le.engine;
  ASSERT_TRUE(e.finish().ok());
  std::vector<std::string> heard;
  e.set_error_listener([&](const Error& err) { heard.push_back(err.to_string()); });
  std::vector<ScheduleEntry> schedule;
  e.set_schedule_recorder([&](const ScheduleEntry& s) { schedule.push_back(s); });
  shim().set_fault("event:clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES");  // x's spin
  for (Buffer b : {*x, *y})
    ASSERT_TRUE(e.launch(Launch{*spin, {KernelArg::of(b), KernelArg::value<std::uint32_t>(4u << 20)}, {n}}).ok());
  ASSERT_TRUE(e.launch(Launch{*copy, {KernelArg::of(*y), KernelArg::of(*x)}, {n}}).ok());
  std::optional<std::string> read_error;
  ASSERT_TRUE(e.read(*x, 0, n * 4, [&](Result<std::span<const std::byte>> d) {
                 read_error = d ? std::string() : d.error().to_string();
               }).ok());
  EXPECT_EQ(run_for(e, [&] { return read_error.has_value(); }, 20), "");
  (void)e.finish();
  EXPECT_EQ(shim().fired(), 1);
  shim().reset_faults();
  e.set_schedule_recorder({});
  ASSERT_GE(schedule.size(), 3u);
  EXPECT_NE(schedule[0].queue, schedule[1].queue) << "the two spins share a queue: no cross-queue wait";
  EXPECT_EQ(schedule[2].waits, std::vector<std::uint64_t>{schedule[0].id})
      << "the copy did not wait across queues for the failed spin: the case is not made";
  ASSERT_TRUE(read_error.has_value());
  EXPECT_NE(*read_error, "") << "the read of what a failed launch fed succeeded";
  EXPECT_NE(read_error->find("failed command " + std::to_string(schedule[0].id)), std::string::npos) << *read_error;
  EXPECT_EQ(heard.size(), 1u) << "the listener heard the one failure " << heard.size()
                              << " times: " << ::testing::PrintToString(heard);
  e.set_error_listener({});
}

// A command whose input failed while it still ran is parked: its outcome is
// known, its callback waits for its device work to end. That callback is
// delivered after the completion walk that sees the work end, in program
// order with the callbacks of that walk — not inside the walk, ahead of an
// earlier command's.
constexpr const char* kParkedSource = R"CL(
__kernel void spin_from(__global const uint* in, __global uint* out, uint iters) {
  uint v = in[get_global_id(0)];
  for (uint i = 0; i < iters; ++i) v = v * 1664525u + 1013904223u;
  out[get_global_id(0)] = v;
}
)CL";

struct ParkedOrder {
  std::vector<int>* order;
  int which;
};

void record_parked_order(int status, const char*, void* user) {
  auto* o = static_cast<ParkedOrder*>(user);
  o->order->push_back(status == 0 ? o->which : -o->which);
}

TEST(CoreFaultsParked, AParkedCommandsCallbackKeepsProgramOrder) {
  Watchdog wd("parked callback order", 60);
  ASSERT_TRUE(shim_ok());
  shim().reset_faults();
  LoopEngine le;
  ASSERT_TRUE(le.create(shim_config(1)).ok());
  Engine& e = *le.engine;
  auto p = e.compile_sync(0, kParkedSource);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  auto spin = e.kernel(*p, "spin_from");
  ASSERT_TRUE(spin.ok());
  constexpr std::uint32_t n = 64;
  Buffer b[5];
  for (Buffer& x : b) {
    auto a = e.allocate(0, n * 4);
    ASSERT_TRUE(a.ok());
    x = *a;
  }
  ASSERT_TRUE(e.finish().ok());
  bool failed_seen = false;
  e.set_error_listener([&](const Error&) { failed_seen = true; });
  auto launch = [&](Buffer in, Buffer out, std::uint32_t iters) {
    return Launch{*spin, {KernelArg::of(in), KernelArg::of(out), KernelArg::value(iters)}, {n}};
  };
  std::vector<int> order;
  ParkedOrder earlier{&order, 1}, parked{&order, 2};
  // On one in-order queue: a short launch whose event fails, an unrelated
  // long one (earlier), then a long one reading the failed one's output.
  shim().set_fault("event:clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES");
  ASSERT_TRUE(e.launch(launch(b[0], b[1], 1)).ok());
  ASSERT_TRUE(e.launch(launch(b[2], b[3], 8u << 20), record_parked_order, &earlier).ok());
  ASSERT_TRUE(e.launch(launch(b[1], b[4], 16u << 20), record_parked_order, &parked).ok());
  ASSERT_TRUE(e.run_until([&] { return failed_seen; }).ok());
  shim().reset_faults();
  ASSERT_TRUE(order.empty()) << "the long launches finished before the failure was seen (machine too fast?)";
  // Both long launches end while the loop does not turn: one walk sees both.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(e.run_until([&] { return order.size() == 2; }).ok());
  EXPECT_EQ(order, (std::vector<int>{1, -2})) << "callbacks out of program order (or the second did not fail)";
  e.set_error_listener({});
}

}  // namespace
}  // namespace uvcl::faults::core_faults_test

namespace uvcl::faults::core_faults_test {
namespace {

// Event-less launches complete through the fence after them. A failed fence
// fails every command it completes — what they wrote is poisoned and the
// first of them is named — and nothing hangs; the engine works afterwards.
TEST_F(CoreFaults, AFailedFenceFailsTheCommandsItCompletes) {
  Watchdog wd("failed fence", 60);
  make(1, {}, CommandEvents::Awaited);
  constexpr std::uint32_t n = 256;
  const Buffer a = buffer(n, 1), b = buffer(n, 1), c = buffer(n, 1);
  ASSERT_TRUE(e().finish().ok());
  std::vector<Error> heard;
  e().set_error_listener([&](const Error& err) { heard.push_back(err); });
  shim().set_fault("event:clEnqueueMarkerWithWaitList:1:CL_OUT_OF_RESOURCES");
  ASSERT_TRUE(e().launch(advance(a, b, n)).ok());
  ASSERT_TRUE(e().launch(advance(b, c, n)).ok());
  auto r = e().finish();
  ASSERT_EQ(shim().fired(), 1) << "the window was not fenced by a marker";
  shim().reset_faults();
  ASSERT_FALSE(r.ok()) << "the failed fence was not reported";
  EXPECT_NE(r.error().to_string().find("CL_OUT_OF_RESOURCES"), std::string::npos) << r.error().to_string();
  std::string why;
  EXPECT_FALSE(read_words(c, n, &why).has_value()) << "read data a failed range wrote";
  EXPECT_NE(why.find("CL_OUT_OF_RESOURCES"), std::string::npos) << why;
  ASSERT_FALSE(heard.empty());
  // Recovery: rewritten, the buffers compute exactly again.
  const std::vector<std::uint32_t> ones(n, 1);
  ASSERT_TRUE(e().write(b, 0, std::as_bytes(std::span(ones))).ok());
  ASSERT_TRUE(e().write(c, 0, std::as_bytes(std::span(ones))).ok());
  ASSERT_TRUE(e().launch(advance(b, c, n)).ok());
  auto got = read_words(c, n, &why);
  ASSERT_TRUE(got.has_value()) << why;
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ((*got)[i], 3u + 1u + i);
  e().set_error_listener({});
}


}  // namespace
}  // namespace uvcl::faults::core_faults_test

namespace uvcl::faults::core_faults_test {
namespace {

// One window's launches go to the driver together and the second fails to
// enqueue. The launch before it and an unrelated one after it run; the one
// that reads its output fails with its cause, and so does a read of what
// that one wrote. Checked with and without an event per command.
class CoreFaultsMidWindow : public CoreFaults {
 protected:
  void expect_only_its_readers_fail(CommandEvents events) {
    Watchdog wd("failed enqueue in mid-window", 60);
    make(8, {}, events);
    constexpr std::uint32_t n = 256;
    const Buffer a = buffer(n, 1), b = buffer(n, 1), c = buffer(n, 1), d = buffer(n, 1);
    const Buffer x = buffer(n, 1), y = buffer(n, 1);
    ASSERT_TRUE(e().finish().ok());
    auto note = [](int status, const char*, void* user) { static_cast<std::vector<int>*>(user)->push_back(status); };
    std::vector<int> first, second, third, fourth;
    shim().set_fault("clEnqueueNDRangeKernel:2:CL_OUT_OF_RESOURCES");
    ASSERT_TRUE(e().launch(advance(a, b, n), note, &first).ok());
    ASSERT_TRUE(e().launch(advance(b, c, n), note, &second).ok());  // fails to enqueue
    ASSERT_TRUE(e().launch(advance(c, d, n), note, &third).ok());   // reads what failed
    ASSERT_TRUE(e().launch(advance(x, y, n), note, &fourth).ok());  // unrelated
    (void)e().finish();
    ASSERT_EQ(shim().fired(), 1);
    shim().reset_faults();
    EXPECT_EQ(first, std::vector<int>{0});
    ASSERT_EQ(second.size(), 1u);
    EXPECT_NE(second[0], 0);
    ASSERT_EQ(third.size(), 1u);
    EXPECT_NE(third[0], 0) << "a launch ran on the output of a launch that failed to enqueue";
    EXPECT_EQ(fourth, std::vector<int>{0});
    std::string why;
    EXPECT_FALSE(read_words(d, n, &why).has_value()) << "read what a launch wrote from a failed launch's output";
    EXPECT_NE(why.find("CL_OUT_OF_RESOURCES"), std::string::npos) << why;
    for (Buffer ok : {b, y}) {
      auto got = read_words(ok, n, &why);
      ASSERT_TRUE(got.has_value()) << why;
      for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ((*got)[i], 3u + 1u + i);
    }
  }
};

TEST_F(CoreFaultsMidWindow, AFailedEnqueueFailsOnlyWhatReadsIt) { expect_only_its_readers_fail(CommandEvents::Auto); }

TEST_F(CoreFaultsMidWindow, AFailedEnqueueFailsOnlyWhatReadsItWithoutEvents) {
  expect_only_its_readers_fail(CommandEvents::Awaited);
}

}  // namespace
}  // namespace uvcl::faults::core_faults_test

namespace uvcl::faults::core_faults_test {
namespace {

// A launch that fails to enqueue never runs: it must not stand, in a
// buffer's hazards, for an earlier reader of that buffer on its queue, or a
// later writer on another queue stops waiting for that reader (a lost
// write-after-read wait). Z reads x at the end of a long spin on one queue;
// B follows Z on that queue, reads x, and fails to enqueue; C, on the other
// queue, overwrites x and must wait for Z.
constexpr const char* kHiddenReaderSource = R"CL(
__kernel void set_one(__global uint* out) { out[0] = 7u; }
__kernel void spin_then_read(__global const uint* in, __global uint* out, uint iters) {
  uint v = 1u;
  for (uint i = 0; i < iters; ++i) v = v * 1664525u + 1013904223u;
  out[0] = v == 0xdeadbeefu ? 0u : in[0];
}
__kernel void add2(__global const uint* a, __global const uint* b, __global uint* out) { out[0] = a[0] + b[0]; }
__kernel void copy_plus(__global const uint* in, __global uint* out) { out[0] = in[0] + 1000u; }
)CL";

class CoreFaultsHiddenReader : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(shim_ok());
    shim().reset_faults();
    ASSERT_TRUE(le_.create(shim_config(2)).ok());
    auto p = e().compile_sync(0, kHiddenReaderSource);
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    for (auto [name, k] : {std::pair{"set_one", &set_one_}, {"spin_then_read", &spin_}, {"add2", &add2_},
                           {"copy_plus", &copy_plus_}}) {
      auto made = e().kernel(*p, name);
      ASSERT_TRUE(made.ok()) << made.error().to_string();
      *k = *made;
    }
    for (auto [b, v] : {std::pair{&x_, 5u}, {&y_, 0u}, {&o1_, 0u}, {&o2_, 0u}}) {
      auto made = e().allocate(0, 16);
      ASSERT_TRUE(made.ok());
      *b = *made;
      const std::vector<std::uint32_t> w(4, v);
      ASSERT_TRUE(e().write(*b, 0, std::as_bytes(std::span(w))).ok());
    }
    ASSERT_TRUE(e().finish().ok());
    e().set_schedule_recorder([this](const ScheduleEntry& s) { schedule_.push_back(s); });
  }
  void TearDown() override { shim().reset_faults(); }

  Engine& e() { return *le_.engine; }
  Launch w() { return Launch{set_one_, {KernelArg::of(y_)}, {1}}; }
  Launch z() { return Launch{spin_, {KernelArg::of(x_), KernelArg::of(o1_), KernelArg::value<std::uint32_t>(300u << 20)}, {1}}; }
  Launch b() { return Launch{add2_, {KernelArg::of(o1_), KernelArg::of(x_), KernelArg::of(o2_)}, {1}}; }
  Launch c() { return Launch{copy_plus_, {KernelArg::of(y_), KernelArg::of(x_)}, {1}}; }

  // Z and C are the schedule's entries `zi` and `ci` (B never reached it).
  void expect_c_waited_for_z(std::size_t zi, std::size_t ci) {
    e().set_schedule_recorder({});
    ASSERT_EQ(schedule_.size(), 3u);
    const ScheduleEntry &zs = schedule_[zi], &cs = schedule_[ci];
    if (zs.queue != cs.queue) {
      bool covered = false;
      std::string waits;
      for (auto id : cs.waits) {
        waits += std::to_string(id) + " ";
        for (const ScheduleEntry& s : schedule_) covered |= s.id == id && s.queue == zs.queue && s.id >= zs.id;
      }
      EXPECT_TRUE(covered) << "the writer of x (command " << cs.id << ", queue " << cs.queue << ") waits for ["
                           << waits << "], not for its reader " << zs.id << " on queue " << zs.queue;
    }
    auto r = e().read_sync(o1_, 0, 4);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    std::uint32_t got = 0;
    std::memcpy(&got, r->data(), 4);
    EXPECT_EQ(got, 5u) << "the reader of x saw the later writer's value";
  }

  LoopEngine le_;
  Kernel set_one_{}, spin_{}, add2_{}, copy_plus_{};
  Buffer x_{}, y_{}, o1_{}, o2_{};
  std::vector<ScheduleEntry> schedule_;
};

TEST_F(CoreFaultsHiddenReader, InOneWindow) {
  Watchdog wd("failed reader, then a writer in its window", 120);
  shim().set_fault("clEnqueueNDRangeKernel:3:CL_OUT_OF_RESOURCES");  // B
  for (const Launch& l : {w(), z(), b(), c()}) ASSERT_TRUE(e().launch(l).ok());
  (void)e().finish();
  EXPECT_EQ(shim().fired(), 1);
  expect_c_waited_for_z(1, 2);
}

TEST_F(CoreFaultsHiddenReader, InTheNextWindow) {
  Watchdog wd("failed reader, then a writer in the next window", 120);
  shim().set_fault("clEnqueueNDRangeKernel:2:CL_OUT_OF_RESOURCES");  // B
  for (const Launch& l : {z(), b()}) ASSERT_TRUE(e().launch(l).ok());
  e().poll();  // submits, does not wait
  EXPECT_EQ(shim().fired(), 1);
  for (const Launch& l : {w(), c()}) ASSERT_TRUE(e().launch(l).ok());
  (void)e().finish();
  expect_c_waited_for_z(0, 2);
}

}  // namespace
}  // namespace uvcl::faults::core_faults_test
