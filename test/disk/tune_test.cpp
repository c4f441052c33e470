// Local size autotuning (engine level) and prepare_job, on PoCL.
#include <gtest/gtest.h>

#include <optional>

#include "program/job_runner.hpp"
#include "program/tune.hpp"
#include "program/job.hpp"
#include "uvcl/engine.hpp"

namespace uvcl::tune_test {

using Candidates = std::vector<std::vector<std::size_t>>;

TEST(TuneCandidates, Parse) {
  auto c = tune::parse_candidates("16,32,8x8,4x4x2");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c.value(), (Candidates{{16}, {32}, {8, 8}, {4, 4, 2}}));
  for (const char* bad : {"", "16,", ",16", "0", "16,x", "8x", "axb", "1x2x3x4", "-4", "16, 32", "1234567890"}) {
    auto r = tune::parse_candidates(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status(), Status::InvalidArgument);
    }
  }
  EXPECT_EQ(tune::local_text({16, 8}), "16x8");
}

constexpr const char* kSaxpy = R"({
  "buffers": {"x": {"type": "float", "count": 1024, "init": {"fill": 2.0}},
              "y": {"type": "float", "count": 1024, "init": {"fill": 1.0}}},
  "kernels": {"saxpy": {"source": "kernel void saxpy(const float a, global const float* x, global float* y) { size_t i = get_global_id(0); y[i] = a * x[i] + y[i]; }"}},
  "launches": [{"kernel": "saxpy", "args": [{"float": 2.0}, "x", "y"], "global": [1024], "local": [64]}],
  "outputs": ["y"]
})";

class Tune : public ::testing::Test {
 protected:
  void SetUp() override {
    auto e = Engine::create(Config{});
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    engine_ = std::move(e.value());
    buffers_before_ = engine_->stats().live_buffers;
    auto j = job::parse_job(kSaxpy, "saxpy.json");
    ASSERT_TRUE(j.ok()) << j.error().to_string();
    std::optional<Result<std::shared_ptr<job::PreparedJob>>> p;
    ASSERT_TRUE(job::prepare_job(*engine_, std::move(j.value()), {}, [&](auto r) { p = std::move(r); }).ok());
    ASSERT_TRUE(engine_->run_until([&] { return p.has_value(); }).ok());
    ASSERT_TRUE(p->ok()) << p->error().to_string();
    prepared_ = std::move(p->value());
  }
  void TearDown() override {
    prepared_.reset();
    if (engine_) {
      EXPECT_TRUE(engine_->finish().ok());
      EXPECT_EQ(engine_->stats().live_buffers, buffers_before_);  // the prepared job released its buffers
    }
  }
  Result<tune::Report> tune_sync(const Candidates& c, tune::Options o = {}) {
    std::optional<Result<tune::Report>> out;
    UVCL_TRY(tune::time_local_sizes(*engine_, prepared_->launches().at(0), c, o, [&](auto r) { out = std::move(r); }));
    UVCL_TRY(engine_->run_until([&] { return out.has_value(); }));
    return std::move(*out);
  }

  std::unique_ptr<Engine> engine_;
  std::shared_ptr<job::PreparedJob> prepared_;
  std::uint64_t buffers_before_ = 0;
};

TEST_F(Tune, PreparedJobHoldsCheckedLaunches) {
  ASSERT_EQ(prepared_->launches().size(), 1u);
  EXPECT_EQ(prepared_->device(), 0u);
  const Launch& l = prepared_->launches()[0];
  EXPECT_EQ(l.local, (std::vector<std::size_t>{64}));
  EXPECT_EQ(l.args.size(), 3u);
  EXPECT_GT(engine_->stats().live_buffers, buffers_before_);
  EXPECT_TRUE(engine_->check_launch(l).ok());
}

TEST_F(Tune, TimesEachCandidateAndSkipsRejectedOnes) {
  tune::Options o;
  o.warmup = 1;
  o.repetitions = 3;
  auto r = tune_sync({{16}, {48}, {64}, {4096}, {8, 8}, {128}}, o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const auto& rows = r->rows;
  ASSERT_EQ(rows.size(), 6u);
  for (std::size_t i : {0u, 2u, 5u}) {
    EXPECT_TRUE(rows[i].ok()) << i << ": " << rows[i].skipped;
    EXPECT_EQ(rows[i].device_ns.size(), 3u);
    EXPECT_LE(rows[i].min_ns, rows[i].median_ns);
    EXPECT_LE(rows[i].median_ns, rows[i].max_ns);
    EXPECT_GT(rows[i].max_ns, 0u);
  }
  EXPECT_EQ(rows[2].local, (std::vector<std::size_t>{64}));
  EXPECT_NE(rows[1].skipped.find("is not a multiple of the local size 48"), std::string::npos) << rows[1].skipped;
  EXPECT_FALSE(rows[3].ok());
  EXPECT_NE(rows[3].skipped.find("4096"), std::string::npos) << rows[3].skipped;
  EXPECT_EQ(rows[4].skipped, "8x8 has 2 axes, the launch has 1");
  EXPECT_EQ(rows[4].local, (std::vector<std::size_t>{8, 8}));
  ASSERT_LT(r->fastest, rows.size());
  EXPECT_TRUE(rows[r->fastest].ok());
  for (const auto& m : rows)
    if (m.ok()) {
      EXPECT_LE(rows[r->fastest].median_ns, m.median_ns);
    }
}

TEST_F(Tune, NoCandidatePassesTheChecks) {
  bool called = false;
  auto r = tune::time_local_sizes(*engine_, prepared_->launches().at(0), {{48}, {3}, {2, 2}}, {},
                                  [&](auto) { called = true; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::InvalidArgument);
  EXPECT_NE(r.error().message.find("tune: no local size candidate can run:\n  48: "), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("\n  2x2: 2x2 has 2 axes, the launch has 1"), std::string::npos);
  ASSERT_TRUE(engine_->finish().ok());
  EXPECT_FALSE(called);
}

TEST_F(Tune, BadArguments) {
  auto noop = [](Result<tune::Report>) {};
  tune::Options zero;
  zero.repetitions = 0;
  EXPECT_FALSE(tune::time_local_sizes(*engine_, prepared_->launches().at(0), {{16}}, zero, noop).ok());
  EXPECT_FALSE(tune::time_local_sizes(*engine_, prepared_->launches().at(0), {}, {}, noop).ok());
  EXPECT_FALSE(tune::time_local_sizes(*engine_, prepared_->launches().at(0), {{16}}, {}, {}).ok());
}

TEST(PrepareJob, ErrorsComeThroughTheCallback) {
  auto e = Engine::create(Config{});
  ASSERT_TRUE(e.ok());
  Engine& eng = *e.value();
  auto j = job::parse_job(R"({"buffers": {}, "kernels": {"k": {"source": "kernel void k(global float* x) { x[0] = ; }"}},
                              "launches": [], "outputs": []})",
                          "bad.json");
  ASSERT_TRUE(j.ok()) << j.error().to_string();
  std::optional<Result<std::shared_ptr<job::PreparedJob>>> p;
  ASSERT_TRUE(job::prepare_job(eng, std::move(j.value()), {}, [&](auto r) { p = std::move(r); }).ok());
  ASSERT_TRUE(eng.run_until([&] { return p.has_value(); }).ok());
  ASSERT_FALSE(p->ok());
  EXPECT_EQ(p->status(), Status::KernelCompilation);
  EXPECT_EQ(p->error().message.rfind("kernels.k: ", 0), 0u) << p->error().message;
}

}  // namespace uvcl::tune_test
