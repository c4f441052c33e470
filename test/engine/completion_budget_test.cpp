// on_poll retires at most Engine::Impl::kCompletionsPerTurn commands per
// call: a deep queue that completed all at once is retired over several loop
// iterations (other handles run in between), and every callback still runs
// exactly once, in order.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include <uv.h>

#include "engine/engine_impl.hpp"
#include "engine_fixture.hpp"

namespace uvcl::completion_budget_test {

using uvcl::testing::test_config;

struct IterationCounter {
  uv_check_t check{};
  const std::vector<int>* done = nullptr;
  std::size_t seen = 0;
  std::size_t most_in_one_iteration = 0;
  int iterations_with_callbacks = 0;
};

TEST(CompletionBudget, ADeepQueueIsRetiredOverSeveralIterations) {
  constexpr int kCommands = 4 * static_cast<int>(Engine::Impl::kCompletionsPerTurn);
  // One queue (every fill completes in order) and a window that divides the
  // count: all of them are submitted before the loop runs.
  auto made = Engine::create(test_config(1, 64));
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  Engine& e = **made;
  auto b = e.allocate(0, 4096);
  ASSERT_TRUE(b.ok());
  std::vector<int> done;
  done.reserve(kCommands);
  const std::uint32_t word = 7;
  for (int i = 0; i < kCommands; ++i)
    ASSERT_TRUE(e.fill(*b, std::as_bytes(std::span(&word, 1)), 0, 64, [&done, i](Result<void> r) {
      EXPECT_TRUE(r.ok());
      done.push_back(i);
    }).ok());
  // Let the device finish everything before the loop looks: then one poll
  // would see all of them complete at once.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  IterationCounter counter;
  counter.done = &done;
  uv_check_init(e.loop(), &counter.check);
  counter.check.data = &counter;
  uv_check_start(&counter.check, [](uv_check_t* h) {
    auto* c = static_cast<IterationCounter*>(h->data);
    const std::size_t now = c->done->size();
    if (now > c->seen) {
      c->most_in_one_iteration = std::max(c->most_in_one_iteration, now - c->seen);
      ++c->iterations_with_callbacks;
    }
    c->seen = now;
  });
  uv_unref(reinterpret_cast<uv_handle_t*>(&counter.check));
  uv_run(e.loop(), UV_RUN_DEFAULT);  // until the engine is idle
  uv_close(reinterpret_cast<uv_handle_t*>(&counter.check), nullptr);
  uv_run(e.loop(), UV_RUN_NOWAIT);

  ASSERT_EQ(done.size(), static_cast<std::size_t>(kCommands));
  for (int i = 0; i < kCommands; ++i) ASSERT_EQ(done[i], i) << "callbacks out of order";
  // The timer and the wake-up may each poll once in an iteration.
  EXPECT_LE(counter.most_in_one_iteration, 2 * Engine::Impl::kCompletionsPerTurn);
  EXPECT_GE(counter.iterations_with_callbacks, 2);
  ASSERT_TRUE(e.release(*b).ok());
}

}  // namespace uvcl::completion_budget_test
