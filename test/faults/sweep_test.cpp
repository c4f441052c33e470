// The fault sweep: every entry point the standard workload uses, failed at
// several points of the run (1st, 2nd, 7th, 50th ... call), plus failed
// events and lost devices. Each case checks:
//   - nothing hangs (every wait has a budget; a watchdog ends the process);
//   - no stream comes back with wrong data: each is exact or an error;
//   - a failure reaches the caller as an error naming the call or status;
//   - a fault in one command fails at most its own stream (the engine
//     poisons only what is downstream of the failed command);
//   - each read callback runs exactly once;
//   - the engine accepts new work afterwards (or, on a lost device, rejects
//     it with DeviceLost);
//   - after destruction the shim counts zero live OpenCL objects, saw no
//     double release or use of a released handle, and the loop closes.
// The totals are printed at the end ("SWEEP TOTAL").
#include <algorithm>
#include <map>
#include <set>

#include "harness.hpp"

namespace uvcl::faults::sweep_test {
namespace {

struct EntryPoint {
  const char* name;
  std::vector<const char*> statuses;  // used in turn, one per fault point
  // A fault in one call fails (at most / exactly) one stream: the call
  // belongs to one command or one stream's buffer.
  bool per_command = false;
  bool must_fail_one = false;
  bool at_teardown = false;  // called when the engine is destroyed: count those calls too
};

const std::vector<EntryPoint>& entry_points() {
  static const std::vector<EntryPoint> all = {
      {"clCreateBuffer", {"CL_MEM_OBJECT_ALLOCATION_FAILURE", "CL_OUT_OF_RESOURCES", "CL_OUT_OF_HOST_MEMORY"}, true, true},
      {"clEnqueueWriteBuffer", {"CL_OUT_OF_RESOURCES", "CL_INVALID_EVENT_WAIT_LIST", "CL_OUT_OF_HOST_MEMORY"}, true, true},
      {"clEnqueueReadBuffer", {"CL_OUT_OF_RESOURCES", "CL_OUT_OF_HOST_MEMORY", "CL_INVALID_EVENT_WAIT_LIST"}, true, true},
      {"clEnqueueNDRangeKernel", {"CL_OUT_OF_RESOURCES", "CL_INVALID_EVENT_WAIT_LIST", "CL_OUT_OF_HOST_MEMORY"}, true, true},
      {"clSetKernelArg", {"CL_OUT_OF_RESOURCES", "CL_OUT_OF_HOST_MEMORY", "CL_INVALID_OPERATION"}, true, true},
      {"clEnqueueFillBuffer", {"CL_OUT_OF_RESOURCES", "CL_MEM_OBJECT_ALLOCATION_FAILURE", "CL_OUT_OF_HOST_MEMORY"}, true, true},
      {"clEnqueueCopyBuffer", {"CL_OUT_OF_RESOURCES", "CL_INVALID_EVENT_WAIT_LIST", "CL_MEM_OBJECT_ALLOCATION_FAILURE"}, true, true},
      {"clEnqueueMapBuffer", {"CL_MEM_OBJECT_ALLOCATION_FAILURE", "CL_OUT_OF_RESOURCES"}, true, true},
      {"clGetEventInfo", {"CL_OUT_OF_RESOURCES", "CL_OUT_OF_HOST_MEMORY"}, true, false},
      // A fence completes every event-less command before it on its queue.
      {"clEnqueueMarkerWithWaitList", {"CL_OUT_OF_RESOURCES", "CL_OUT_OF_HOST_MEMORY"}, false, false},
      {"clSetEventCallback", {"CL_OUT_OF_HOST_MEMORY", "CL_OUT_OF_RESOURCES"}, true, false},
      {"clBuildProgram", {"CL_BUILD_PROGRAM_FAILURE", "CL_OUT_OF_HOST_MEMORY", "CL_INVALID_OPERATION"}},
      {"clCreateProgramWithSource", {"CL_OUT_OF_HOST_MEMORY", "CL_OUT_OF_RESOURCES"}},
      {"clCreateKernel", {"CL_OUT_OF_HOST_MEMORY", "CL_OUT_OF_RESOURCES"}},
      {"clGetProgramBuildInfo", {"CL_OUT_OF_RESOURCES", "CL_OUT_OF_HOST_MEMORY"}},
      {"clGetKernelInfo", {"CL_OUT_OF_RESOURCES"}},
      {"clGetKernelArgInfo", {"CL_OUT_OF_RESOURCES", "CL_OUT_OF_HOST_MEMORY"}},
      {"clGetKernelWorkGroupInfo", {"CL_OUT_OF_RESOURCES"}},
      {"clFlush", {"CL_OUT_OF_RESOURCES", "CL_OUT_OF_HOST_MEMORY"}},
      {"clFinish", {"CL_OUT_OF_RESOURCES"}, false, false, true},
      {"clEnqueueUnmapMemObject", {"CL_OUT_OF_RESOURCES"}, false, false, true},
      {"clCreateContext", {"CL_OUT_OF_HOST_MEMORY", "CL_OUT_OF_RESOURCES"}},
      {"clCreateCommandQueue", {"CL_OUT_OF_HOST_MEMORY", "CL_OUT_OF_RESOURCES"}},
      {"clGetPlatformIDs", {"CL_OUT_OF_HOST_MEMORY"}},
      {"clGetPlatformInfo", {"CL_OUT_OF_HOST_MEMORY"}},
      {"clGetDeviceIDs", {"CL_OUT_OF_HOST_MEMORY"}},
      {"clGetDeviceInfo", {"CL_OUT_OF_HOST_MEMORY", "CL_OUT_OF_RESOURCES"}},
  };
  return all;
}

// Commands whose events can be made to fail ("event:" faults). A failed
// fence (a marker) fails every command it completes: possibly several streams.
const std::vector<const char*>& event_entry_points() {
  static const std::vector<const char*> all = {"clEnqueueNDRangeKernel", "clEnqueueWriteBuffer", "clEnqueueReadBuffer",
                                               "clEnqueueFillBuffer", "clEnqueueCopyBuffer",
                                               "clEnqueueMarkerWithWaitList"};
  return all;
}

// How many times the fault-free workload calls each entry point.
const std::map<std::string, long>& baseline() {
  static const std::map<std::string, long> counts = [] {
    WorkloadOptions o;
    for (const EntryPoint& e : entry_points()) o.count_calls.push_back(e.name);
    Outcome r = run_workload(o);
    EXPECT_TRUE(r.errors.empty()) << r.all_errors();
    std::map<std::string, long> m;
    for (std::size_t i = 0; i < o.count_calls.size() && i < r.call_counts.size(); ++i)
      m[o.count_calls[i]] = entry_points()[i].at_teardown ? r.total_counts[i] : r.call_counts[i];
    return m;
  }();
  return counts;
}

std::vector<long> fault_points(long calls) {
  std::set<long> pts;
  for (long p : {1L, 2L, 7L, 50L, 150L, calls / 2, calls})
    if (p >= 1 && p <= calls) pts.insert(p);
  // Keep the sweep short for entry points called thousands of times.
  std::vector<long> v(pts.begin(), pts.end());
  return v;
}

struct Tally {
  int tried = 0, passed = 0, not_reached = 0;
  std::vector<std::string> failures;
};
std::map<std::string, Tally>& tallies() {
  static std::map<std::string, Tally> t;
  return t;
}

struct Expect {
  bool per_command = false;
  bool must_fail_one = false;
  bool allow_lost = true;  // a device marked lost is an acceptable reaction
  // A command that fails after it was enqueued (an "event:" fault) may take
  // down what the driver queued behind it on the same in-order queue: PoCL
  // fails the commands enqueued there while it was pending. Those streams may fail too,
  // if their errors say so ("queued behind failed command N").
  bool queue_collateral = false;
};

// Checks one finished case; returns what is wrong ("" when it passed).
std::string judge(const Outcome& r, const std::string& entry, const std::string& status, const Expect& x) {
  std::vector<std::string> bad;
  if (!r.hangs.empty()) bad.push_back("hang: " + ::testing::PrintToString(r.hangs));
  if (r.wrong_streams() > 0) bad.push_back(std::to_string(r.wrong_streams()) + " stream(s) read back WRONG data");
  for (std::size_t s = 0; s < r.streams.size(); ++s) {
    const StreamResult& sr = r.streams[s];
    if (sr.callbacks > 1) bad.push_back("stream " + std::to_string(s) + ": read callback ran " + std::to_string(sr.callbacks) + " times");
    if (!sr.aborted && sr.callbacks == 0 && r.created) bad.push_back("stream " + std::to_string(s) + ": read callback never ran");
  }
  const bool something_failed = !r.created || r.failed_streams() > 0;
  if (something_failed && r.errors.empty()) bad.push_back("work failed but no error reached the caller");
  if ((something_failed || !r.errors.empty()) && !r.names(entry, status))
    bad.push_back("no error names " + entry + " or " + status + "; errors:\n" + r.all_errors());
  if (r.created && !r.device_lost) {
    const bool explained = x.queue_collateral && r.all_errors().find("queued behind failed command") != std::string::npos;
    if (x.per_command && r.failed_streams() > 1 && !explained)
      bad.push_back("one failed command failed " + std::to_string(r.failed_streams()) + " of 8 independent streams; errors:\n" +
                    r.all_errors());
    if (x.must_fail_one && r.failed_streams() == 0) bad.push_back("the failed call did not fail its stream");
    if (!r.recovered) bad.push_back("no new work after the fault: " + r.recovery_error);
  }
  if (r.created && r.device_lost) {
    if (!x.allow_lost) bad.push_back("device marked lost");
    if (!r.lost_rejects_new_work) bad.push_back("lost device accepts new work (expected DeviceLost)");
  }
  if (r.created && !r.went_idle) bad.push_back("the engine never went idle after the work");
  if (r.live_after != 0) bad.push_back(std::to_string(r.live_after) + " OpenCL objects live after destruction");
  if (r.anomalies != 0) bad.push_back(std::to_string(r.anomalies) + " shim anomalies:\n" + r.anomaly_log);
  if (r.loop_close_rc != 0) bad.push_back("uv_loop_close: " + std::to_string(r.loop_close_rc));
  std::string s;
  for (const std::string& b : bad) s += "    " + b + "\n";
  return s;
}

void run_case(const std::string& group, const std::string& spec, const std::string& entry, const std::string& status,
              const Expect& x, bool teardown = false) {
  Watchdog wd(spec, 120);
  WorkloadOptions o;
  o.fault = spec;
  o.teardown_fault = teardown;
  Outcome r = run_workload(o);
  Tally& t = tallies()[group];
  if (r.fired == 0) {
    ++t.not_reached;
    return;
  }
  ++t.tried;
  std::string why = judge(r, entry, status, x);
  std::string first = r.errors.empty() ? "(no error)" : r.errors.front().substr(0, 110);
  for (char& ch : first)
    if (ch == '\n') ch = ' ';
  std::printf("  case %-52s created=%d failed_streams=%d lost=%d | %s\n", spec.c_str(), r.created, r.failed_streams(),
              r.device_lost, first.c_str());
  // After a case in which the engine could not even be made, a new engine
  // must work: the failure left nothing behind in the loader or the shim.
  if (!r.created) {
    const LiveSnapshot live;
    LoopEngine le;
    if (auto c = le.create(shim_config()); !c) why += "    a new engine after the fault: " + c.error().to_string() + "\n";
    else if (std::string f = fresh_job(*le.engine, std::nullopt, 20); !f.empty()) why += "    fresh job: " + f + "\n";
    if (le.destroy() != 0) why += "    uv_loop_close failed\n";
    if (live.delta("all") != 0) why += "    live objects after the fresh engine\n";
  }
  if (why.empty()) {
    ++t.passed;
  } else {
    t.failures.push_back(spec);
    ADD_FAILURE() << "fault " << spec << " (" << r.failed_streams() << " streams failed, device_lost "
                  << r.device_lost << "):\n"
                  << why;
  }
}

class SweepEnv : public ::testing::Environment {
 public:
  void TearDown() override {
    int tried = 0, passed = 0, not_reached = 0;
    std::printf("\nSWEEP RESULTS (group: tried / passed / not reached)\n");
    for (const auto& [name, t] : tallies()) {
      std::printf("  %-34s %3d / %3d / %d%s\n", name.c_str(), t.tried, t.passed, t.not_reached,
                  t.failures.empty() ? "" : "  FAILED:");
      for (const std::string& f : t.failures) std::printf("      %s\n", f.c_str());
      tried += t.tried;
      passed += t.passed;
      not_reached += t.not_reached;
    }
    std::printf("SWEEP TOTAL: %zu groups, %d cases tried, %d passed, %d not reached\n", tallies().size(), tried,
                passed, not_reached);
  }
};
[[maybe_unused]] ::testing::Environment* const kSweepEnv = ::testing::AddGlobalTestEnvironment(new SweepEnv);

// --- "clFoo:N:STATUS": the N-th call fails ------------------------------------------

class ReturnFault : public ::testing::TestWithParam<std::size_t> {};

TEST_P(ReturnFault, AtSeveralPoints) {
  ASSERT_TRUE(shim_ok());
  const EntryPoint& ep = entry_points()[GetParam()];
  const long calls = baseline().at(ep.name);
  if (calls == 0) GTEST_SKIP() << ep.name << " is not called by the workload";
  const std::vector<long> pts = fault_points(calls);
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const std::string status = ep.statuses[i % ep.statuses.size()];
    const std::string spec = std::string(ep.name) + ":" + std::to_string(pts[i]) + ":" + status;
    SCOPED_TRACE(spec);
    run_case(ep.name, spec, ep.name, status, Expect{ep.per_command, ep.must_fail_one, true}, ep.at_teardown);
  }
  std::printf("%s: %ld calls in the workload, fault points %s\n", ep.name, calls,
              ::testing::PrintToString(pts).c_str());
}

std::string entry_name(const ::testing::TestParamInfo<std::size_t>& info) { return entry_points()[info.param].name; }

INSTANTIATE_TEST_SUITE_P(Sweep, ReturnFault, ::testing::Range<std::size_t>(0, entry_points().size()), entry_name);

// --- "event:clFoo:N:STATUS": the command runs, its event fails ---------------------------

class EventFault : public ::testing::TestWithParam<std::size_t> {};

TEST_P(EventFault, AtSeveralPoints) {
  ASSERT_TRUE(shim_ok());
  const char* name = event_entry_points()[GetParam()];
  const long calls = baseline().at(name);
  const char* statuses[] = {"CL_OUT_OF_RESOURCES", "CL_MEM_OBJECT_ALLOCATION_FAILURE", "CL_OUT_OF_HOST_MEMORY"};
  std::vector<long> pts = fault_points(calls);
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const std::string status = statuses[i % 3];
    const std::string spec = "event:" + std::string(name) + ":" + std::to_string(pts[i]) + ":" + status;
    SCOPED_TRACE(spec);
    const bool fence = std::string(name) == "clEnqueueMarkerWithWaitList";
    run_case(std::string("event:") + name, spec, name, status, Expect{!fence, true, false, true});
  }
}

std::string event_name(const ::testing::TestParamInfo<std::size_t>& info) { return event_entry_points()[info.param]; }

INSTANTIATE_TEST_SUITE_P(Sweep, EventFault, ::testing::Range<std::size_t>(0, event_entry_points().size()), event_name);

// --- "lost:clFoo:N": the device stops working -----------------------------------------------

struct LostCase {
  const char* spec;
  const char* entry;
  const char* status;
  bool must_be_lost;  // the engine sees the loss through this call
};

void PrintTo(const LostCase& c, std::ostream* os) { *os << c.spec; }

class LostDevice : public ::testing::TestWithParam<LostCase> {};

TEST_P(LostDevice, FailsCleanly) {
  ASSERT_TRUE(shim_ok());
  const LostCase& c = GetParam();
  Watchdog wd(c.spec, 120);
  WorkloadOptions o;
  o.fault = c.spec;
  Outcome r = run_workload(o);
  Tally& t = tallies()["lost device"];
  ASSERT_GT(r.fired, 0) << c.spec << " never fired";
  ++t.tried;
  std::string why = judge(r, c.entry, c.status, Expect{false, false, true});
  // Everything after the loss fails: nothing may come back as a success
  // unless it completed before.
  if (c.must_be_lost && !r.device_lost) why += "    device_lost(0) is false after " + std::string(c.spec) + "\n";
  if (r.device_lost && !r.names("DeviceLost")) why += "    no DeviceLost error reached the caller\n";
  if (why.empty()) {
    ++t.passed;
  } else {
    t.failures.push_back(c.spec);
    ADD_FAILURE() << "fault " << c.spec << " (" << r.failed_streams() << " streams failed, device_lost "
                  << r.device_lost << "):\n"
                  << why << "errors:\n"
                  << r.all_errors();
  }
  // The loss was the shim's, not the process's: a new engine works.
  const LiveSnapshot live;
  LoopEngine le;
  ASSERT_TRUE(le.create(shim_config()).ok());
  EXPECT_EQ(fresh_job(*le.engine, std::nullopt, 20), "");
  EXPECT_EQ(le.destroy(), 0);
  EXPECT_EQ(live.delta("all"), 0);
}

std::string lost_name(const ::testing::TestParamInfo<LostCase>& info) {
  std::string s = info.param.spec;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, LostDevice,
    ::testing::Values(LostCase{"lost:clFlush:1", "clFlush", "CL_DEVICE_NOT_AVAILABLE", true},
                      LostCase{"lost:clFlush:2", "clFlush", "CL_DEVICE_NOT_AVAILABLE", true},
                      LostCase{"lost:clFlush:5:CL_OUT_OF_RESOURCES", "clFlush", "CL_OUT_OF_RESOURCES", true},
                      LostCase{"lost:clEnqueueNDRangeKernel:1", "clEnqueueNDRangeKernel", "CL_DEVICE_NOT_AVAILABLE", true},
                      LostCase{"lost:clEnqueueNDRangeKernel:120", "clEnqueueNDRangeKernel", "CL_DEVICE_NOT_AVAILABLE", true},
                      LostCase{"lost:clEnqueueReadBuffer:3", "clEnqueueReadBuffer", "CL_DEVICE_NOT_AVAILABLE", true},
                      LostCase{"lost:clEnqueueWriteBuffer:4:CL_OUT_OF_RESOURCES", "clEnqueueWriteBuffer",
                               "CL_OUT_OF_RESOURCES", true},
                      LostCase{"lost:clGetEventInfo:30", "clGetEventInfo", "CL_DEVICE_NOT_AVAILABLE", false},
                      LostCase{"lost:clCreateBuffer:10", "clCreateBuffer", "CL_DEVICE_NOT_AVAILABLE", false}),
    lost_name);

}  // namespace
}  // namespace uvcl::faults::sweep_test
