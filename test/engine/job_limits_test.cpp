// The job runner's limits hold at the edge of 64 bits: sums of launches
// (repeats counted) and of buffer bytes that wrap are refused, whatever the
// limit; before, two repeats of 2^63 made 0 launches to check (the job then
// ran for ever) and buffer sizes summing past 2^64 slipped under
// max_buffer_bytes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "../watchdog.hpp"
#include "program/job_runner.hpp"
#include "engine_fixture.hpp"
#include "program/job.hpp"

namespace uvcl::job_limits_test {

using uvcl::testing::Watchdog;

const char* kInc = "__kernel void inc(__global uint* x) { x[get_global_id(0)] += 1u; }";

job::Job two_launches(std::uint64_t repeat) {
  job::Job j;
  j.buffers.push_back(job::Buffer{"x", ScalarType::UInt, 64, {}});
  job::Kernel k;
  k.name = "inc";
  k.source = kInc;
  k.entry = "inc";
  j.kernels.push_back(k);
  job::Launch l;
  l.kernel = 0;
  l.args.push_back(job::Arg{});  // buffer 0
  l.global = {64};
  l.repeat = repeat;
  j.launches = {l, l};
  return j;
}

class JobLimits : public uvcl::testing::EngineTest {};

TEST_F(JobLimits, LaunchCountThatWrapsIsRefused) {
  Watchdog wd("launch count past 2^64", 60);
  for (std::uint64_t limit : {std::uint64_t{0}, std::uint64_t{1000}}) {
    job::RunOptions opts;
    opts.max_launches = limit;
    auto r = job::run_job_sync(eng(), two_launches(std::uint64_t{1} << 63), opts);
    ASSERT_FALSE(r.ok()) << "accepted with max_launches " << limit;
    EXPECT_EQ(r.status(), Status::InvalidJob);
    EXPECT_NE(r.error().message.find("launches[1].repeat"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("2^64"), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(eng().stats().launches, 0u);
}

TEST_F(JobLimits, BufferBytesThatWrapAreRefused) {
  Watchdog wd("buffer bytes past 2^64", 60);
  job::Job j = two_launches(1);
  j.launches.clear();
  // 2^63 bytes twice: the sum is 2^64, which wrapped to 0.
  j.buffers = {job::Buffer{"a", ScalarType::Char, std::uint64_t{1} << 63, {}},
               job::Buffer{"b", ScalarType::Char, std::uint64_t{1} << 63, {}}};
  job::RunOptions opts;
  opts.max_buffer_bytes = 256u << 20;
  auto r = job::run_job_sync(eng(), j, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::InvalidJob) << r.error().to_string();
  EXPECT_NE(r.error().message.find("buffers.b"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("2^64"), std::string::npos) << r.error().message;
}

}  // namespace uvcl::job_limits_test
