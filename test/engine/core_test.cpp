// The engine core's promises, each tried the way a user broke it: program
// order when a callback submits from inside the engine, releases that cost
// nothing on the loop, the API edge (callbacks required, handles of another
// engine, configs built in code, programs released before on_built ran), and
// the engine destroyed from inside its own callbacks. (The error listener's
// order and failures are in test/faults/core_faults_test.cpp.)
#include <chrono>
#include <functional>
#include <thread>

#include "../watchdog.hpp"
#include "engine_test_util.hpp"

namespace uvcl::testing::core {

using util::buf;
using util::make_launch;
using util::u32;

class Core : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    program_ = compile(util::kKernels);
    set_ = kernel(program_, "set_value");
    spin_ = kernel(program_, "spin");
    permute_ = kernel(program_, "permute");
    axpbc_ = kernel(program_, "axpbc");
  }
  // A kernel that runs ~150 ms and writes `out`.
  void launch_slow_kernel(Buffer& out) {
    const std::uint32_t iters = util::spin_iters_for(eng(), spin_, 150);
    auto in = eng().allocate(0, 4);
    auto o = eng().allocate(0, 4);
    ASSERT_TRUE(in.ok() && o.ok());
    ASSERT_TRUE(eng().launch(make_launch(spin_, {buf(*in), buf(*o), u32(iters), u32(1)}, {1})).ok());
    out = *o;
  }
  Program program_;
  Kernel set_, spin_, permute_, axpbc_;
};

std::vector<std::uint32_t> words(std::span<const std::byte> b) {
  std::vector<std::uint32_t> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

// An engine where reads issued back to back are one burst however slow the
// machine, and such a burst.
Config burst_forever_config() {
  Config c = test_config();
  c.read_burst_us = kMaxReadBurstUs;  // however slow the machine, the reads below are one burst
  return c;
}

int issue_burst_of_reads(Engine& e, Buffer b, std::vector<Result<void>>& got) {
  constexpr int kReads = 5;
  for (int i = 0; i < kReads; ++i)
    EXPECT_TRUE(e.read(b, 0, 64, [&got](Result<std::span<const std::byte>> d) {
      got.push_back(d ? Result<void>{} : Result<void>{d.error()});
    }).ok());
  return kReads;
}

// The schedule recorder runs while a window is submitted. A read it issues
// must come after every command made before it — here a fill still in the
// same window — not jump ahead of them.
TEST_F(Core, ReadFromTheScheduleRecorderKeepsProgramOrder) {
  constexpr std::uint32_t n = 256;
  const Buffer x = upload(std::vector<std::uint32_t>(n, 1));
  auto other = eng().allocate(0, n * 4);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(eng().finish().ok());
  bool issued = false;
  std::optional<std::vector<std::uint32_t>> seen;
  eng().set_schedule_recorder([&](const ScheduleEntry&) {
    if (issued) return;
    issued = true;
    auto r = eng().read(x, 0, n * 4, [&](Result<std::span<const std::byte>> d) {
      ASSERT_TRUE(d.ok()) << d.error().to_string();
      seen = words(*d);
    });
    EXPECT_TRUE(r.ok()) << r.error().to_string();
  });
  // One window: the launch is recorded first, the fill is still waiting.
  ASSERT_TRUE(eng().launch(make_launch(set_, {buf(other.value()), u32(3), u32(n)}, {n})).ok());
  const std::uint32_t five = 5;
  ASSERT_TRUE(eng().fill(x, std::as_bytes(std::span(&five, 1)), 0, n * 4).ok());
  ASSERT_TRUE(eng().finish().ok());
  // The recorder runs after the step that submitted: its read may come
  // after the drain above.
  ASSERT_TRUE(eng().run_until([&] { return seen.has_value(); }).ok());
  eng().set_schedule_recorder({});
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(*seen, std::vector<std::uint32_t>(n, 5)) << "the read ran before the fill made before it";
}

// release() of a buffer whose last use is still running costs no driver
// call: the buffer is freed by the completion step, not by rescanning every
// dying buffer on every release.
TEST_F(Core, ReleasesBehindASlowKernelAskTheDriverNothing) {
  Buffer out;
  ASSERT_NO_FATAL_FAILURE(launch_slow_kernel(out));
  constexpr int kBuffers = 2000;
  std::vector<Buffer> bufs;
  for (int i = 0; i < kBuffers; ++i) {
    auto b = eng().allocate(0, 64);
    ASSERT_TRUE(b.ok());
    // Each reads what the slow kernel writes: its use waits for it.
    ASSERT_TRUE(eng().copy(out, 0, *b, 0, 4).ok());
    bufs.push_back(*b);
  }
  eng().poll();  // submitted, still behind the kernel
  const std::uint64_t queries0 = eng().stats().status_queries;
  for (Buffer b : bufs) ASSERT_TRUE(eng().release(b).ok());
  EXPECT_EQ(eng().stats().status_queries - queries0, 0u) << "release() asked the driver about pending uses";
  const std::uint64_t live0 = eng().stats().live_buffers;
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_EQ(eng().stats().live_buffers, live0 - kBuffers) << "dying buffers were not freed once their uses completed";
}

// Commands placed behind a running kernel ask whether it is done to choose
// their queue and drop satisfied waits. Within one window's submission the
// answer does not change for the better often enough to ask the driver for
// every command: one status read per queue per window, not one per command.
TEST_F(Core, CommandsBehindARunningKernelReadItsStatusOncePerWindow) {
  Buffer out;
  ASSERT_NO_FATAL_FAILURE(launch_slow_kernel(out));
  eng().poll();  // submitted and fenced: its status can be read
  constexpr int kCopies = 100;  // one default window
  std::vector<Buffer> bufs;
  for (int i = 0; i < kCopies; ++i) {
    auto b = eng().allocate(0, 64);
    ASSERT_TRUE(b.ok());
    bufs.push_back(*b);
  }
  const std::uint64_t queries0 = eng().stats().status_queries;
  for (Buffer b : bufs) ASSERT_TRUE(eng().copy(out, 0, b, 0, 4).ok());  // the last one fills the window
  const std::uint64_t queries = eng().stats().status_queries - queries0;
  ASSERT_EQ(eng().stats().pending, 0u) << "the window was not submitted";
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_LE(queries, 1u) << "the running kernel's status was read for every command placed behind it";
}

// Awaited commands issued back to back ask the driver for one completion
// callback per queue, not one each: a callback is there to wake the loop,
// and on an in-order queue the last one completes after the others (the
// completion step it wakes reads theirs too). Every callback still runs,
// with the right data.
TEST_F(Core, AwaitedCommandsIssuedTogetherAskOneDriverCallbackPerQueue) {
  const Buffer x = upload(std::vector<std::uint32_t>(16, 9));
  ASSERT_TRUE(eng().finish().ok());
  constexpr int kReads = 100;
  const std::uint64_t callbacks0 = eng().stats().callbacks;
  int good = 0;
  for (int i = 0; i < kReads; ++i)
    ASSERT_TRUE(eng().read(x, 0, 64, [&](Result<std::span<const std::byte>> d) {
      ASSERT_TRUE(d.ok()) << d.error().to_string();
      if (words(*d) == std::vector<std::uint32_t>(16, 9)) ++good;
    }).ok());
  ASSERT_TRUE(eng().run_until([&] { return good == kReads; }).ok());
  EXPECT_EQ(good, kReads);
  EXPECT_LE(eng().stats().callbacks - callbacks0, 8u) << "a driver callback per awaited command (8 queues)";
}

// Reads issued back to back are one burst: the first goes to the device at
// once, the others wait in the window and go together before the loop next
// waits — one submission and flush for the burst, not one per read (on
// NVIDIA's driver a flush costs more than the read). Each still gets its
// own data, in program order with the writes between them. With
// opencl.read_burst_us 0 every read goes out at once. Returns how many of
// the 80 commands were submitted before the loop ran.
std::uint64_t submitted_at_once_of_reads_between_fills(Engine& e) {
  auto made = e.allocate(0, 64);
  EXPECT_TRUE(made.ok());
  const Buffer x = *made;
  constexpr std::uint32_t kReads = 40;  // with the fills, within one window (100)
  const std::uint64_t submitted0 = e.stats().submitted;
  std::vector<std::uint32_t> seen(kReads, 0xffffffffu);
  int done = 0;
  for (std::uint32_t i = 0; i < kReads; ++i) {
    // Written before each read: the read sees exactly this value.
    EXPECT_TRUE(e.fill(x, std::as_bytes(std::span(&i, 1)), 0, 64).ok());
    EXPECT_TRUE(e.read(x, 0, 64, [&, i](Result<std::span<const std::byte>> d) {
      ASSERT_TRUE(d.ok()) << d.error().to_string();
      seen[i] = words(*d)[15];
      ++done;
    }).ok());
  }
  const std::uint64_t at_once = e.stats().submitted - submitted0;
  EXPECT_TRUE(e.run_until([&] { return done == static_cast<int>(kReads); }).ok());
  for (std::uint32_t i = 0; i < kReads; ++i) EXPECT_EQ(seen[i], i) << "read " << i;
  return at_once;
}

TEST_F(Core, ReadsIssuedInABurstShareOneSubmission) {
  Config c = test_config();
  c.read_burst_us = kMaxReadBurstUs;  // however slow the machine, no pause in the loop ends the burst
  make_engine(c);
  EXPECT_EQ(submitted_at_once_of_reads_between_fills(eng()), 2u) << "only the burst's first read (and its fill) at once";
  c.read_burst_us = 0;
  make_engine(c);
  EXPECT_EQ(submitted_at_once_of_reads_between_fills(eng()), 80u) << "opencl.read_burst_us 0: every read at once";
}

// Reads of data nothing is writing, issued in a burst, go to one queue: one
// flush for the burst, where spread over the least loaded queues each of
// the eight queues they touched needed its own.
TEST_F(Core, ReadsOfSettledDataInABurstShareOneQueue) {
  Config c = test_config();
  c.read_burst_us = kMaxReadBurstUs;
  c.queues = 8;
  make_engine(c);
  const Buffer x = upload(std::vector<std::uint32_t>(16, 6));
  ASSERT_TRUE(eng().finish().ok());
  constexpr int kReads = 40;
  int good = 0;
  const std::uint64_t flushes0 = eng().stats().flushes;
  for (int i = 0; i < kReads; ++i)
    ASSERT_TRUE(eng().read(x, 0, 64, [&](Result<std::span<const std::byte>> d) {
      ASSERT_TRUE(d.ok()) << d.error().to_string();
      if (words(*d) == std::vector<std::uint32_t>(16, 6)) ++good;
    }).ok());
  ASSERT_TRUE(eng().run_until([&] { return good == kReads; }).ok());
  EXPECT_EQ(good, kReads);
  // The burst's first read goes out alone (a flush), the other 39 together.
  EXPECT_LE(eng().stats().flushes - flushes0, 2u) << "the burst's reads were spread over queues";
}

// Where only awaited commands get events (as on a GPU), the small reads of
// such a burst share them: a read followed by another on its queue is
// completed by that one's event, at most 16 reads to an event. Each still
// gets its own data.
TEST_F(Core, SmallReadsOfABurstShareEvents) {
  Config c = test_config();
  c.read_burst_us = kMaxReadBurstUs;
  c.command_events = CommandEvents::Awaited;
  make_engine(c);
  constexpr int kReads = 64;
  std::vector<Buffer> bufs;
  for (std::uint32_t i = 0; i < kReads; ++i) bufs.push_back(upload(std::vector<std::uint32_t>(16, i)));
  ASSERT_TRUE(eng().finish().ok());
  std::vector<std::uint32_t> seen(kReads, 0xffffffffu);
  int done = 0;
  const std::uint64_t events0 = eng().stats().events;
  for (int i = 0; i < kReads; ++i)
    ASSERT_TRUE(eng().read(bufs[static_cast<std::size_t>(i)], 0, 64, [&, i](Result<std::span<const std::byte>> d) {
      ASSERT_TRUE(d.ok()) << d.error().to_string();
      seen[static_cast<std::size_t>(i)] = words(*d)[15];
      ++done;
    }).ok());
  ASSERT_TRUE(eng().run_until([&] { return done == kReads; }).ok());
  for (std::uint32_t i = 0; i < kReads; ++i) EXPECT_EQ(seen[i], i) << "read " << i;
  // The first read alone, then 63 in runs of at most 16: 1 + 4 events (and
  // any fence), not 64.
  EXPECT_LE(eng().stats().events - events0, 8u) << "an event per read of the burst";
}

// Windows that fill while the caller keeps issuing go out without a fence
// and a flush per queue each (on NVIDIA a marker costs what a launch does,
// a clFlush two microseconds): a queue gets them every Submitter::kLongRun
// commands, and the rest when the loop may sleep or a sync point comes.
// Completion still arrives, and every command still lands.
TEST_F(Core, FullWindowsOfABurstAreNotFencedOrFlushedEach) {
  Config c = test_config(4);
  c.window = 10;
  c.command_events = CommandEvents::Awaited;
  make_engine(c);
  constexpr int kBuffers = 40, kFills = 1000;
  std::vector<Buffer> bufs;
  for (int i = 0; i < kBuffers; ++i) bufs.push_back(eng().allocate(0, 64).value());
  ASSERT_TRUE(eng().finish().ok());
  const std::uint64_t fences0 = eng().stats().fences, submitted0 = eng().stats().submitted;
  const std::uint64_t flushes0 = eng().stats().flushes;
  for (std::uint32_t i = 0; i < kFills; ++i) {
    const std::uint32_t v = i;
    ASSERT_TRUE(eng().fill(bufs[i % kBuffers], std::as_bytes(std::span(&v, 1)), 0, 64).ok());
  }
  EXPECT_GE(eng().stats().submitted - submitted0, static_cast<std::uint64_t>(kFills - 10)) << "full windows went out";
  constexpr int kLongRun = 128;  // Submitter::kLongRun
  EXPECT_LE(eng().stats().fences - fences0, static_cast<std::uint64_t>(kFills / kLongRun + 4))
      << "a fence per queue per window";
  EXPECT_LE(eng().stats().flushes - flushes0, static_cast<std::uint64_t>(kFills / kLongRun + 4))
      << "a flush per queue per window";
  ASSERT_TRUE(eng().finish().ok());
  for (int i = 0; i < kBuffers; ++i) {
    const std::uint32_t last = static_cast<std::uint32_t>(kFills - kBuffers + i);
    EXPECT_EQ(download<std::uint32_t>(bufs[static_cast<std::size_t>(i)], 16), std::vector<std::uint32_t>(16, last))
        << "buffer " << i;
  }
  EXPECT_EQ(eng().stats().in_flight, 0u);
}

// A read is a sync point again once the burst is over: after a pause, or in
// the next loop iteration, it is on the device at once.
TEST_F(Core, AReadAfterAPauseOrALoopTurnGoesOutAtOnce) {
  Config c = test_config();
  c.read_burst_us = kAutoReadBurstUs;  // as on a GPU ("auto" is 0 on PoCL's CPU device)
  make_engine(c);
  const Buffer x = upload(std::vector<std::uint32_t>(16, 5));
  ASSERT_TRUE(eng().finish().ok());
  int done = 0;
  const auto read = [&] {
    ASSERT_TRUE(eng().read(x, 0, 64, [&](Result<std::span<const std::byte>> d) { done += d.ok() ? 1 : 0; }).ok());
  };
  std::uint64_t submitted = eng().stats().submitted;
  read();
  EXPECT_EQ(eng().stats().submitted, submitted + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  read();
  EXPECT_EQ(eng().stats().submitted, submitted + 2) << "a read after a pause waited for a loop turn";
  uv_run(eng().loop(), UV_RUN_NOWAIT);
  submitted = eng().stats().submitted;
  read();
  EXPECT_EQ(eng().stats().submitted, submitted + 1) << "the burst outlived its loop iteration";
  ASSERT_TRUE(eng().run_until([&] { return done == 3; }).ok());
}

// Work the prepare step's user code issues (here the schedule recorder) goes
// to the device in that same step, before the loop may sleep — a burst of
// reads and a launch alike — not at the next loop iteration.
TEST_F(Core, WorkIssuedFromThePrepareStepsCallbacksIsSubmittedInThatStep) {
  const Buffer x = upload(std::vector<std::uint32_t>(16, 4));
  auto other = eng().allocate(0, 64);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(eng().finish().ok());
  bool issued = false;
  int got = 0;
  eng().set_schedule_recorder([&](const ScheduleEntry&) {
    if (issued) return;
    issued = true;
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(eng().read(x, 0, 64, [&](Result<std::span<const std::byte>> d) { got += d.ok() ? 1 : 0; }).ok());
    EXPECT_TRUE(eng().launch(make_launch(set_, {buf(*other), u32(3), u32(16)}, {16})).ok());
  });
  ASSERT_TRUE(eng().launch(make_launch(set_, {buf(*other), u32(2), u32(16)}, {16})).ok());
  const std::uint64_t submitted = eng().stats().submitted;
  // One loop turn: its prepare step submits the launch and runs the recorder.
  uv_run(eng().loop(), UV_RUN_NOWAIT);
  ASSERT_TRUE(issued);
  EXPECT_EQ(eng().stats().submitted, submitted + 5) << "what the recorder issued waits for the next iteration";
  eng().set_schedule_recorder({});
  ASSERT_TRUE(eng().run_until([&] { return got == 3; }).ok());
}

// A write or fill with on_done is awaited: the driver is asked for its
// completion (a callback here on PoCL), not left to the 1 ms poll — for each
// write mode. Each waits behind a slow kernel, so it is still running when
// the loop would sleep (one already complete needs no callback).
TEST_F(Core, WritesAndFillsWithOnDoneAskForTheirCompletion) {
  const std::vector<std::uint32_t> v(1, 3);
  const std::uint32_t one = 1;
  Buffer b;
  const std::function<Result<void>(DoneCallback)> issue[] = {
      [&](DoneCallback cb) { return eng().write(b, 0, bytes_of(v), WriteMode::Copy, std::move(cb)); },
      [&](DoneCallback cb) { return eng().write(b, 0, bytes_of(v), WriteMode::Borrow, std::move(cb)); },
      [&](DoneCallback cb) { return eng().fill(b, std::as_bytes(std::span(&one, 1)), 0, 4, std::move(cb)); },
  };
  for (const auto& op : issue) {
    launch_slow_kernel(b);  // writes b for ~150 ms: the op below waits for it
    const std::uint64_t callbacks0 = eng().stats().callbacks;
    bool done = false;
    ASSERT_TRUE(op([&](Result<void> r) { done = r.ok(); }).ok());
    ASSERT_TRUE(eng().run_until([&] { return done; }).ok());
    EXPECT_GT(eng().stats().callbacks, callbacks0) << "on_done left to the poll timer";
  }
}

// A read issued by user code the prepare step runs (here the schedule
// recorder) still gets its driver callback before the loop sleeps: without
// it the loop would only see the read at the next poll tick.
TEST_F(Core, AReadIssuedFromThePrepareStepsCallbacksGetsADriverCallback) {
  const Buffer x = upload(std::vector<std::uint32_t>(16, 4));
  auto other = eng().allocate(0, 64);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(eng().finish().ok());
  bool issued = false, got = false;
  eng().set_schedule_recorder([&](const ScheduleEntry&) {
    if (issued) return;
    issued = true;
    EXPECT_TRUE(eng().read(x, 0, 64, [&](Result<std::span<const std::byte>> d) { got = d.ok(); }).ok());
  });
  const std::uint64_t callbacks0 = eng().stats().callbacks;
  ASSERT_TRUE(eng().launch(make_launch(set_, {buf(*other), u32(3), u32(16)}, {16})).ok());
  // One loop turn: its prepare step submits the launch and runs the recorder.
  uv_run(eng().loop(), UV_RUN_NOWAIT);
  ASSERT_TRUE(issued);
  EXPECT_GT(eng().stats().callbacks, callbacks0) << "the read waits for a poll tick to be seen";
  ASSERT_TRUE(eng().run_until([&] { return got; }).ok());
  eng().set_schedule_recorder({});
}

// Where only awaited commands get events (NVIDIA's default), a command two
// later commands read gets its own: the reader placed on another queue
// waits on it. With a fence instead, made when that reader is placed, after
// the last command of the producer's queue (the first reader), the readers
// ran one after the other (figure 12 on an H100 before: uvcl's fan-out as
// slow as one queue).
TEST_F(Core, AFanOutsProducerHasItsOwnEventWhereOnlyAwaitedCommandsDo) {
  Config config = test_config();
  config.command_events = CommandEvents::Awaited;
  make_engine(config);
  program_ = compile(util::kKernels);
  spin_ = kernel(program_, "spin");
  permute_ = kernel(program_, "permute");
  constexpr std::uint32_t n = 64;
  const Buffer in = upload(std::vector<std::uint32_t>(n, 5));
  const std::uint32_t iters = util::spin_iters_for(eng(), spin_, 30);  // still running when the readers go
  auto x = eng().allocate(0, n * 4);
  auto y1 = eng().allocate(0, n * 4);
  auto y2 = eng().allocate(0, n * 4);
  ASSERT_TRUE(x.ok() && y1.ok() && y2.ok());
  ASSERT_TRUE(eng().finish().ok());
  std::vector<ScheduleEntry> schedule;
  eng().set_schedule_recorder([&](const ScheduleEntry& e) { schedule.push_back(e); });
  const EngineStats before = eng().stats();
  ASSERT_TRUE(eng().launch(make_launch(spin_, {buf(in), buf(*x), u32(iters), u32(n)}, {n})).ok());
  ASSERT_TRUE(eng().launch(make_launch(permute_, {buf(*x), buf(*y1), u32(1), u32(n)}, {n})).ok());
  ASSERT_TRUE(eng().launch(make_launch(permute_, {buf(*x), buf(*y2), u32(2), u32(n)}, {n})).ok());
  ASSERT_TRUE(eng().finish().ok());
  eng().set_schedule_recorder({});
  const EngineStats after = eng().stats();
  ASSERT_EQ(schedule.size(), 3u);
  EXPECT_EQ(schedule[1].queue, schedule[0].queue);
  EXPECT_NE(schedule[2].queue, schedule[0].queue) << "the fan-out did not spread";
  EXPECT_EQ((after.events - after.fences) - (before.events - before.fences), 1u)
      << "the producer of the fan-out has no event of its own";
  const auto xs = download<std::uint32_t>(*x, n);
  const auto got = download<std::uint32_t>(*y2, n);
  ASSERT_EQ(got.size(), n);
  ASSERT_EQ(xs.size(), n);
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], xs[(i * 7 + 2) % n] + 2) << i;
}

// Each iteration allocates a temporary, produces it and consumes it into a
// long-lived buffer, then releases it. The consumer continues the long-lived
// buffer's chain on one queue; the producer, fresh work with nothing of its
// own to continue, goes there too (the consumer just behind it in the
// window says where), so nothing waits across queues: a marker, a flush and
// a wait list per iteration otherwise. With waits that cost more than the
// producer runs (as on NVIDIA's driver for short kernels, figure 6), running
// it beside the chain gains nothing.
TEST_F(Core, FreshWorkGoesWhereItsConsumerContinuesAChain) {
  Config config = test_config();
  config.cross_wait_us = 1000;
  make_engine(config);
  program_ = compile(util::kKernels);
  permute_ = kernel(program_, "permute");
  axpbc_ = kernel(program_, "axpbc");
  constexpr std::uint32_t n = 64, kIters = 40;
  std::vector<std::uint32_t> in_vals(n);
  for (std::uint32_t i = 0; i < n; ++i) in_vals[i] = 5 * i + 1;
  const Buffer in = upload(in_vals);
  auto out = eng().allocate(0, n * 4);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(eng().finish().ok());
  const std::uint64_t waits0 = eng().stats().cross_queue_waits;
  for (std::uint32_t it = 0; it < kIters; ++it) {
    auto t = eng().allocate(0, n * 4);
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE(eng().launch(make_launch(permute_, {buf(in), buf(*t), u32(it), u32(n)}, {n})).ok());
    ASSERT_TRUE(eng().launch(make_launch(axpbc_, {buf(*t), buf(*t), buf(*out), u32(it), u32(n)}, {n})).ok());
    ASSERT_TRUE(eng().release(*t).ok());
  }
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_EQ(eng().stats().cross_queue_waits - waits0, 0u) << "consumers waited for their producers across queues";
  auto got = eng().read_sync(*out, 0, n * 4);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  const std::uint32_t s = kIters - 1;
  std::vector<std::uint32_t> want(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t t = in_vals[(i * 7u + s) % n] + s;
    want[i] = t * 3u + t + s;
  }
  EXPECT_EQ(words(*got), want);
}

// A timed launch exists for its callback: an empty one is refused. A
// borrowed write may go without on_done (the caller keeps its bytes until
// finish()), also from host memory released while the write is in flight.
TEST_F(Core, EmptyCallbacks) {
  auto b = eng().allocate(0, 64);
  ASSERT_TRUE(b.ok());
  auto timed = eng().timed_launch(make_launch(set_, {buf(*b), u32(1), u32(16)}, {16}), {});
  ASSERT_FALSE(timed.ok());
  EXPECT_EQ(timed.status(), Status::InvalidArgument);
  EXPECT_NE(timed.error().message.find("callback"), std::string::npos) << timed.error().message;
  auto host = eng().alloc_host(0, 64);
  ASSERT_TRUE(host.ok()) << host.error().to_string();
  std::memset(host->bytes.data(), 7, 64);
  ASSERT_TRUE(eng().write(*b, 0, host->bytes, WriteMode::Borrow).ok());
  ASSERT_TRUE(eng().write(*b, 0, host->bytes.subspan(0, 32), WriteMode::Borrow).ok());
  ASSERT_TRUE(eng().release(*host).ok());
  ASSERT_TRUE(eng().finish().ok());
  auto back = eng().read_sync(*b, 0, 64);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(std::to_integer<int>((*back)[63]), 7);
}

// A handle is only valid with the engine that made it.
TEST_F(Core, HandlesOfAnotherEngineAreRefused) {
  auto other = Engine::create(test_config());
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  Engine& b = *other.value();
  auto mine = eng().allocate(0, 64);
  auto theirs = b.allocate(0, 64);
  ASSERT_TRUE(mine.ok() && theirs.ok());
  auto r = b.read_sync(*mine, 0, 64);
  ASSERT_FALSE(r.ok()) << "engine B read engine A's buffer " << mine->id;
  EXPECT_EQ(r.status(), Status::InvalidArgument);
  auto k = b.launch(make_launch(set_, {buf(*theirs), u32(1), u32(16)}, {16}));
  ASSERT_FALSE(k.ok()) << "engine B launched engine A's kernel";
  EXPECT_FALSE(b.release(program_).ok());
  ASSERT_TRUE(b.finish().ok());
}

// Config built in code is checked as a config file is.
TEST(CoreConfig, CreateRefusesAConfigOutOfRange) {
  Config c;
  c.queues = 0;
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok()) << "queues = 0 was accepted";
  EXPECT_EQ(e.status(), Status::InvalidConfig);
  EXPECT_NE(e.error().message.find("queues"), std::string::npos) << e.error().message;
  Config w;
  w.window = 0;
  auto e2 = Engine::create(w);
  ASSERT_FALSE(e2.ok()) << "window = 0 was accepted";
  EXPECT_NE(e2.error().message.find("window"), std::string::npos) << e2.error().message;
}

// A program released before its on_built ran (a memo hit reports from the
// loop) is freed after on_built, which still runs exactly once, with Cancelled.
TEST_F(Core, ProgramReleasedBeforeOnBuiltRan) {
  int built = 0;
  auto p = eng().compile(0, util::kKernels, "", [&](Result<void> r) {
    EXPECT_EQ(r.status(), Status::Cancelled) << "the build of a released program reported as done";
    ++built;
  });
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  ASSERT_TRUE(eng().release(*p).ok());
  ASSERT_TRUE(eng().run_until([&] { return built > 0; }).ok());
  EXPECT_EQ(built, 1);
  EXPECT_FALSE(eng().kernel(*p, "set_value").ok()) << "a released program made a kernel";
  ASSERT_TRUE(eng().finish().ok());
}

}  // namespace uvcl::testing::core

namespace uvcl::testing::core {

// Destroying the engine inside its own read callback, on its own loop: the
// blocking call that ran the loop returns an error, every other callback
// still runs exactly once, nothing is used after it is freed.
TEST_F(Core, DestroyedInsideItsOwnCallbackOnItsOwnLoop) {
  constexpr std::uint32_t n = 64;
  const Buffer x = upload(std::vector<std::uint32_t>(n, 4));
  int reads = 0, later = 0;
  ASSERT_TRUE(eng().read(x, 0, n * 4, [&](Result<std::span<const std::byte>> d) {
    EXPECT_TRUE(d.ok());
    ++reads;
    engine_.reset();  // from inside the engine's own callback
  }).ok());
  ASSERT_TRUE(eng().fill(x, std::as_bytes(std::span<const std::uint32_t>(&n, 1)), 0, n * 4,
                         [&](Result<void>) { ++later; }).ok());
  auto r = eng().finish();
  EXPECT_EQ(engine_, nullptr);
  ASSERT_FALSE(r.ok()) << "finish() reported success although a callback destroyed the engine";
  EXPECT_EQ(r.status(), Status::Cancelled) << r.error().to_string();
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(later, 1) << "a callback pending at the destruction ran " << later << " times";
}

// The same on a caller's loop: the caller's uv_run returns once the engine's
// handles are closed, and the loop closes cleanly.
TEST(CoreLoop, DestroyedInsideItsOwnCallbackOnACallersLoop) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  {
    auto made = Engine::create(test_config(), &loop);
    ASSERT_TRUE(made.ok()) << made.error().to_string();
    std::unique_ptr<Engine> engine = std::move(made.value());
    auto b = engine->allocate(0, 256);
    ASSERT_TRUE(b.ok());
    std::vector<std::uint32_t> v(64, 9);
    ASSERT_TRUE(engine->write(*b, 0, bytes_of(v)).ok());
    int reads = 0;
    ASSERT_TRUE(engine->read(*b, 0, 256, [&](Result<std::span<const std::byte>> d) {
      EXPECT_TRUE(d.ok());
      ++reads;
      engine.reset();
    }).ok());
    uv_run(&loop, UV_RUN_DEFAULT);
    EXPECT_EQ(engine, nullptr);
    EXPECT_EQ(reads, 1);
  }
  EXPECT_EQ(uv_loop_close(&loop), 0) << "a handle of the destroyed engine was left open";
}

// poll() on a caller's loop does the engine's own work and never runs the
// caller's loop (whose callbacks are the caller's to run, and which may be
// running now).
TEST(CoreLoop, PollDoesNotRunACallersLoop) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  {
    auto made = Engine::create(test_config(), &loop);
    ASSERT_TRUE(made.ok()) << made.error().to_string();
    Engine& e = *made.value();
    uv_timer_t timer;
    bool fired = false;
    uv_timer_init(&loop, &timer);
    timer.data = &fired;
    uv_timer_start(&timer, [](uv_timer_t* t) { *static_cast<bool*>(t->data) = true; }, 0, 0);
    uv_update_time(&loop);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    e.poll();
    EXPECT_FALSE(fired) << "poll() ran the caller's loop";
    uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
    made.value().reset();
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// Blocking calls on a caller's loop that has work of its own (a long timer
// here; a listening socket alike): each returns once what it waits for is
// done, not when the caller's handle next fires. Where the engine sees its
// work done in its poll-timer step (polled completion; finish() with
// nothing in flight), the loop's poll right after must not block.
TEST(CoreLoop, BlockingCallsReturnWhileTheCallersLoopHasWorkOfItsOwn) {
  for (CompletionMode mode : {CompletionMode::Callback, CompletionMode::Poll}) {
    SCOPED_TRACE(mode == CompletionMode::Poll ? "polled completion" : "driver callbacks");
    uv_loop_t loop;
    ASSERT_EQ(uv_loop_init(&loop), 0);
    uv_timer_t later;
    uv_timer_init(&loop, &later);
    uv_timer_start(&later, [](uv_timer_t*) {}, 10 * 60 * 1000, 0);
    {
      Watchdog wd("blocking calls beside a caller's ten-minute timer", 30);
      Config c = test_config();
      c.completion = mode;
      auto made = Engine::create(c, &loop);
      ASSERT_TRUE(made.ok()) << made.error().to_string();
      Engine& e = *made.value();
      auto b = e.allocate(0, 64);
      ASSERT_TRUE(b.ok());
      ASSERT_TRUE(e.finish().ok()) << "nothing in flight";
      const std::vector<std::uint32_t> v(16, 7);
      for (int round = 0; round < 3; ++round) {
        ASSERT_TRUE(e.write(*b, 0, bytes_of(v)).ok());
        ASSERT_TRUE(e.finish().ok());
        ASSERT_TRUE(e.finish().ok()) << "nothing in flight";
        auto got = e.read_sync(*b, 0, 64);
        ASSERT_TRUE(got.ok()) << got.error().to_string();
        EXPECT_EQ(as_vector<std::uint32_t>(got.value()), v);
      }
      made.value().reset();
    }
    uv_close(reinterpret_cast<uv_handle_t*>(&later), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop), 0);
  }
}

// A caller's frame work for the two tests below: copies within one buffer
// of an engine on the caller's loop, counted when done.
struct CopyingFrame {
  std::unique_ptr<Engine> engine;
  Buffer buffer;
  int copies = 0;
  // The engine on `loop`, its buffer allocated and settled.
  void start(uv_loop_t* loop, const Config& c) {
    auto made = Engine::create(c, loop);
    ASSERT_TRUE(made.ok()) << made.error().to_string();
    engine = std::move(made.value());
    auto b = engine->allocate(0, 64);
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(engine->finish().ok());
    buffer = *b;
  }
  void copy() {
    EXPECT_TRUE(engine->copy(buffer, 0, buffer, 32, 32, [this](Result<void> r) {
      EXPECT_TRUE(r.ok());
      ++copies;
    }).ok());
  }
};

// A prepare handle of the caller's, started before the engine's, runs after
// it in each iteration (libuv runs the last started first). Work it issues
// comes after the engine's prepare step, which submits windows: the loop
// must not block with that work still in its window (it would wait there
// for the poll timer, a millisecond, or forever with nothing else in
// flight). Once armed, the handle issues one copy and notes how long the
// loop would then block.
struct LatePrepareFrame : CopyingFrame {
  uv_loop_t loop;
  uv_prepare_t users;
  bool armed = false;
  std::uint64_t timeout_after_issue = 1;  // uv_backend_timeout right after issuing, in ms
  void open() {
    ASSERT_EQ(uv_loop_init(&loop), 0);
    uv_prepare_init(&loop, &users);
    users.data = this;
    uv_prepare_start(&users, [](uv_prepare_t* p) {
      auto& f = *static_cast<LatePrepareFrame*>(p->data);
      if (!f.armed) return;
      f.copy();
      f.timeout_after_issue = static_cast<std::uint64_t>(uv_backend_timeout(p->loop));
      uv_prepare_stop(p);
    });
    ASSERT_NO_FATAL_FAILURE(start(&loop, test_config()));
  }
  void close() {
    engine.reset();
    uv_close(reinterpret_cast<uv_handle_t*>(&users), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop), 0);
  }
};

TEST(CoreLoop, WorkIssuedAfterTheEnginesPrepareStepDoesNotWaitForTheLoopToBlock) {
  LatePrepareFrame frame;
  ASSERT_NO_FATAL_FAILURE(frame.open());
  {
    Watchdog wd("a copy issued after the engine's prepare step", 30);
    frame.armed = true;
    while (frame.copies == 0) uv_run(&frame.loop, UV_RUN_ONCE);
  }
  EXPECT_EQ(frame.timeout_after_issue, 0u) << "the loop would have blocked with the copy in its window";
  frame.close();
}

// The same inside a blocking call, which runs the caller's loop: the copy
// waited in its window for the engine's poll timer.
TEST(CoreLoop, WorkIssuedAfterTheEnginesPrepareStepInsideABlockingCallDoesNotWait) {
  LatePrepareFrame frame;
  ASSERT_NO_FATAL_FAILURE(frame.open());
  {
    Watchdog wd("a copy issued after the engine's prepare step inside finish()", 30);
    frame.armed = true;
    ASSERT_TRUE(frame.engine->finish().ok());  // its loop iterations run the caller's prepare handle
    EXPECT_EQ(frame.timeout_after_issue, 0u) << "the loop would have blocked with the copy in its window";
    while (frame.copies == 0) uv_run(&frame.loop, UV_RUN_ONCE);
  }
  frame.close();
}

// Active idle handles on `loop` (uv_walk: the loop's own bookkeeping).
int active_idles(uv_loop_t* loop) {
  int n = 0;
  uv_walk(
      loop,
      [](uv_handle_t* h, void* arg) {
        if (uv_handle_get_type(h) == UV_IDLE && uv_is_active(h)) ++*static_cast<int*>(arg);
      },
      &n);
  return n;
}

// Work a caller's prepare handle issues before the engine's prepare step
// (one started after the engine's runs first) goes out in that step: the
// loop may still sleep afterwards. Work issued from a caller's socket or
// async callback is not a reason to keep it awake in later iterations
// either.
TEST(CoreLoop, WorkIssuedBeforeTheEnginesPrepareStepLetsTheLoopSleep) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  struct Frame : CopyingFrame {
    int frames_left = 0;
    int kept_awake = 0;  // frames whose copy left an idle handle active
  } frame;
  Config c = test_config();
  c.spin_us = 0;  // no idle handle of the engine's own while it waits
  ASSERT_NO_FATAL_FAILURE(frame.start(&loop, c));
  uv_async_t poke;
  uv_async_init(&loop, &poke, [](uv_async_t* a) {
    auto& f = *static_cast<Frame*>(a->data);
    f.copy();  // from the loop's poll phase
    f.frames_left = 20;
  });
  poke.data = &frame;
  uv_prepare_t users;  // started after the engine's: runs before it
  uv_prepare_init(&loop, &users);
  users.data = &frame;
  uv_prepare_start(&users, [](uv_prepare_t* p) {
    auto& f = *static_cast<Frame*>(p->data);
    if (f.frames_left == 0) return;
    --f.frames_left;
    f.copy();
    f.kept_awake += active_idles(p->loop) > 0 ? 1 : 0;
  });
  {
    Watchdog wd("copies issued from a caller's prepare handle", 30);
    uv_async_send(&poke);
    while (frame.copies < 21) uv_run(&loop, UV_RUN_ONCE);
  }
  EXPECT_EQ(frame.kept_awake, 0) << "of 20 frames";
  frame.engine.reset();
  uv_close(reinterpret_cast<uv_handle_t*>(&users), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&poke), nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// Runs `body` with an engine on a loop of the caller's that nobody runs, then
// destroys the engine and checks that the loop closes with nothing left open.
void on_a_loop_nobody_runs(const Config& c, const std::function<void(Engine&)>& body) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  {
    auto made = Engine::create(c, &loop);
    ASSERT_TRUE(made.ok()) << made.error().to_string();
    body(*made.value());
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// A game loop drives the engine with poll() alone. Reads a callback issues
// from inside poll() go to the device before poll() returns, burst or not —
// not a frame later.
TEST(CoreLoop, ReadsIssuedFromPollsCallbacksGoOutInThatPoll) {
  on_a_loop_nobody_runs(burst_forever_config(), [](Engine& e) {
    auto b = e.allocate(0, 64);
    ASSERT_TRUE(b.ok());
    std::vector<Result<void>> got;
    bool first = false;
    std::uint64_t submitted_before = 0;
    ASSERT_TRUE(e.read(*b, 0, 64, [&](Result<std::span<const std::byte>>) {
      first = true;
      submitted_before = e.stats().submitted;
      issue_burst_of_reads(e, *b, got);
    }).ok());
    Watchdog wd("poll() loop", 30);
    while (!first) e.poll();
    EXPECT_EQ(e.stats().submitted, submitted_before + 5) << "the burst waited for a later poll()";
    while (got.size() < 5) e.poll();
  });
}

// A sync point (a read) whose own commit fills its window goes out with
// that window, which fences and flushes only long runs: the read must
// still be flushed before read() returns, not at the loop's next step.
TEST_F(Core, ASyncPointThatFillsItsWindowIsFlushedAtOnce) {
  Config c = test_config(4);
  c.window = 10;
  c.read_burst_us = 0;  // every read is a sync point
  make_engine(c);
  std::vector<Buffer> bufs;
  for (int i = 0; i < 3; ++i) bufs.push_back(eng().allocate(0, 64).value());
  ASSERT_TRUE(eng().finish().ok());
  const std::uint64_t flushes0 = eng().stats().flushes, submitted0 = eng().stats().submitted;
  for (std::uint32_t i = 0; i < 9; ++i)  // the read below is the window's tenth command
    ASSERT_TRUE(eng().fill(bufs[i % 2], std::as_bytes(std::span(&i, 1)), 0, 64).ok());
  bool got = false;
  ASSERT_TRUE(eng().read(bufs[2], 0, 64, [&](Result<std::span<const std::byte>> r) { got = r.ok(); }).ok());
  EXPECT_EQ(eng().stats().submitted - submitted0, 10u);
  EXPECT_GT(eng().stats().flushes, flushes0) << "the read sat unflushed until the loop's next step";
  ASSERT_TRUE(eng().run_until([&] { return got; }).ok());
}

// A game loop drives the engine with poll() alone. A burst whose windows
// all filled went out while the caller issued, without a fence or a flush
// per queue; drain() and poll() must fence and flush what it left, or its
// completion is never seen (and the device need not even start it).
TEST(CoreLoop, PollAloneCompletesABurstOfFullWindows) {
  Config c = test_config(4);
  c.window = 10;
  c.command_events = CommandEvents::Awaited;
  on_a_loop_nobody_runs(c, [](Engine& e) {
    std::vector<Buffer> bufs;
    for (int i = 0; i < 8; ++i) bufs.push_back(e.allocate(0, 64).value());
    Watchdog wd("a burst of full windows driven by poll() alone", 30);
    auto drain_by_polls = [&] {
      bool drained = false;
      e.drain([&](Result<void> r) {
        EXPECT_TRUE(r.ok()) << r.error().to_string();
        drained = true;
      });
      while (!drained) e.poll();
    };
    drain_by_polls();  // the windows start empty
    for (std::uint32_t i = 0; i < 40; ++i)  // four windows, each full
      ASSERT_TRUE(e.fill(bufs[i % 8], std::as_bytes(std::span(&i, 1)), 0, 64).ok());
    drain_by_polls();
    EXPECT_EQ(e.stats().in_flight, 0u);
  });
}

// poll() alone, on a caller's loop the caller does not run: each call is a
// loop iteration's worth of engine work. The loop budget's deadline was set
// by the first poll() and cleared only by the loop's check phase, which never
// came: every later poll() found the budget spent and completed nothing.
TEST(CoreLoop, PollAloneKeepsCompletingPastTheLoopBudget) {
  Config c = test_config();
  c.loop_budget_us = 1;
  on_a_loop_nobody_runs(c, [](Engine& e) {
    auto b = e.allocate(0, 64);
    ASSERT_TRUE(b.ok());
    Watchdog wd("reads driven by poll() alone", 30);
    for (int i = 0; i < 3; ++i) {
      bool got = false;
      ASSERT_TRUE(e.read(*b, 0, 64, [&](Result<std::span<const std::byte>> d) { got = d.ok(); }).ok());
      while (!got) e.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // past any budget
    }
  });
}

// Callbacks that run at teardown may start more work of the same kind: a
// drain from a drain's callback, a compile from a compile's.
TEST_F(Core, TeardownCallbacksThatAddWork) {
  int drains = 0, builds = 0;
  eng().drain([&](Result<void>) {
    ++drains;
    if (engine_) engine_->drain([&](Result<void>) { ++drains; });
  });
  auto p = eng().compile(0, "__kernel void k(__global int* a) { a[0] = 1; }", "-DTEARDOWN_A", [&](Result<void>) {
    ++builds;
    if (engine_) (void)engine_->compile(0, "__kernel void k(__global int* a) { a[0] = 2; }", "-DTEARDOWN_B",
                                        [&](Result<void>) { ++builds; });
  });
  ASSERT_TRUE(p.ok());
  engine_.reset();
  EXPECT_GE(drains, 1);
  EXPECT_GE(builds, 1);
}

}  // namespace uvcl::testing::core

namespace uvcl::testing::core {

// close() on a caller's loop: work on the device ends normally, work still
// in a window is cancelled, new work is refused, on_closed runs once, and
// the caller's uv_run returns with every handle closed — no blocking call.
TEST(CoreClose, AsynchronousCloseOnACallersLoop) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  {
    auto made = Engine::create(test_config(), &loop);
    ASSERT_TRUE(made.ok()) << made.error().to_string();
    Engine& e = *made.value();
    auto b = e.allocate(0, 256);
    ASSERT_TRUE(b.ok());
    std::vector<std::uint32_t> v(64, 9);
    ASSERT_TRUE(e.write(*b, 0, bytes_of(v)).ok());
    std::optional<Result<void>> read, fill;
    ASSERT_TRUE(e.read(*b, 0, 256, [&](Result<std::span<const std::byte>> d) {
      read = d ? Result<void>{} : Result<void>{d.error()};
    }).ok());  // a sync point: on the device now
    const std::uint32_t one = 1;
    ASSERT_TRUE(e.fill(*b, std::as_bytes(std::span(&one, 1)), 0, 256, [&](Result<void> r) { fill = r; }).ok());
    int closed = 0;
    ASSERT_TRUE(e.close([&] { ++closed; }).ok());
    auto refused = e.allocate(0, 64);
    ASSERT_FALSE(refused.ok()) << "new work accepted while closing";
    EXPECT_EQ(refused.status(), Status::Cancelled);
    EXPECT_FALSE(e.close([] {}).ok()) << "a second close was accepted";
    uv_run(&loop, UV_RUN_DEFAULT);
    EXPECT_EQ(closed, 1);
    ASSERT_TRUE(read.has_value() && fill.has_value());
    EXPECT_TRUE(read->ok()) << "work already on the device was not finished: " << read->error().to_string();
    EXPECT_EQ(fill->status(), Status::Cancelled) << "work still in the window was not cancelled";
    ASSERT_EQ(uv_loop_close(&loop), 0) << "close() left a handle open";
    made.value().reset();  // after its loop is gone: the destructor must not touch it
  }
}

// Reads a burst left in the window were issued as sync points: close() and
// destruction submit them and deliver their data, where the window's other
// work is cancelled. (Before, close() cancelled all but the burst's first.)
TEST(CoreClose, ReadsOfABurstAreDeliveredNotCancelled) {
  for (const bool destroy : {false, true}) {
    SCOPED_TRACE(destroy ? "destroyed" : "closed");
    auto made = Engine::create(burst_forever_config());
    ASSERT_TRUE(made.ok()) << made.error().to_string();
    Engine& e = *made.value();
    auto b = e.allocate(0, 64);
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(e.finish().ok());
    std::vector<Result<void>> got;
    const int n = issue_burst_of_reads(e, *b, got);
    if (destroy) {
      made.value().reset();
    } else {
      bool closed = false;
      ASSERT_TRUE(e.close([&] { closed = true; }).ok());
      ASSERT_TRUE(e.run_until([&] { return closed; }).ok());
    }
    ASSERT_EQ(got.size(), static_cast<std::size_t>(n));
    for (const Result<void>& r : got) EXPECT_TRUE(r.ok()) << r.error().to_string();
  }
}

// On the engine's own loop, an idle engine closes too.
TEST(CoreClose, IdleEngineOnItsOwnLoop) {
  auto made = Engine::create(test_config());
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  Engine& e = *made.value();
  bool closed = false;
  ASSERT_TRUE(e.close([&] { closed = true; }).ok());
  ASSERT_TRUE(e.run_until([&] { return closed; }).ok());
  bool drained = false;
  e.drain([&](Result<void> r) {
    EXPECT_EQ(r.status(), Status::Cancelled);
    drained = true;
  });
  EXPECT_TRUE(drained);
}

}  // namespace uvcl::testing::core

namespace uvcl::testing::core {

// Debug builds: a call from a thread other than the engine's loop thread
// stops the process with a message naming the call, rather than racing.
TEST(CoreThreadDeathTest, ACallFromAnotherThreadIsCaught) {
#ifdef NDEBUG
  GTEST_SKIP() << "checked in debug builds only";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto made = Engine::create(test_config());
        if (!made.ok()) std::abort();
        Engine& e = *made.value();
        std::thread other([&e] { (void)e.allocate(0, 64); });
        other.join();
      },
      "allocate called from a thread other than the engine's loop thread");
#endif
}

}  // namespace uvcl::testing::core
