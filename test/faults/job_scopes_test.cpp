// Jobs sharing one engine (uvcl serve) see only their own failures: a job's
// commands belong to the job's error scopes, so a failure of one job's launch
// is reported in that job's result and never in another's (before, a job with
// no outputs ended with a drain, which reported whatever failed in between).
#include "program/job_runner.hpp"
#include "harness.hpp"
#include "program/job.hpp"

namespace uvcl::faults::job_scopes_test {
namespace {

constexpr std::uint64_t kCount = 64;
constexpr const char* kIncSource = "__kernel void inc(__global uint* x) { x[get_global_id(0)] += 1u; }";

// `repeat` launches of x = x + 1 on one buffer; with `output`, x is read back.
std::string job_json(std::uint64_t repeat, bool output) {
  const std::string n = std::to_string(kCount);
  return std::string(R"({"kernels": {"inc": {"source": ")") + kIncSource + R"("}},)"
         R"( "buffers": {"x": {"type": "uint", "count": )" + n + R"(, "init": {"fill": 3}}},)"
         R"( "launches": [{"kernel": "inc", "args": ["x"], "global": [)" + n + R"(], "repeat": )" +
         std::to_string(repeat) + "}]" + (output ? R"(, "outputs": ["x"]})" : "}");
}

class JobScopes : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(shim_ok());
    shim().reset_faults();
    ASSERT_TRUE(le_.create(shim_config(2)).ok());
  }
  void TearDown() override {
    shim().reset_faults();
    EXPECT_EQ(le_.destroy(), 0);
  }
  Engine& e() { return *le_.engine; }

  // Starts a job with one launch per turn, so its turns interleave with the
  // other job's on the loop.
  void start(std::uint64_t repeat, bool output, std::optional<Result<job::RunResult>>& slot) {
    auto j = job::parse_job(job_json(repeat, output), "job.json");
    ASSERT_TRUE(j.ok()) << j.error().to_string();
    job::RunOptions o;
    o.launches_per_turn = 1;
    auto started = job::run_job(e(), std::move(j.value()), o, [&slot](Result<job::RunResult> r) { slot = std::move(r); });
    ASSERT_TRUE(started.ok()) << started.error().to_string();
  }

  // Job B (`b_output`: with an output or not) starts with a launch that
  // fails; job A, started once B has launched, finishes while B's turns go
  // on. A must succeed; B must report the failure.
  void failing_job_beside_a_clean_one(bool b_output) {
    std::optional<Result<job::RunResult>> a, b;
    // Built once beforehand, so that A's build (a memo hit) is done long
    // before B's turns end.
    auto p = e().compile_sync(0, kIncSource);
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    const std::uint64_t base = e().stats().launches;
    start(400, b_output, b);
    // The next kernel enqueue fails: B's first launch, which comes before
    // any of A's (A starts once B has launched; one window keeps order).
    shim().set_fault("clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES");
    ASSERT_EQ(run_for(e(), [&] { return e().stats().launches > base; }, 30), "");
    start(5, false, a);
    ASSERT_EQ(run_for(e(), [&] { return a.has_value() && b.has_value(); }, 60), "");
    EXPECT_EQ(shim().fired(), 1);
    EXPECT_TRUE(a->ok()) << "job A reported " << a->error().to_string();
    ASSERT_FALSE(b->ok()) << "job B's failed launch was not reported in its result";
    EXPECT_NE(b->error().to_string().find("CL_OUT_OF_RESOURCES"), std::string::npos) << b->error().to_string();
    ASSERT_TRUE(e().release(*p).ok());
  }

  LoopEngine le_;
};

TEST_F(JobScopes, AnotherJobsFailedLaunchIsNotInAJobsResult) {
  Watchdog wd("another job's failed launch", 90);
  failing_job_beside_a_clean_one(false);
}

TEST_F(JobScopes, AnotherJobsFailedLaunchIsNotInAJobsResultWithOutputs) {
  Watchdog wd("another job's failed launch, outputs", 90);
  failing_job_beside_a_clean_one(true);
}

// A job with no outputs, alone: the failure of its launch is in its result
// (its last scope's callback), and nothing is left for a later drain.
TEST_F(JobScopes, NoOutputJobReportsItsOwnFailedLaunch) {
  Watchdog wd("no-output job, failed launch", 60);
  auto j = job::parse_job(job_json(3, false), "job.json");
  ASSERT_TRUE(j.ok()) << j.error().to_string();
  auto p = e().compile_sync(0, kIncSource);  // the job's build is then a memo hit
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  shim().set_fault("clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES");  // the job's first launch
  auto r = job::run_job_sync(e(), std::move(j.value()), {});
  EXPECT_EQ(shim().fired(), 1);
  ASSERT_FALSE(r.ok()) << "the job succeeded with its first launch failed";
  EXPECT_NE(r.error().to_string().find("CL_OUT_OF_RESOURCES"), std::string::npos) << r.error().to_string();
  EXPECT_TRUE(e().finish().ok()) << "the job's failure reached a later drain too";
  ASSERT_TRUE(e().release(*p).ok());
}

}  // namespace
}  // namespace uvcl::faults::job_scopes_test
