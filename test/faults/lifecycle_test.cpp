// Targeted cases: teardown with work in flight, timed launches, build
// status queries, device enumeration — each under one injected fault.
#include <cctype>

#include "harness.hpp"

namespace uvcl::faults::lifecycle_test {
namespace {

// Live objects counted relative to the start of the test: a leak in an
// earlier test is reported there, not again here.
class Lifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(shim_ok());
    shim().reset_faults();
    live0_ = shim().live("all");
  }
  void TearDown() override { shim().reset_faults(); }
  int leaked() const { return shim().live("all") - live0_; }
  int live0_ = 0;
};

struct Fixture {
  LoopEngine le;
  Program prog{};
  Kernel kern{};
  bool ok = false;

  explicit Fixture(unsigned queues = 8) {
    shim().reset_faults();
    if (auto c = le.create(shim_config(queues)); !c) {
      ADD_FAILURE() << c.error().to_string();
      return;
    }
    auto p = le.engine->compile_sync(0, kSource);
    if (!p) {
      ADD_FAILURE() << p.error().to_string();
      return;
    }
    prog = p.value();
    auto k = le.engine->kernel(prog, "advance");
    if (!k) {
      ADD_FAILURE() << k.error().to_string();
      return;
    }
    kern = k.value();
    ok = true;
  }
  Engine& e() { return *le.engine; }
  Launch launch(Buffer in, Buffer out, std::size_t n) {
    return Launch{kern,
                  {KernelArg::of(in), KernelArg::of(out), KernelArg::value<std::uint32_t>(3),
                   KernelArg::value<std::uint32_t>(1), KernelArg::value<std::uint32_t>(static_cast<std::uint32_t>(n))},
                  {n},
                  {64}};
  }
};

// Reads in flight when the engine is destroyed: each callback runs exactly
// once (with the data, or Cancelled), and nothing leaks.
void destroy_with_reads_in_flight(const std::vector<std::string>& faults) {
  ASSERT_TRUE(shim_ok());
  Watchdog wd("destroy with reads in flight", 60);
  const int anomalies0 = shim().anomalies();
  std::vector<int> calls(16, 0);
  {
    Fixture f;
    ASSERT_TRUE(f.ok);
    const std::size_t n = 1 << 16;
    std::vector<std::uint32_t> host(n, 7);
    for (int i = 0; i < 16; ++i) {
      auto a = f.e().allocate(0, n * 4);
      auto b = f.e().allocate(0, n * 4);
      ASSERT_TRUE(a && b);
      ASSERT_TRUE(f.e().write(*a, 0, std::as_bytes(std::span<const std::uint32_t>(host))).ok());
      for (int k = 0; k < 4; ++k) ASSERT_TRUE(f.e().launch(f.launch(*a, *b, n)).ok());
      ASSERT_TRUE(f.e().read(*b, 0, n * 4, [&calls, i](Result<std::span<const std::byte>>) { ++calls[i]; }).ok());
      ASSERT_TRUE(f.e().release(*a).ok());
      ASSERT_TRUE(f.e().release(*b).ok());
    }
    for (const std::string& s : faults) shim().set_fault(s.c_str());
    EXPECT_EQ(f.le.destroy(), 0);  // no loop run: the reads are on the device
  }
  shim().reset_faults();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(calls[i], 1) << "read " << i << ": callback ran " << calls[i] << " times";
  EXPECT_EQ(shim().anomalies(), anomalies0) << shim().anomaly_log();
}

TEST_F(Lifecycle, DestroyWithReadsInFlight) {
  destroy_with_reads_in_flight({});
  EXPECT_EQ(leaked(), 0);
}

// The teardown clFinish fails (a hung device): the engine cannot wait for
// the reads, but their callbacks must still run once — the contract says a
// call that accepted a callback calls it exactly once.
TEST_F(Lifecycle, DestroyWithReadsInFlightWhenFinishFails) {
  std::vector<std::string> faults;
  for (int i = 1; i <= 10; ++i) faults.push_back("clFinish:" + std::to_string(i) + ":CL_OUT_OF_RESOURCES");
  destroy_with_reads_in_flight(faults);
  EXPECT_EQ(leaked(), 0) << "mem objects live: " << shim().live("mem")
                         << " (pinned staging blocks held by the dropped read callbacks)";
}

// Work still in the window at destruction gets Cancelled, exactly once.
TEST_F(Lifecycle, DestroyCancelsWindowedWork) {
  ASSERT_TRUE(shim_ok());
  std::vector<Result<void>> results;
  {
    Fixture f;
    ASSERT_TRUE(f.ok);
    auto a = f.e().allocate(0, 4096);
    ASSERT_TRUE(a);
    std::vector<std::uint32_t> host(1024, 1);
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(f.e().write(*a, 0, std::as_bytes(std::span<const std::uint32_t>(host)), WriteMode::Copy,
                              [&](Result<void> r) { results.push_back(std::move(r)); })
                      .ok());
    EXPECT_EQ(f.le.destroy(), 0);
  }
  ASSERT_EQ(results.size(), 5u);
  for (const Result<void>& r : results) EXPECT_EQ(r.status(), Status::Cancelled);
  EXPECT_EQ(leaked(), 0);
}

// clGetEventProfilingInfo fails for a timed launch: the timing must not be
// reported as a success of 0 ns.
TEST_F(Lifecycle, TimedLaunchProfilingFailureIsAnError) {
  ASSERT_TRUE(shim_ok());
  Watchdog wd("timed launch profiling failure", 60);
  {
    Fixture f;
    ASSERT_TRUE(f.ok);
    const std::size_t n = 4096;
    auto a = f.e().allocate(0, n * 4);
    auto b = f.e().allocate(0, n * 4);
    ASSERT_TRUE(a && b);
    std::vector<std::uint32_t> host(n, 1);
    ASSERT_TRUE(f.e().write(*a, 0, std::as_bytes(std::span<const std::uint32_t>(host))).ok());
    // A good timed launch first: the profiling path works.
    std::optional<Result<Timing>> good, bad;
    ASSERT_TRUE(f.e().timed_launch(f.launch(*a, *b, n), [&](Result<Timing> t) { good = std::move(t); }).ok());
    EXPECT_EQ(run_for(f.e(), [&] { return good.has_value(); }, 20), "");
    ASSERT_TRUE(good && good->ok()) << (good ? good->error().to_string() : "no callback");
    EXPECT_GT((*good)->device_ns, 0u);
    // The first query (CL_PROFILING_COMMAND_START) or the second (END) fails.
    for (int call = 1; call <= 2; ++call) {
      SCOPED_TRACE("clGetEventProfilingInfo call " + std::to_string(call) + " fails");
      std::optional<Result<Timing>> bad;
      shim().reset_faults();
      shim().set_fault(("clGetEventProfilingInfo:" + std::to_string(call) + ":CL_PROFILING_INFO_NOT_AVAILABLE").c_str());
      ASSERT_TRUE(f.e().timed_launch(f.launch(*a, *b, n), [&](Result<Timing> t) { bad = std::move(t); }).ok());
      EXPECT_EQ(run_for(f.e(), [&] { return bad.has_value(); }, 20), "");
      ASSERT_TRUE(bad.has_value());
      EXPECT_EQ(shim().fired(), 1);
      if (bad->ok()) {
        // A success must carry a real measurement: more than 0 ns and not
        // more than the wall time it took.
        EXPECT_TRUE((*bad)->device_ns > 0 && (*bad)->device_ns <= (*bad)->wall_ns)
            << "clGetEventProfilingInfo failed, yet the timed launch reported success with device_ns = "
            << (*bad)->device_ns << " (wall_ns = " << (*bad)->wall_ns << ")";
      } else {
        EXPECT_NE(bad->error().message.find("clGetEventProfilingInfo"), std::string::npos) << bad->error().to_string();
      }
    }
    EXPECT_EQ(f.le.destroy(), 0);
  }
  shim().reset_faults();
  EXPECT_EQ(leaked(), 0);
}

// A timed launch whose event fails: later work that does not use its data
// waits on it only for ordering, and must still complete correctly.
TEST_F(Lifecycle, FailedTimedLaunchDoesNotFailUnrelatedWork) {
  ASSERT_TRUE(shim_ok());
  Watchdog wd("failed timed launch", 60);
  {
    Fixture f;
    ASSERT_TRUE(f.ok);
    const std::size_t n = 4096;
    auto a = f.e().allocate(0, n * 4);
    auto b = f.e().allocate(0, n * 4);
    auto c = f.e().allocate(0, n * 4);
    auto d = f.e().allocate(0, n * 4);
    ASSERT_TRUE(a && b && c && d);
    std::vector<std::uint32_t> host(n);
    for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::uint32_t>(i);
    ASSERT_TRUE(f.e().write(*a, 0, std::as_bytes(std::span<const std::uint32_t>(host))).ok());
    ASSERT_TRUE(f.e().write(*c, 0, std::as_bytes(std::span<const std::uint32_t>(host))).ok());
    ASSERT_TRUE(f.e().finish().ok());
    // Timing decides whether the driver sees the failed event before or
    // after the independent launch that waits on it: try several times.
    int unrelated_failed = 0;
    std::string example;
    for (int round = 0; round < 10; ++round) {
      // Fresh outputs each round: a poisoned kernel output stays poisoned
      // until a write() or fill() (a relaunch also "reads" it), and a timed
      // launch refused for a poisoned b would leave the fault to the
      // independent launch.
      ASSERT_TRUE(f.e().release(*b).ok());
      ASSERT_TRUE(f.e().release(*d).ok());
      b = f.e().allocate(0, n * 4);
      d = f.e().allocate(0, n * 4);
      ASSERT_TRUE(b && d);
      shim().reset_faults();
      shim().set_fault("event:clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES");
      std::optional<Result<Timing>> timed;
      ASSERT_TRUE(f.e().timed_launch(f.launch(*a, *b, n), [&](Result<Timing> t) { timed = std::move(t); }).ok());
      ASSERT_TRUE(f.e().launch(f.launch(*c, *d, n)).ok());  // independent of a and b
      std::optional<Result<std::vector<std::byte>>> got;
      ASSERT_TRUE(f.e().read(*d, 0, n * 4, [&](Result<std::span<const std::byte>> r) {
        if (r) got = std::vector<std::byte>(r->begin(), r->end());
        else got = r.error();
      }).ok());
      EXPECT_EQ(run_for(f.e(), [&] { return timed.has_value() && got.has_value(); }, 20), "");
      ASSERT_TRUE(timed.has_value() && got.has_value());
      EXPECT_FALSE(timed->ok()) << "the timed launch's event failed";
      if (!got->ok()) {
        ++unrelated_failed;
        example = got->error().to_string();
        continue;
      }
      std::vector<std::uint32_t> out(n);
      std::memcpy(out.data(), got->value().data(), n * 4);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], host[i] * 3 + 1 + i) << i;
    }
    EXPECT_EQ(unrelated_failed, 0) << unrelated_failed << " of 10 launches independent of a failed timed launch "
                                   << "failed, e.g.: " << example;
    (void)f.e().finish();
    EXPECT_EQ(f.le.destroy(), 0);
  }
  shim().reset_faults();
  EXPECT_EQ(leaked(), 0);
}

// A command on another queue that uses the output of a command whose event
// has already failed must not wait on that event: on PoCL a command
// enqueued with a failed event in its wait list never runs. Here the
// failure has happened in the driver but the engine has not seen it yet
// (no loop turn in between), so only the status query of the hazard check
// can tell; it must drop the wait. The launch then fails with the fill's
// error instead of hanging: its `out` is WriteOnly from the source, but it
// stores only under `if (i < n)`, so what it leaves is the fill's, and it
// follows the fill (KernelRec::write_only_inferred).
TEST_F(Lifecycle, WorkAfterAFailedEventDoesNotWaitOnIt) {
  ASSERT_TRUE(shim_ok());
  Watchdog wd("work after a failed fill", 60);
  {
    Fixture f;
    ASSERT_TRUE(f.ok);
    const std::size_t n = 4096;
    auto a = f.e().allocate(0, n * 4);
    auto c = f.e().allocate(0, n * 4);
    auto other = f.e().allocate(0, 64);
    ASSERT_TRUE(a && c && other);
    ASSERT_TRUE(f.e().finish().ok());
    std::vector<std::uint32_t> host(n);
    for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::uint32_t>(i * 7);
    // c's writer and a's fill land on different queues (the fill's queue
    // choice sees the write still in flight), so the launch below, which
    // reads c and a, waits across queues for one of them.
    ASSERT_TRUE(f.e().write(*c, 0, std::as_bytes(std::span<const std::uint32_t>(host))).ok());
    const std::uint32_t pattern = 5;
    shim().set_fault("event:clEnqueueFillBuffer:1:CL_OUT_OF_RESOURCES");
    // on_done: the fill gets an event of its own, the one the fault fails.
    ASSERT_TRUE(f.e()
                    .fill(*a, std::as_bytes(std::span<const std::uint32_t>(&pattern, 1)), 0, n * 4,
                          [](Result<void>) {})
                    .ok());
    // A read is a sync point: both are submitted now, without a loop turn.
    bool other_read = false;
    ASSERT_TRUE(f.e().read(*other, 0, 64, [&](Result<std::span<const std::byte>>) { other_read = true; }).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both run; the fill's event fails
    EXPECT_EQ(shim().fired(), 1);
    shim().reset_faults();
    ASSERT_TRUE(f.e().launch(f.launch(*c, *a, n)).ok());
    std::optional<Result<void>> first;
    ASSERT_TRUE(f.e().read(*a, 0, n * 4, [&](Result<std::span<const std::byte>> r) {
      first = r ? Result<void>{} : Result<void>{r.error()};
    }).ok());
    EXPECT_EQ(run_for(f.e(), [&] { return first.has_value() && other_read; }, 20), "")
        << "work after the failed fill hung";
    ASSERT_TRUE(first.has_value());
    ASSERT_FALSE(first->ok()) << "the launch reads what the failed fill wrote";
    EXPECT_NE(first->error().to_string().find("CL_OUT_OF_RESOURCES"), std::string::npos)
        << first->error().to_string();
    // Written again, the buffer is good again.
    ASSERT_TRUE(f.e().write(*a, 0, std::as_bytes(std::span<const std::uint32_t>(host))).ok());
    auto back = f.e().read_sync(*a, 0, n * 4);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    std::vector<std::uint32_t> v(n);
    std::memcpy(v.data(), back->data(), n * 4);
    EXPECT_EQ(v, host);
    (void)f.e().finish();
    EXPECT_EQ(f.le.destroy(), 0);
  }
  EXPECT_EQ(leaked(), 0);
}

// The build-status query fails although the build itself succeeded: the
// error must name the failed query, not claim a CL_BUILD_PROGRAM_FAILURE.
// The other side of the rule above: a kernel whose source stores element
// get_global_id(0) in every work-item, launched over the whole buffer, does
// not read what a failed fill left: it succeeds and the buffer holds its
// values again.
TEST_F(Lifecycle, ALaunchThatStoresAllOfABufferDoesNotInheritAFailedFill) {
  ASSERT_TRUE(shim_ok());
  Watchdog wd("a whole store after a failed fill", 60);
  Fixture f;
  ASSERT_TRUE(f.ok);
  auto p = f.e().compile_sync(0, "__kernel void iota(__global uint* out) { out[get_global_id(0)] = (uint)get_global_id(0) * 3u; }");
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  auto iota = f.e().kernel(*p, "iota");
  ASSERT_TRUE(iota.ok()) << iota.error().to_string();
  auto params = f.e().kernel_params(*iota);
  ASSERT_TRUE(params.ok());
  EXPECT_EQ((*params)[0].access, ParamAccess::WriteOnly);
  EXPECT_TRUE((*params)[0].writes_each_item);
  constexpr std::uint32_t n = 1024;
  auto a = f.e().allocate(0, n * 4);
  ASSERT_TRUE(a.ok());
  const std::uint32_t pattern = 5;
  shim().set_fault("clEnqueueFillBuffer:1:CL_OUT_OF_RESOURCES");
  ASSERT_TRUE(f.e().fill(*a, std::as_bytes(std::span<const std::uint32_t>(&pattern, 1)), 0, n * 4).ok());
  ASSERT_TRUE(f.e().launch(Launch{*iota, {KernelArg::of(*a)}, {n}}).ok());
  auto back = f.e().read_sync(*a, 0, n * 4);
  EXPECT_EQ(shim().fired(), 1);
  shim().reset_faults();
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  std::vector<std::uint32_t> v(n);
  std::memcpy(v.data(), back->data(), n * 4);
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i * 3) << "element " << i;
}

TEST_F(Lifecycle, BuildStatusQueryFailureNamesTheQuery) {
  ASSERT_TRUE(shim_ok());
  LoopEngine le;
  ASSERT_TRUE(le.create(shim_config(1)).ok());
  shim().reset_faults();
  shim().set_fault("clGetProgramBuildInfo:1:CL_OUT_OF_RESOURCES");
  auto p = le.engine->compile_sync(0, kSource);
  EXPECT_EQ(shim().fired(), 1);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("clGetProgramBuildInfo"), std::string::npos)
      << "got: " << p.error().to_string();
  EXPECT_NE(p.error().message.find("CL_OUT_OF_RESOURCES"), std::string::npos) << "got: " << p.error().to_string();
  EXPECT_EQ(le.destroy(), 0);
  shim().reset_faults();
  EXPECT_EQ(leaked(), 0);
}

// The argument-info query for the type qualifier fails: the parameter's
// access must not silently change. `const __global uint* in` inferred as
// Written makes a failed launch poison its (unchanged) input as well.
TEST_F(Lifecycle, KernelArgInfoFailureDoesNotChangeAccess) {
  LoopEngine le;
  ASSERT_TRUE(le.create(shim_config(1)).ok());
  auto p = le.engine->compile_sync(0, kSource);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  // Per argument the engine asks: address qualifier (1st call), type
  // qualifier (2nd), type name (size, value), name (size, value).
  shim().set_fault("clGetKernelArgInfo:2:CL_OUT_OF_HOST_MEMORY");
  auto k = le.engine->kernel(*p, "advance");
  EXPECT_EQ(shim().fired(), 1);
  if (k.ok()) {
    auto params = le.engine->kernel_params(*k);
    ASSERT_TRUE(params.ok());
    EXPECT_EQ((*params)[0].access, ParamAccess::ReadOnly)
        << "clGetKernelArgInfo(CL_KERNEL_ARG_TYPE_QUALIFIER) failed and `const __global uint* in` silently became "
           "Written; kernel() should fail naming the query (or retry it)";
    (void)le.engine->release(*k);
  } else {
    EXPECT_NE(k.error().message.find("clGetKernelArgInfo"), std::string::npos) << k.error().to_string();
  }
  (void)le.engine->release(*p);
  EXPECT_EQ(le.destroy(), 0);
  EXPECT_EQ(leaked(), 0);
}

// clGetDeviceIDs fails on the only platform: Engine::create must not
// succeed silently with zero devices; the error names the call.
TEST_F(Lifecycle, DeviceEnumerationFailureIsReported) {
  ASSERT_TRUE(shim_ok());
  shim().reset_faults();
  shim().set_fault("clGetDeviceIDs:1:CL_OUT_OF_HOST_MEMORY");
  LoopEngine le;
  auto c = le.create(shim_config(1));
  EXPECT_EQ(shim().fired(), 1);
  if (c.ok()) {
    EXPECT_GE(le.engine->device_count(), 1u)
        << "clGetDeviceIDs failed with CL_OUT_OF_HOST_MEMORY on the only platform; Engine::create succeeded "
           "with 0 devices and no error";
  } else {
    EXPECT_NE(c.error().message.find("clGetDeviceIDs"), std::string::npos) << c.error().to_string();
  }
  EXPECT_EQ(le.destroy(), 0);
  shim().reset_faults();
  EXPECT_EQ(leaked(), 0);
}


// alloc_host's pinned buffer cannot be created, or cannot be mapped: a
// MemoryAllocation error naming the call, nothing left behind, and the next
// alloc_host works.
TEST(HostMemoryFaults, CreateOrMapFailureIsAClearErrorAndLeaksNothing) {
  ASSERT_TRUE(shim_ok());
  for (const char* spec : {"clCreateBuffer:1:CL_MEM_OBJECT_ALLOCATION_FAILURE",
                           "clEnqueueMapBuffer:1:CL_OUT_OF_RESOURCES"}) {
    SCOPED_TRACE(spec);
    const LiveSnapshot live;
    LoopEngine le;
    ASSERT_TRUE(le.create(shim_config(1)).ok());
    shim().reset_faults();
    shim().set_fault(spec);
    auto h = le.engine->alloc_host(0, std::size_t{8} << 20);
    EXPECT_EQ(shim().fired(), 1);
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.error().status, Status::MemoryAllocation);
    const std::string call = std::string(spec).substr(0, std::string(spec).find(':'));
    EXPECT_NE(h.error().message.find(call), std::string::npos) << h.error().to_string();
    EXPECT_NE(h.error().message.find("alloc_host"), std::string::npos) << h.error().to_string();
    EXPECT_EQ(le.engine->stats().host_memory_bytes, 0u);
    shim().reset_faults();
    auto again = le.engine->alloc_host(0, std::size_t{8} << 20);
    ASSERT_TRUE(again.ok()) << again.error().to_string();
    EXPECT_TRUE(le.engine->release(*again).ok());
    EXPECT_EQ(le.destroy(), 0);
    EXPECT_EQ(live.delta("all"), 0);
  }
}

}  // namespace
}  // namespace uvcl::faults::lifecycle_test
