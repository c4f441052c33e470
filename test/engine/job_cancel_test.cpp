// Stopping a job from outside (job::JobCancel), bounding the chunks of
// launches it keeps ahead of the device (RunOptions::chunks_ahead), and
// kernels of a library (job::KernelLibrary, "FILE:ENTRY" in a launch).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include <uv.h>

#include "program/job_runner.hpp"
#include "program/kernel_library.hpp"
#include "engine_fixture.hpp"
#include "program/job.hpp"

namespace uvcl::job_cancel_test {

using uvcl::testing::as_vector;

constexpr std::uint64_t kItems = 64;

// `repeat` launches of x = x + 1 over kItems uints starting at 0.
std::string inc_job(std::uint64_t repeat, const std::string& kernel = "inc", bool own_kernel = true) {
  const std::string n = std::to_string(kItems);
  std::string job = R"({"buffers": {"x": {"type": "uint", "count": )" + n + "}}, ";
  if (own_kernel)
    job += R"("kernels": {"inc": {"source": "__kernel void inc(__global uint* x) { x[get_global_id(0)] += 1u; }"}}, )";
  return job + R"("launches": [{"kernel": ")" + kernel + R"(", "args": ["x"], "global": [)" + n +
         R"(], "repeat": )" + std::to_string(repeat) + R"(}], "outputs": ["x"]})";
}

class JobCancelTest : public uvcl::testing::EngineTest {
 protected:
  Result<job::RunResult> run(const std::string& json, job::RunOptions o) {
    auto j = job::parse_job(json, "job.json");
    if (!j) return std::move(j).error();
    return job::run_job_sync(eng(), std::move(j.value()), std::move(o));
  }
};

TEST_F(JobCancelTest, ChunksAheadKeepsProgramOrder) {
  for (std::uint64_t ahead : {1u, 2u, 5u}) {
    job::RunOptions o;
    o.launches_per_turn = 7;
    o.chunks_ahead = ahead;
    auto r = run(inc_job(500), o);
    ASSERT_TRUE(r.ok()) << ahead << ": " << r.error().to_string();
    EXPECT_EQ(as_vector<std::uint32_t>(r->outputs.at(0).data), std::vector<std::uint32_t>(kItems, 500u))
        << "chunks_ahead " << ahead;
    EXPECT_EQ(r->stats.launches, 500u);
  }
}

// A timer cancels a job of 10^6 launches: done gets the reason, far fewer
// launches were enqueued than the job has, and the job's buffer is freed.
TEST_F(JobCancelTest, CancelStopsEnqueuingAndReleases) {
  const std::uint64_t live_before = eng().stats().live_buffers;
  const std::uint64_t launches_before = eng().stats().launches;
  auto j = job::parse_job(inc_job(1'000'000), "job.json");
  ASSERT_TRUE(j.ok()) << j.error().to_string();
  job::RunOptions o;
  o.launches_per_turn = 16;
  o.chunks_ahead = 2;
  o.cancel = std::make_shared<job::JobCancel>();
  std::optional<Result<job::RunResult>> done;
  ASSERT_TRUE(job::run_job(eng(), std::move(j.value()), o, [&](Result<job::RunResult> r) { done = std::move(r); }).ok());
  // Cancelled once launches are being enqueued (not during the build).
  struct Probe {
    Engine* engine;
    job::JobCancel* cancel;
    std::uint64_t base;
  } probe{&eng(), o.cancel.get(), launches_before};
  auto* timer = new uv_timer_t;
  ASSERT_EQ(uv_timer_init(eng().loop(), timer), 0);
  timer->data = &probe;
  uv_timer_start(
      timer,
      [](uv_timer_t* t) {
        auto& p = *static_cast<Probe*>(t->data);
        if (p.engine->stats().launches - p.base < 100) return;
        p.cancel->cancel(Error{Status::Cancelled, "test: enough"});
        uv_close(reinterpret_cast<uv_handle_t*>(t), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
      },
      1, 1);
  ASSERT_TRUE(eng().run_until([&] { return done.has_value(); }).ok());
  ASSERT_FALSE(done->ok());
  EXPECT_EQ(done->error().status, Status::Cancelled);
  EXPECT_EQ(done->error().message, "test: enough");
  const std::uint64_t launched = eng().stats().launches - launches_before;
  EXPECT_GE(launched, 100u);
  EXPECT_LT(launched, 100'000u);  // a few chunks of 16 past the cancel, not the job
  EXPECT_EQ(eng().stats().live_buffers, live_before);  // released once the device was done with it
  EXPECT_EQ(eng().stats().in_flight, 0u);
  o.cancel->cancel(Error{Status::Cancelled, "again"});  // after the end: nothing
}

TEST_F(JobCancelTest, CancelledBeforeTheStartIsAnError) {
  auto j = job::parse_job(inc_job(1), "job.json");
  ASSERT_TRUE(j.ok());
  job::RunOptions o;
  o.cancel = std::make_shared<job::JobCancel>();
  o.cancel->cancel(Error{Status::Cancelled, "no"});
  bool called = false;
  auto r = job::run_job(eng(), std::move(j.value()), o, [&](Result<job::RunResult>) { called = true; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "no");
  EXPECT_FALSE(called);
}

class JobLibraryTest : public JobCancelTest {
 protected:
  void SetUp() override {
    JobCancelTest::SetUp();
    dir_ = std::filesystem::temp_directory_path() / ("uvcl-lib-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::filesystem::path dir_;
};

TEST_F(JobLibraryTest, LaunchesNameFileColonEntry) {
  write("ops.cl", "__kernel void inc(__global uint* x) { x[get_global_id(0)] += 1u; }\n"
                  "__kernel void twice(__global uint* x) { x[get_global_id(0)] *= 2u; }\n");
  write("README", "ignored");
  auto lib = job::KernelLibrary::load(eng(), dir_.string());
  ASSERT_TRUE(lib.ok()) << lib.error().to_string();
  EXPECT_EQ(lib.value()->files(), std::vector<std::string>{"ops"});
  job::RunOptions o;
  o.library = lib.value().get();
  o.allow_sources = false;
  auto r = run(inc_job(3, "ops:inc", false), o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(as_vector<std::uint32_t>(r->outputs.at(0).data), std::vector<std::uint32_t>(kItems, 3u));
  // The job's own source is refused when sources are not allowed.
  auto own = run(inc_job(1), o);
  ASSERT_FALSE(own.ok());
  EXPECT_NE(own.error().message.find("without --allow-source"), std::string::npos) << own.error().message;
  // Unknown entry and unknown file: InvalidJob naming the launch.
  auto entry = run(inc_job(1, "ops:nope", false), o);
  ASSERT_FALSE(entry.ok());
  EXPECT_EQ(entry.error().message,
            "launches[0].kernel: no kernel function \"nope\" in ops.cl of the server's library");
  auto file = run(inc_job(1, "blas:inc", false), o);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().message, "launches[0].kernel: no kernel file \"blas.cl\" in the server's library (ops)");
  // Without a library a FILE:ENTRY launch is an error, not a crash.
  auto none = run(inc_job(1, "ops:inc", false), job::RunOptions{});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("and none was given"), std::string::npos) << none.error().message;
}

TEST_F(JobLibraryTest, ABuildErrorNamesTheFileAndCarriesTheLog) {
  write("good.cl", "__kernel void k(__global uint* x) { x[0] = 1u; }\n");
  write("bad.cl", "__kernel void k(__global uint* x) { x[0] = not_declared; }\n");
  auto lib = job::KernelLibrary::load(eng(), dir_.string());
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.error().status, Status::KernelCompilation);
  EXPECT_NE(lib.error().message.find("bad.cl (device 0)"), std::string::npos) << lib.error().message;
  EXPECT_NE(lib.error().message.find("not_declared"), std::string::npos) << lib.error().message;
}

}  // namespace uvcl::job_cancel_test
