#include "sched/scratch_list.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace uvcl::sched {
namespace {

std::vector<int> scratch_contents(const ScratchList<int, 4>& l) { return {l.span().begin(), l.span().end()}; }

TEST(ScratchListTest, StartsEmpty) {
  ScratchList<int, 4> l;
  EXPECT_TRUE(l.span().empty());
}

TEST(ScratchListTest, KeepsOrderInlineAndPastTheInlineSize) {
  ScratchList<int, 4> l;
  std::vector<int> want;
  for (int i = 0; i < 11; ++i) {
    l.push_back(i * 3);
    want.push_back(i * 3);
    ASSERT_EQ(scratch_contents(l), want) << "after " << i + 1 << " entries";
  }
}

TEST(ScratchListTest, ExactlyTheInlineSize) {
  ScratchList<int, 4> l;
  for (int i = 1; i <= 4; ++i) l.push_back(i);
  EXPECT_EQ(scratch_contents(l), (std::vector<int>{1, 2, 3, 4}));
  l.push_back(5);
  EXPECT_EQ(scratch_contents(l), (std::vector<int>{1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace uvcl::sched
