#include <gtest/gtest.h>

#include "fake_refs.hpp"
#include "sched/hazards.hpp"

namespace uvcl::sched {
namespace {

using testing::FakeRefs;

struct HazardsTest : ::testing::Test {
  FakeRefs refs;
  Hazards hz{refs};
  BufferHazards buf;

  std::vector<CommandId> waits(bool write, QueueIndex q) {
    WaitList w;
    hz.collect_waits(buf, write, q, w);
    return w.to_vector();
  }
};

TEST_F(HazardsTest, ReadAfterWriteOnOtherQueueWaitsForWriter) {
  hz.record(buf, true, 1, 0);
  EXPECT_EQ(waits(false, 1), (std::vector<CommandId>{1}));
}

TEST_F(HazardsTest, ReadAfterWriteOnSameQueueNeedsNoWait) {
  hz.record(buf, true, 1, 2);
  EXPECT_TRUE(waits(false, 2).empty());
}

TEST_F(HazardsTest, CompletedWriterIsNotWaitedFor) {
  hz.record(buf, true, 1, 0);
  refs.complete.insert(1);
  EXPECT_TRUE(waits(false, 1).empty());
  EXPECT_TRUE(waits(true, 1).empty());
}

TEST_F(HazardsTest, WriteAfterReadsWaitsForEveryReaderOnOtherQueues) {
  // The seed kept only the last user: two readers on different queues, then a
  // writer on a third, waited for one reader only.
  hz.record(buf, true, 1, 0);
  hz.record(buf, false, 2, 1);
  hz.record(buf, false, 3, 2);
  EXPECT_EQ(waits(true, 3), (std::vector<CommandId>{1, 2, 3}));
}

TEST_F(HazardsTest, WriteAfterReadsSkipsReadersOnItsOwnQueue) {
  hz.record(buf, false, 2, 1);
  hz.record(buf, false, 3, 2);
  EXPECT_EQ(waits(true, 1), (std::vector<CommandId>{3}));
}

TEST_F(HazardsTest, LaterReaderOnAQueueReplacesEarlierOne) {
  hz.record(buf, false, 2, 1);
  hz.record(buf, false, 5, 1);
  EXPECT_EQ(waits(true, 0), (std::vector<CommandId>{5}));
}

TEST_F(HazardsTest, WriteAfterWriteWaitsForWriter) {
  hz.record(buf, true, 1, 0);
  EXPECT_EQ(waits(true, 1), (std::vector<CommandId>{1}));
}

TEST_F(HazardsTest, WriteClearsReaders) {
  hz.record(buf, true, 1, 0);
  hz.record(buf, false, 2, 1);
  hz.record(buf, false, 3, 2);
  hz.record(buf, true, 4, 3);
  EXPECT_EQ(waits(false, 0), (std::vector<CommandId>{4}));
  EXPECT_EQ(waits(true, 0), (std::vector<CommandId>{4}));
}

TEST_F(HazardsTest, DroppedWaitsAreReportedAsCompleted) {
  hz.record(buf, true, 1, 0);
  hz.record(buf, false, 2, 1);
  hz.record(buf, false, 3, 2);
  refs.complete.insert(1);
  refs.complete.insert(3);
  WaitList out, done;
  hz.collect_waits(buf, true, 2, out, &done);
  EXPECT_EQ(out.to_vector(), (std::vector<CommandId>{2}));
  // 3 is on the writer's own queue: ordered there, not a dropped wait.
  EXPECT_EQ(done.to_vector(), (std::vector<CommandId>{1}));
}

TEST_F(HazardsTest, UsesCompleteTracksEverySlot) {
  EXPECT_TRUE(hz.uses_complete(buf));
  hz.record(buf, true, 1, 0);
  hz.record(buf, false, 2, 1);
  EXPECT_FALSE(hz.uses_complete(buf));
  refs.complete.insert(1);
  EXPECT_FALSE(hz.uses_complete(buf));
  refs.complete.insert(2);
  EXPECT_TRUE(hz.uses_complete(buf));
}

TEST_F(HazardsTest, NoQueueSlotIsNeverTheSameQueue) {
  hz.record(buf, true, 1, kNoQueue);
  EXPECT_EQ(waits(true, kNoQueue), (std::vector<CommandId>{1}));
}

// Commands on no queue are not ordered among themselves: a writer after
// two of them that read the buffer waits for both.
TEST_F(HazardsTest, ReadersOnNoQueueKeepTheirOwnSlots) {
  hz.record(buf, false, 1, kNoQueue);
  hz.record(buf, false, 2, kNoQueue);
  hz.record(buf, false, 3, 0);
  EXPECT_EQ(waits(true, 1), (std::vector<CommandId>{1, 2, 3}));
}

TEST(WaitListTest, SortedAndDeduplicated) {
  WaitList w;
  w.add(5);
  w.add(2);
  w.add(5);
  w.add(9);
  EXPECT_EQ(w.to_vector(), (std::vector<CommandId>{2, 5, 9}));
}

}  // namespace
}  // namespace uvcl::sched
