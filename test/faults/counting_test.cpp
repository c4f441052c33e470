// The standard workload without faults: every OpenCL object the engine
// creates is released by the time it is destroyed, and the loop closes.
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
  ASSERT_TRUE(e.read(*b, 0, 4096, [&](Result<std::span<const std::byte>> r) {
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

}  // namespace
}  // namespace uvcl::faults::counting_test
