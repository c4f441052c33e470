#include <gtest/gtest.h>

#include "sched/command_store.hpp"

namespace uvcl::sched {
namespace {

struct Rec {
  int value = 0;
  bool final = false;
};

TEST(CommandStoreTest, IdsAreDenseAndDroppedInOrder) {
  CommandStore<Rec> s;
  EXPECT_EQ(s.next_id(), 1u);
  for (int i = 1; i <= 4; ++i) s.add().value = i * 10;
  EXPECT_EQ(s.next_id(), 5u);
  ASSERT_NE(s.find(3), nullptr);
  EXPECT_EQ(s.find(3)->value, 30);
  EXPECT_EQ(s.find(0), nullptr);
  EXPECT_EQ(s.find(5), nullptr);
  Rec& two = *s.find(2);
  s.find(2)->final = true;
  s.drop_front_while([](const Rec& r) { return r.final; });
  EXPECT_EQ(s.base(), 1u) << "record 1 is not final: nothing after it may go";
  s.find(1)->final = true;
  s.add().value = 50;  // a reference to another record stays valid
  EXPECT_EQ(two.value, 20);
  s.drop_front_while([](const Rec& r) { return r.final; });
  EXPECT_EQ(s.base(), 3u);
  EXPECT_EQ(s.find(2), nullptr);
  EXPECT_EQ(s.find(5)->value, 50);
  EXPECT_EQ(s.size(), 3u);
}

}  // namespace
}  // namespace uvcl::sched
