#include <gtest/gtest.h>

#include "fake_refs.hpp"
#include "sched/queue_choice.hpp"

namespace uvcl::sched {
namespace {

using testing::FakeRefs;

struct QueueChoiceTest : ::testing::Test {
  FakeRefs refs;
  Hazards hz{refs};
  std::vector<std::uint32_t> load = std::vector<std::uint32_t>(4, 0);

  QueueIndex pick(QueuePolicy p, std::vector<AccessView> a) { return choose_queue(p, a, load, refs); }
};

TEST_F(QueueChoiceTest, FreshWorkGoesToTheLeastLoadedQueue) {
  BufferHazards b;
  load = {3, 1, 0, 2};
  EXPECT_EQ(pick(QueuePolicy::Continuation, {{&b, true}}), 2u);
  EXPECT_EQ(pick(QueuePolicy::Seed, {{&b, true}}), 2u);
}

TEST_F(QueueChoiceTest, TiesGoToTheLowestIndex) {
  BufferHazards b;
  load = {1, 0, 0, 1};
  EXPECT_EQ(pick(QueuePolicy::Continuation, {{&b, false}}), 1u);
}

TEST_F(QueueChoiceTest, FirstConsumerContinuesTheProducersQueue) {
  BufferHazards in, out;
  hz.record(in, true, 1, 3);
  load = {0, 0, 0, 5};
  EXPECT_EQ(pick(QueuePolicy::Continuation, {{&in, false}, {&out, true}}), 3u);
}

TEST_F(QueueChoiceTest, FanOutSpreadsAfterTheFirstConsumer) {
  // Continuation: the second reader of one weight buffer does not pile onto
  // the producer's queue. Seed: every reader follows the first input's writer.
  BufferHazards w;
  hz.record(w, true, 1, 0);
  hz.record(w, false, 2, 0);  // first consumer took queue 0
  load = {2, 0, 0, 0};
  EXPECT_EQ(pick(QueuePolicy::Continuation, {{&w, false}}), 1u);
  EXPECT_EQ(pick(QueuePolicy::Seed, {{&w, false}}), 0u);
}

TEST_F(QueueChoiceTest, CompletedProducerDoesNotAttract) {
  BufferHazards in;
  hz.record(in, true, 1, 3);
  refs.complete.insert(1);
  load = {1, 0, 1, 1};
  EXPECT_EQ(pick(QueuePolicy::Continuation, {{&in, false}}), 1u);
}

TEST_F(QueueChoiceTest, InPlaceUpdateContinuesItsChain) {
  BufferHazards a;
  hz.record(a, true, 1, 2);
  load = {0, 0, 4, 0};
  EXPECT_EQ(pick(QueuePolicy::Continuation, {{&a, true}}), 2u);
}

TEST_F(QueueChoiceTest, SeedUsesOnlyTheFirstInput) {
  BufferHazards first, second;
  hz.record(second, true, 1, 3);
  load = {0, 1, 1, 1};
  EXPECT_EQ(pick(QueuePolicy::Seed, {{&first, false}, {&second, false}}), 0u);
  EXPECT_EQ(pick(QueuePolicy::Continuation, {{&first, false}, {&second, false}}), 3u);
}

}  // namespace
}  // namespace uvcl::sched
