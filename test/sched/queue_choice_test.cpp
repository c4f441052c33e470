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

  QueueIndex pick(std::vector<AccessView> a) { return choose_queue(a, load, refs); }
};

TEST_F(QueueChoiceTest, FreshWorkGoesToTheLeastLoadedQueue) {
  BufferHazards b;
  load = {3, 1, 0, 2};
  EXPECT_EQ(pick({{&b, true}}), 2u);
}

TEST_F(QueueChoiceTest, TiesGoToTheLowestIndex) {
  BufferHazards b;
  load = {1, 0, 0, 1};
  EXPECT_EQ(pick({{&b, false}}), 1u);
}

TEST_F(QueueChoiceTest, FirstConsumerContinuesTheProducersQueue) {
  BufferHazards in, out;
  hz.record(in, true, 1, 3);
  load = {0, 0, 0, 5};
  EXPECT_EQ(pick({{&in, false}, {&out, true}}), 3u);
}

TEST_F(QueueChoiceTest, FanOutSpreadsAfterTheFirstConsumer) {
  // The second reader of one weight buffer does not pile onto the
  // producer's queue (the seed sent every reader after the first input's writer).
  BufferHazards w;
  hz.record(w, true, 1, 0);
  hz.record(w, false, 2, 0);  // first consumer took queue 0
  load = {2, 0, 0, 0};
  EXPECT_EQ(pick({{&w, false}}), 1u);
}

TEST_F(QueueChoiceTest, CompletedProducerDoesNotAttract) {
  BufferHazards in;
  hz.record(in, true, 1, 3);
  refs.complete.insert(1);
  load = {1, 0, 1, 1};
  EXPECT_EQ(pick({{&in, false}}), 1u);
}

TEST_F(QueueChoiceTest, InPlaceUpdateContinuesItsChain) {
  BufferHazards a;
  hz.record(a, true, 1, 2);
  load = {0, 0, 4, 0};
  EXPECT_EQ(pick({{&a, true}}), 2u);
}

TEST_F(QueueChoiceTest, EveryInputCanContinueAChain) {
  // Not only the first input (the seed's rule): a pending producer of the
  // second one is continued.
  BufferHazards first, second;
  hz.record(second, true, 1, 3);
  load = {0, 1, 1, 1};
  EXPECT_EQ(pick({{&first, false}, {&second, false}}), 3u);
}

TEST_F(QueueChoiceTest, OverwritingWhatOneQueueStillReadsFollowsTheReaders) {
  // A model's next pass rewrites a buffer: its writer is done, its reader
  // on queue 2 still runs. Placed there, the write waits for nothing.
  BufferHazards x;
  hz.record(x, true, 1, 1);
  hz.record(x, false, 2, 2);
  refs.complete.insert(1);
  load = {0, 0, 3, 0};
  EXPECT_EQ(pick({{&x, true}}), 2u);
}

TEST_F(QueueChoiceTest, OverwritingWhatSeveralQueuesReadGoesToTheLeastLoaded) {
  BufferHazards x;
  hz.record(x, true, 1, 1);
  hz.record(x, false, 2, 2);
  hz.record(x, false, 3, 3);
  refs.complete.insert(1);
  load = {1, 0, 3, 3};
  EXPECT_EQ(pick({{&x, true}}), 1u);
}

TEST_F(QueueChoiceTest, ReadersThatAreDoneDoNotAttractAWriter) {
  BufferHazards x;
  hz.record(x, true, 1, 1);
  hz.record(x, false, 2, 2);
  refs.complete.insert(1);
  refs.complete.insert(2);
  load = {0, 1, 3, 0};
  EXPECT_EQ(pick({{&x, true}}), 0u);
}

}  // namespace
}  // namespace uvcl::sched
