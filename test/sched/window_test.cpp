#include <gtest/gtest.h>

#include "sched/window.hpp"

namespace uvcl::sched {
namespace {

TEST(WindowTest, ReportsFullAtCapacity) {
  Window<int> w(3);
  EXPECT_FALSE(w.push(1));
  EXPECT_FALSE(w.push(2));
  EXPECT_TRUE(w.push(3));
  EXPECT_EQ(w.size(), 3u);
}

TEST(WindowTest, TakeReturnsProgramOrderAndEmpties) {
  Window<int> w(100);
  for (int i = 0; i < 5; ++i) w.push(i);
  EXPECT_EQ(w.take(), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(w.empty());
  EXPECT_FALSE(w.push(9));  // made while the batch is submitted
  w.end_batch();
  EXPECT_EQ(w.take(), (std::vector<int>{9}));
}

// Sync points submit windows of one command: taking one must not allocate.
// The window and the batch trade their buffers.
TEST(WindowTest, TakingReusesTwoBuffers) {
  Window<int> w(100);
  w.push(1);
  const int* first = w.take().data();
  w.end_batch();
  w.push(2);
  const int* second = w.take().data();
  w.end_batch();
  w.push(3);
  EXPECT_EQ(w.take().data(), first);
  w.end_batch();
  w.push(4);
  EXPECT_EQ(w.take().data(), second);
  EXPECT_NE(first, second);
}

TEST(WindowTest, CapacityZeroBehavesAsOne) {
  Window<int> w(0);
  EXPECT_EQ(w.capacity(), 1u);
  EXPECT_TRUE(w.push(1));
}

}  // namespace
}  // namespace uvcl::sched
