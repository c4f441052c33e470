// The job runner enqueues a long job's launches a chunk per loop iteration
// (RunOptions::launches_per_turn): other handles on the loop run between the
// chunks, results equal the job enqueued in one go, and destroying the engine
// half-way through cancels the job cleanly.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <uv.h>

#include "program/job_runner.hpp"
#include "engine_fixture.hpp"
#include "program/job.hpp"

namespace uvcl::job_turns_test {

using uvcl::testing::as_vector;
using uvcl::testing::test_config;

constexpr std::uint64_t kCount = 64;

// x = x + 1 and x = 2x - i do not commute: any reordering of the launches
// changes the result.
std::string job_json(std::uint64_t inc1, std::uint64_t dbl, std::uint64_t inc2) {
  const std::string src =
      "__kernel void inc(__global uint* x) { size_t i = get_global_id(0); x[i] = x[i] + 1u; }\n"
      "__kernel void dbl(__global uint* x) { size_t i = get_global_id(0); x[i] = 2u * x[i] - (uint)i; }\n";
  std::string quoted;
  for (char c : src) {
    if (c == '\n') quoted += "\\n";
    else quoted += c;
  }
  const std::string n = std::to_string(kCount);
  return R"({"kernels": {"inc": {"source": ")" + quoted + R"("}, "dbl": {"source": ")" + quoted +
         R"("}}, "buffers": {"x": {"type": "uint", "count": )" + n +
         R"(, "init": {"fill": 3}}}, "launches": [)" + R"({"kernel": "inc", "args": ["x"], "global": [)" + n +
         R"(], "repeat": )" + std::to_string(inc1) + R"(}, {"kernel": "dbl", "args": ["x"], "global": [)" + n +
         R"(], "repeat": )" + std::to_string(dbl) + R"(}, {"kernel": "inc", "args": ["x"], "global": [)" + n +
         R"(], "repeat": )" + std::to_string(inc2) + R"(}], "outputs": ["x"]})";
}

// The same computation on the host, in program order.
std::vector<std::uint32_t> expected(std::uint64_t inc1, std::uint64_t dbl, std::uint64_t inc2) {
  std::vector<std::uint32_t> x(kCount, 3u);
  for (std::uint32_t i = 0; i < kCount; ++i) {
    for (std::uint64_t r = 0; r < inc1; ++r) x[i] += 1u;
    for (std::uint64_t r = 0; r < dbl; ++r) x[i] = 2u * x[i] - i;
    for (std::uint64_t r = 0; r < inc2; ++r) x[i] += 1u;
  }
  return x;
}

class JobTurns : public uvcl::testing::EngineTest {
 protected:
  Result<job::RunResult> run(const std::string& json, std::uint64_t per_turn) {
    auto j = job::parse_job(json, "job.json");
    if (!j) return std::move(j).error();
    job::RunOptions o;
    o.launches_per_turn = per_turn;
    return job::run_job_sync(eng(), std::move(j.value()), o);
  }
};

TEST_F(JobTurns, ChunkedResultsEqualOneGoAndProgramOrder) {
  const std::uint64_t inc1 = 700, dbl = 5, inc2 = 333;
  const std::string json = job_json(inc1, dbl, inc2);
  auto one_go = run(json, 0);
  ASSERT_TRUE(one_go.ok()) << one_go.error().to_string();
  const auto want = expected(inc1, dbl, inc2);
  ASSERT_EQ(one_go->outputs.size(), 1u);
  EXPECT_EQ(as_vector<std::uint32_t>(one_go->outputs[0].data), want);
  // Chunk sizes that split every launch group, and one that divides them.
  for (std::uint64_t per_turn : {1u, 7u, 100u, 256u, 2000u}) {
    auto chunked = run(json, per_turn);
    ASSERT_TRUE(chunked.ok()) << per_turn << ": " << chunked.error().to_string();
    ASSERT_EQ(chunked->outputs.size(), 1u);
    EXPECT_EQ(chunked->outputs[0].data, one_go->outputs[0].data) << "launches_per_turn " << per_turn;
    EXPECT_EQ(chunked->stats.launches, inc1 + dbl + inc2);
    EXPECT_EQ(chunked->stats.commands, one_go->stats.commands);
  }
}

// A repeating timer on the engine's loop fires while the job's launches are
// still being enqueued: the runner gives the loop back between chunks.
TEST_F(JobTurns, TimerFiresBetweenChunks) {
  const std::uint64_t inc1 = 12000, dbl = 1, inc2 = 8000, total = inc1 + dbl + inc2;
  struct Probe {
    Engine* engine = nullptr;
    std::uint64_t base = 0, total = 0;
    int during = 0, fired = 0;
  } probe{&eng(), eng().stats().launches, total};
  auto* timer = new uv_timer_t;
  ASSERT_EQ(uv_timer_init(eng().loop(), timer), 0);
  timer->data = &probe;
  uv_timer_start(
      timer,
      [](uv_timer_t* t) {
        auto& p = *static_cast<Probe*>(t->data);
        ++p.fired;
        const std::uint64_t enqueued = p.engine->stats().launches - p.base;
        if (enqueued > 0 && enqueued < p.total) ++p.during;
      },
      1, 1);
  uv_unref(reinterpret_cast<uv_handle_t*>(timer));
  auto r = run(job_json(inc1, dbl, inc2), 64);
  uv_timer_stop(timer);
  uv_close(reinterpret_cast<uv_handle_t*>(timer), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(as_vector<std::uint32_t>(r->outputs[0].data), expected(inc1, dbl, inc2));
  EXPECT_GT(probe.during, 0) << "the timer fired " << probe.fired << " times, never during the enqueueing";
  eng().poll();  // runs the timer's close callback
}

// A job of many buffers makes them a turn's worth per loop iteration too
// (allocations and uploads): the loop turns while they are being made, and
// the result is what one go gives.
TEST_F(JobTurns, BuffersAreMadeInTurns) {
  constexpr int kBuffers = 600;
  std::string buffers, args;
  for (int i = 0; i < kBuffers; ++i) {
    buffers += (i ? ", " : "") + std::string("\"b") + std::to_string(i) + R"(": {"type": "uint", "count": 1, "init": {"fill": )" +
               std::to_string(i) + "}}";
  }
  const std::string json =
      R"({"kernels": {"inc": {"source": "__kernel void inc(__global uint* x) { x[0] += 1u; }"}}, "buffers": {)" + buffers +
      R"(}, "launches": [{"kernel": "inc", "args": ["b599"], "global": [1]}], "outputs": ["b599"]})";
  struct Probe {
    Engine* engine = nullptr;
    std::uint64_t base = 0;
    int partial = 0;  // loop iterations that saw some of the buffers made, not all
  } probe{&eng(), eng().stats().live_buffers};
  auto* prepare = new uv_prepare_t;
  ASSERT_EQ(uv_prepare_init(eng().loop(), prepare), 0);
  prepare->data = &probe;
  uv_prepare_start(prepare, [](uv_prepare_t* h) {
    auto& p = *static_cast<Probe*>(h->data);
    const std::uint64_t made = p.engine->stats().live_buffers - p.base;
    if (made > 0 && made < kBuffers) ++p.partial;
  });
  uv_unref(reinterpret_cast<uv_handle_t*>(prepare));
  auto r = run(json, 64);
  uv_prepare_stop(prepare);
  uv_close(reinterpret_cast<uv_handle_t*>(prepare), [](uv_handle_t* h) { delete reinterpret_cast<uv_prepare_t*>(h); });
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(as_vector<std::uint32_t>(r->outputs[0].data), std::vector<std::uint32_t>{600u});
  EXPECT_GE(probe.partial, kBuffers / 64 - 1) << "the buffers were made in fewer loop iterations than turns";
  eng().poll();  // runs the prepare handle's close callback
}

// Two jobs started together on one engine both finish, with the results each
// has alone: their chunks interleave on the loop.
TEST_F(JobTurns, TwoChunkedJobsAtOnce) {
  std::optional<Result<job::RunResult>> a, b;
  for (auto* slot : {&a, &b}) {
    const std::uint64_t inc1 = slot == &a ? 900 : 50, inc2 = slot == &a ? 10 : 1500;
    auto j = job::parse_job(job_json(inc1, 2, inc2), "job.json");
    ASSERT_TRUE(j.ok()) << j.error().to_string();
    job::RunOptions o;
    o.launches_per_turn = 32;
    auto started = job::run_job(eng(), std::move(j.value()), o, [slot](Result<job::RunResult> r) { *slot = std::move(r); });
    ASSERT_TRUE(started.ok()) << started.error().to_string();
  }
  ASSERT_TRUE(eng().run_until([&] { return a.has_value() && b.has_value(); }).ok());
  ASSERT_TRUE(a->ok()) << a->error().to_string();
  ASSERT_TRUE(b->ok()) << b->error().to_string();
  EXPECT_EQ(as_vector<std::uint32_t>(a->value().outputs[0].data), expected(900, 2, 10));
  EXPECT_EQ(as_vector<std::uint32_t>(b->value().outputs[0].data), expected(50, 2, 1500));
}

// Destroying the engine while a job is half enqueued: the job's callback runs
// once with Cancelled, and every handle closes (own loop and caller's loop).
TEST_F(JobTurns, EngineDestroyedMidEnqueueOwnLoop) {
  int calls = 0;
  std::optional<Status> status;
  auto j = job::parse_job(job_json(1000, 1, 1000), "job.json");
  ASSERT_TRUE(j.ok());
  job::RunOptions o;
  o.launches_per_turn = 1;
  const std::uint64_t base = eng().stats().launches;
  ASSERT_TRUE(job::run_job(eng(), std::move(j.value()), o, [&](Result<job::RunResult> r) {
                ++calls;
                status = r.ok() ? Status::Ok : r.status();
              }).ok());
  ASSERT_TRUE(eng().run_until([&] { return eng().stats().launches > base; }).ok());
  EXPECT_LT(eng().stats().launches - base, 2001u);
  engine_.reset();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(status, Status::Cancelled);
}

TEST(JobTurnsForeignLoop, EngineDestroyedMidEnqueue) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  int calls = 0;
  std::optional<Status> status;
  {
    auto e = Engine::create(test_config(), &loop);
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    std::unique_ptr<Engine> engine = std::move(e.value());
    auto j = job::parse_job(job_json(1000, 1, 1000), "job.json");
    ASSERT_TRUE(j.ok());
    job::RunOptions o;
    o.launches_per_turn = 1;
    ASSERT_TRUE(job::run_job(*engine, std::move(j.value()), o, [&](Result<job::RunResult> r) {
                  ++calls;
                  status = r.ok() ? Status::Ok : r.status();
                }).ok());
    ASSERT_TRUE(engine->run_until([&] { return engine->stats().launches > 0; }).ok());
    engine.reset();  // the job's turns are still open on the caller's loop
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(status, Status::Cancelled);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace uvcl::job_turns_test
