// A job buffer without `init` is all zero. The runner skips its zero fill
// only where the buffer's first launch provably stores every element before
// anything reads it (KernelParam::writes_each_item over a large enough 1-D
// range); anywhere else the fill stays, and what no launch writes reads 0.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "program/job_runner.hpp"
#include "engine_fixture.hpp"
#include "program/job.hpp"

namespace uvcl::job_fills_test {

using uvcl::testing::as_vector;

constexpr const char* kKernels = R"CL(
kernel void each(global const float* in, global float* out) {
  size_t i = get_global_id(0);
  out[i] = in[i] + 1.0f;
}
kernel void guarded(global const float* in, global float* out, uint n) {
  size_t i = get_global_id(0);
  if (i < n) out[i] = in[i] + 1.0f;
}
kernel void bump(global float* out) {
  size_t i = get_global_id(0);
  out[i] = out[i] + 10.0f;
}
)CL";

// A job over `in` (8 x 2.0) and `out` (8 floats, no init), `launches` as written.
std::string job(const std::string& launches) {
  std::string src;
  for (const char* c = kKernels; *c; ++c) {
    if (*c == '\n') src += "\\n";
    else src += *c;
  }
  return R"({"kernels": {"each": {"source": ")" + src + R"("}, "guarded": {"source": ")" + src +
         R"(", "entry": "guarded"}, "bump": {"source": ")" + src + R"(", "entry": "bump"}},
  "buffers": {"in": {"type": "float", "count": 8, "init": {"fill": 2}}, "out": {"type": "float", "count": 8}},
  "launches": [)" + launches + R"(], "outputs": ["out"]})";
}

struct Ran {
  std::vector<float> out;
  int fills_of_out = 0;
};

class JobFills : public uvcl::testing::EngineTest {
 protected:
  Ran run(const std::string& launches) {
    auto j = job::parse_job(job(launches), "job.json");
    EXPECT_TRUE(j.ok()) << j.error().to_string();
    if (!j.ok()) return {};
    job::RunOptions o;
    o.record_schedule = true;
    auto r = job::run_job_sync(eng(), std::move(j.value()), o);
    EXPECT_TRUE(r.ok()) << r.error().to_string();
    if (!r.ok()) return {};
    Ran ran;
    ran.out = as_vector<float>(r->outputs.at(0).data);
    std::istringstream lines(r->schedule_json);
    for (std::string line; std::getline(lines, line);)
      if (line.find("\"op\": \"fill\"") != std::string::npos && line.find("\"writes\": [\"out\"]") != std::string::npos)
        ++ran.fills_of_out;
    return ran;
  }
};

TEST_F(JobFills, FullyStoredOutputIsNotFilled) {
  Ran r = run(R"({"kernel": "each", "args": ["in", "out"], "global": [8]})");
  EXPECT_EQ(r.fills_of_out, 0);
  EXPECT_EQ(r.out, std::vector<float>(8, 3.0f));
  // With a work-group size: still every element.
  r = run(R"({"kernel": "each", "args": ["in", "out"], "global": [8], "local": [4]})");
  EXPECT_EQ(r.fills_of_out, 0);
  EXPECT_EQ(r.out, std::vector<float>(8, 3.0f));
}

TEST_F(JobFills, HalfStoredOutputIsFilledAndItsOtherHalfIsZero) {
  Ran r = run(R"({"kernel": "each", "args": ["in", "out"], "global": [4]})");
  EXPECT_EQ(r.fills_of_out, 1);
  EXPECT_EQ(r.out, (std::vector<float>{3, 3, 3, 3, 0, 0, 0, 0}));
}

TEST_F(JobFills, GuardedStoreIsFilled) {
  Ran r = run(R"({"kernel": "guarded", "args": ["in", "out", {"uint": 4}], "global": [8]})");
  EXPECT_EQ(r.fills_of_out, 1);
  EXPECT_EQ(r.out, (std::vector<float>{3, 3, 3, 3, 0, 0, 0, 0}));
}

TEST_F(JobFills, FirstUseThatReadsIsFilled) {
  Ran r = run(R"({"kernel": "bump", "args": ["out"], "global": [8]},
                 {"kernel": "each", "args": ["in", "out"], "global": [8]},
                 {"kernel": "bump", "args": ["out"], "global": [8]})");
  EXPECT_EQ(r.fills_of_out, 1);
  EXPECT_EQ(r.out, std::vector<float>(8, 13.0f));
  // The full store first: no fill, and the later read sees its result.
  r = run(R"({"kernel": "each", "args": ["in", "out"], "global": [8]},
             {"kernel": "bump", "args": ["out"], "global": [8]})");
  EXPECT_EQ(r.fills_of_out, 0);
  EXPECT_EQ(r.out, std::vector<float>(8, 13.0f));
}

TEST_F(JobFills, BufferAlsoReadInTheSameLaunchIsFilled) {
  Ran r = run(R"({"kernel": "each", "args": ["out", "out"], "global": [8]})");
  EXPECT_EQ(r.fills_of_out, 1);
  EXPECT_EQ(r.out, std::vector<float>(8, 1.0f));
}

TEST_F(JobFills, TwoDimensionalRangeIsFilled) {
  Ran r = run(R"({"kernel": "each", "args": ["in", "out"], "global": [8, 2]})");
  EXPECT_EQ(r.fills_of_out, 1);
  EXPECT_EQ(r.out, std::vector<float>(8, 3.0f));
  r = run(R"({"kernel": "each", "args": ["in", "out"], "global": [8, 1, 1]})");
  EXPECT_EQ(r.fills_of_out, 0);
  EXPECT_EQ(r.out, std::vector<float>(8, 3.0f));
}

TEST_F(JobFills, UnusedBufferIsFilled) {
  Ran r = run(R"({"kernel": "each", "args": ["in", "in"], "global": [8]})");
  EXPECT_EQ(r.fills_of_out, 1);
  EXPECT_EQ(r.out, std::vector<float>(8, 0.0f));
}

}  // namespace uvcl::job_fills_test
