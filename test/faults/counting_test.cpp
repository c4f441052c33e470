// The standard workload without faults: every OpenCL object the engine
// creates is released by the time it is destroyed, and the loop closes.
#include <chrono>
#include <thread>

#include "harness.hpp"

namespace uvcl::faults::counting_test {
namespace {

TEST(Counting, StandardWorkloadReleasesEverything) {
  ASSERT_TRUE(shim_ok());
  const LiveSnapshot live;
  WorkloadOptions o;
  const double t0 = now_s();
  Outcome r = run_workload(o);
  const double t1 = now_s();
  ASSERT_TRUE(r.created) << r.all_errors();
  EXPECT_TRUE(r.errors.empty()) << r.all_errors();
  EXPECT_TRUE(r.hangs.empty()) << ::testing::PrintToString(r.hangs);
  for (unsigned s = 0; s < r.streams.size(); ++s) {
    EXPECT_TRUE(r.streams[s].read_ok) << "stream " << s;
    EXPECT_TRUE(r.streams[s].correct) << "stream " << s;
    EXPECT_EQ(r.streams[s].callbacks, 1) << "stream " << s;
  }
  EXPECT_TRUE(r.recovered) << r.recovery_error;
  EXPECT_TRUE(r.went_idle);
  EXPECT_EQ(r.loop_close_rc, 0) << "uv_loop_close: a handle was left open";
  EXPECT_EQ(r.live_after, 0) << "live OpenCL objects after the engine was destroyed";
  for (const char* kind : {"context", "queue", "mem", "program", "kernel", "event"})
    EXPECT_EQ(live.delta(kind), 0) << kind;
  EXPECT_EQ(r.anomalies, 0) << r.anomaly_log;
  EXPECT_GT(r.queues_used, 1u) << "200 launches over 8 independent streams used one queue";
  RecordProperty("queues_used", static_cast<int>(r.queues_used));
  std::printf("standard workload: %.0f ms, %u compute queues used\n", (t1 - t0) * 1e3, r.queues_used);
}

// Objects are counted while the engine lives: one context, eleven queues, the
// program and kernel, three buffers per stream plus staging.
TEST(Counting, LiveObjectsWhileRunning) {
  ASSERT_TRUE(shim_ok());
  const LiveSnapshot live;
  LoopEngine le;
  ASSERT_TRUE(le.create(shim_config()).ok());
  Engine& e = *le.engine;
  EXPECT_EQ(live.delta("context"), 1);
  EXPECT_EQ(live.delta("queue"), 11);  // 8 compute, profiling, transfer, staging maps
  auto p = e.compile_sync(0, kSource);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  auto k = e.kernel(*p, "advance");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(live.delta("program"), 1);
  EXPECT_EQ(live.delta("kernel"), 1);
  auto b = e.allocate(0, 4096);
  ASSERT_TRUE(b.ok());
  const int mems = shim().live("mem");
  EXPECT_GE(mems, 1);
  ASSERT_TRUE(e.release(*b).ok());
  EXPECT_EQ(shim().live("mem"), mems - 1) << "an unused buffer is freed at once";
  ASSERT_TRUE(e.release(*k).ok());
  ASSERT_TRUE(e.release(*p).ok());
  EXPECT_EQ(live.delta("kernel"), 0);
  EXPECT_EQ(live.delta("program"), 1) << "the program memo keeps the built program until shutdown";
  EXPECT_EQ(le.destroy(), 0);
  EXPECT_EQ(live.delta("all"), 0);
}

// A released buffer goes back to the driver once its last use is enqueued,
// as a bare program releases a temporary right after its last kernel (the
// driver keeps the memory until that kernel has run): not once the engine
// has seen the kernel complete. Its bytes still count as allocated until
// then, and what the kernels computed through it is right.
TEST(Counting, AReleasedBufferGoesBackToTheDriverOnceItsUsesAreEnqueued) {
  ASSERT_TRUE(shim_ok());
  Watchdog wd("a buffer released behind a slow kernel", 60);
  LoopEngine le;
  ASSERT_TRUE(le.create(shim_config()).ok());
  Engine& e = *le.engine;
  auto p = e.compile_sync(0, R"CL(
__kernel void slow(__global uint* t, uint iters) {
  uint x = get_global_id(0) + 1u;
  for (uint k = 0; k < iters; ++k) x = x * 1664525u + 1013904223u;
  t[get_global_id(0)] = x;
}
__kernel void take(__global const uint* t, __global uint* out) { out[get_global_id(0)] = t[get_global_id(0)]; }
)CL");
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  auto slow = e.kernel(*p, "slow");
  auto take = e.kernel(*p, "take");
  auto t = e.allocate(0, std::size_t{4} * 4);
  auto out = e.allocate(0, std::size_t{4} * 4);
  ASSERT_TRUE(slow.ok() && take.ok() && t.ok() && out.ok());
  ASSERT_TRUE(e.finish().ok());
  constexpr std::uint32_t kIters = 40u * 1000 * 1000;  // a few hundred ms
  ASSERT_TRUE(e.launch(Launch{*slow, {KernelArg::of(*t), KernelArg::value(kIters)}, {4}}).ok());
  ASSERT_TRUE(e.launch(Launch{*take, {KernelArg::of(*t), KernelArg::of(*out)}, {4}}).ok());
  const int mems = shim().live("mem");
  const std::uint64_t free = e.free_bytes(0);
  ASSERT_TRUE(e.release(*t).ok());
  e.poll();  // both launches enqueued
  ASSERT_GT(e.stats().in_flight, 0u) << "the slow kernel ended before the check: make it slower";
  EXPECT_EQ(shim().live("mem"), mems - 1) << "the released buffer's memory object is still the engine's";
  EXPECT_EQ(e.free_bytes(0), free) << "the bytes came back while the device may still use them";
  ASSERT_TRUE(e.finish().ok());
  EXPECT_EQ(e.free_bytes(0), free + std::size_t{4} * 4);
  auto got = e.read_sync(*out, 0, std::size_t{4} * 4);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  std::uint32_t first = 0;
  std::memcpy(&first, got.value().data(), 4);
  std::uint32_t want = 1;
  for (std::uint32_t k = 0; k < kIters; ++k) want = want * 1664525u + 1013904223u;
  EXPECT_EQ(first, want);
  ASSERT_TRUE(e.release(*out).ok());
  (void)e.release(*take);
  (void)e.release(*slow);
  (void)e.release(*p);
  EXPECT_EQ(le.destroy(), 0);
}

// Figure 6's pattern, a temporary per launch released right after it: the
// releases of one window go to the driver in groups, each after a few of
// the window's launches, neither between every two launches nor all after
// the window's last one (NVIDIA's launches cost most in those two orders).
TEST(Counting, ReleasesInAWindowGoInGroupsBetweenItsLaunches) {
  ASSERT_TRUE(shim_ok());
  Watchdog wd("releases in one window", 60);
  LoopEngine le;
  ASSERT_TRUE(le.create(shim_config()).ok());
  Engine& e = *le.engine;
  auto p = e.compile_sync(0, "__kernel void put(__global uint* t) { t[get_global_id(0)] = 7u; }");
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  auto put = e.kernel(*p, "put");
  ASSERT_TRUE(put.ok());
  constexpr int kLaunches = 40;  // in one window of 100
  std::vector<Buffer> temps;
  for (int i = 0; i < kLaunches; ++i) {
    auto t = e.allocate(0, std::size_t{4} * 4);
    ASSERT_TRUE(t.ok());
    temps.push_back(*t);
  }
  ASSERT_TRUE(e.finish().ok());
  const long releases = shim().calls("clReleaseMemObject");
  shim().mark_order();
  for (const Buffer& t : temps) {
    ASSERT_TRUE(e.launch(Launch{*put, {KernelArg::of(t)}, {4}}).ok());
    ASSERT_TRUE(e.release(t).ok());
  }
  ASSERT_EQ(shim().calls("clReleaseMemObject"), releases) << "released before the window went out";
  e.poll();  // the window goes out
  ASSERT_EQ(shim().calls("clReleaseMemObject"), releases + kLaunches);
  const auto launch = [](int n) { return shim().nth_call_since_mark("clEnqueueNDRangeKernel", n); };
  const auto release = [](int n) { return shim().nth_call_since_mark("clReleaseMemObject", n); };
  ASSERT_GT(launch(kLaunches), 0);
  EXPECT_GT(release(1), launch(2)) << "a temporary went back to the driver between two launches";
  EXPECT_LT(release(1), launch(kLaunches)) << "the window's releases waited for its last launch";
  EXPECT_GT(release(kLaunches), launch(kLaunches)) << "the last temporary went back before its launch";
  ASSERT_TRUE(e.finish().ok());
  (void)e.release(*put);
  (void)e.release(*p);
  EXPECT_EQ(le.destroy(), 0);
}

// The engine maps its first pinned slab when it is created: the first small
// read, on the loop, creates and maps no staging buffer (a millisecond and
// more on NVIDIA's OpenCL).
TEST(Counting, TheFirstSmallReadMapsNoStagingBlock) {
  ASSERT_TRUE(shim_ok());
  LoopEngine le;
  ASSERT_TRUE(le.create(shim_config()).ok());
  Engine& e = *le.engine;
  auto b = e.allocate(0, 4096);
  ASSERT_TRUE(b.ok());
  const long maps = shim().calls("clEnqueueMapBuffer"), creates = shim().calls("clCreateBuffer");
  bool done = false;
  ASSERT_TRUE(e.read(*b, 0, 4096, [&](const Result<std::span<const std::byte>>& r) {
                 EXPECT_TRUE(r.ok());
                 done = true;
               }).ok());
  const double deadline = now_s() + 30;
  ASSERT_TRUE(e.run_until([&] { return done || now_s() > deadline; }).ok());
  ASSERT_TRUE(done) << "the read did not complete within 30 s";
  EXPECT_EQ(shim().calls("clEnqueueMapBuffer") - maps, 0);
  EXPECT_EQ(shim().calls("clCreateBuffer") - creates, 0);
  EXPECT_EQ(le.destroy(), 0);
}

// Host memory still held (one block released with its write in flight, one
// never released) is freed with the engine: no pinned buffer outlives it.
TEST(Counting, HostMemoryIsFreedWithTheEngine) {
  ASSERT_TRUE(shim_ok());
  const LiveSnapshot live;
  LoopEngine le;
  ASSERT_TRUE(le.create(shim_config()).ok());
  Engine& e = *le.engine;
  auto kept = e.alloc_host(0, std::size_t{1} << 20);
  ASSERT_TRUE(kept.ok()) << kept.error().to_string();
  auto dropped = e.alloc_host(0, std::size_t{2} << 20);
  ASSERT_TRUE(dropped.ok()) << dropped.error().to_string();
  EXPECT_GE(live.delta("mem"), 2) << "each large host block is a pinned buffer";
  auto b = e.allocate(0, std::size_t{2} << 20);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(e.write(*b, 0, dropped->bytes, WriteMode::Borrow).ok());
  ASSERT_TRUE(e.release(*dropped).ok());
  EXPECT_EQ(le.destroy(), 0);
  EXPECT_EQ(live.delta("all"), 0);
}

// On PoCL a hazard check asks the driver for the status of the event it
// would wait on. One that read a failed event done keeps that read: the
// completion walk completes the command with it instead of asking again,
// and the failure is still the failed command's own, reported once.
TEST(Counting, AFailedEventAHazardCheckReadIsCompletedWithThatRead) {
  ASSERT_TRUE(shim_ok());
  shim().reset_faults();
  Watchdog wd("a failed event read by a hazard check", 60);
  LoopEngine le;
  ASSERT_TRUE(le.create(shim_config(8, 1)).ok());  // window 1: each command is enqueued at once
  Engine& e = *le.engine;
  auto p = e.compile_sync(0, kSource);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  auto k = e.kernel(*p, "advance");
  ASSERT_TRUE(k.ok()) << k.error().to_string();
  constexpr std::uint32_t n = 256;
  constexpr std::size_t bytes = std::size_t{n} * 4;
  auto in = e.allocate(0, bytes), out = e.allocate(0, bytes);
  ASSERT_TRUE(in.ok() && out.ok());
  const std::vector<std::uint32_t> ones(n, 1);
  ASSERT_TRUE(e.write(*in, 0, std::as_bytes(std::span(ones))).ok());
  ASSERT_TRUE(e.write(*out, 0, std::as_bytes(std::span(ones))).ok());
  ASSERT_TRUE(e.finish().ok());
  std::vector<std::string> heard;
  e.set_error_listener([&](const Error& err) { heard.push_back(err.to_string()); });
  std::vector<ScheduleEntry> schedule;
  e.set_schedule_recorder([&](const ScheduleEntry& s) { schedule.push_back(s); });
  shim().set_fault("event:clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES");
  const Launch l{*k,
                 {KernelArg::of(*in), KernelArg::of(*out), KernelArg::value<std::uint32_t>(3),
                  KernelArg::value<std::uint32_t>(1), KernelArg::value<std::uint32_t>(n)},
                 {n},
                 {64}};
  ASSERT_TRUE(e.launch(l).ok());
  ASSERT_EQ(shim().fired(), 1) << "the launch was not enqueued at once";
  // Done on the device; the loop has not run, so no walk has read it.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::uint64_t q0 = e.stats().status_queries;
  std::optional<std::string> read_error;
  ASSERT_TRUE(e.read(*out, 0, bytes, [&](const Result<std::span<const std::byte>>& d) {
                 read_error = d ? std::string() : d.error().to_string();
               }).ok());
  const std::uint64_t q1 = e.stats().status_queries;
  EXPECT_EQ(q1 - q0, 1u) << "the read's hazard check did not ask for the launch's status once";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the read is done on the device too
  EXPECT_EQ(run_for(e, [&] { return read_error.has_value(); }, 10), "");
  // The read's own event, read done; the launch's event not again.
  EXPECT_EQ(e.stats().status_queries - q1, 1u) << "the walk asked again for a status the hazard check had read";
  (void)e.finish();
  shim().reset_faults();
  e.set_schedule_recorder({});
  ASSERT_EQ(schedule.size(), 2u);
  ASSERT_NE(schedule[0].queue, schedule[1].queue) << "the read ran on the launch's queue: no hazard check, no case";
  e.set_error_listener({});
  ASSERT_TRUE(read_error.has_value());
  EXPECT_NE(read_error->find("CL_OUT_OF_RESOURCES"), std::string::npos) << "the read of a failed launch's output: "
                                                                         << *read_error;
  ASSERT_EQ(heard.size(), 1u) << ::testing::PrintToString(heard);
  const std::string launch_id = "launch (command " + std::to_string(schedule[0].id);
  EXPECT_NE(heard[0].find(launch_id), std::string::npos) << "not the launch's own failure: " << heard[0];
  EXPECT_NE(heard[0].find("completed with CL_OUT_OF_RESOURCES"), std::string::npos) << heard[0];
  EXPECT_EQ(heard[0].find("queued behind"), std::string::npos) << heard[0];
  EXPECT_EQ(heard[0].find("as read from"), std::string::npos) << heard[0];
}

}  // namespace
}  // namespace uvcl::faults::counting_test
