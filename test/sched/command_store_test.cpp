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

// Records cross chunk boundaries and chunks are reused; ids, contents and
// references stay right, and a reused slot starts fresh.
TEST(CommandStoreTest, ManyRecordsThroughReusedChunks) {
  CommandStore<Rec> s;
  constexpr int kTotal = static_cast<int>(CommandStore<Rec>::kChunk) * 5 + 17;
  int next_drop = 1;
  for (int i = 1; i <= kTotal; ++i) {
    Rec& r = s.add();
    EXPECT_EQ(r.value, 0) << "a reused slot kept old contents";
    EXPECT_FALSE(r.final);
    r.value = i;
    if (i % 3 == 0) {  // finish everything added so far, in order
      for (; next_drop <= i; ++next_drop) s.find(static_cast<CommandId>(next_drop))->final = true;
      s.drop_front_while([](const Rec& x) { return x.final; });
      EXPECT_EQ(s.base(), static_cast<CommandId>(i + 1));
      EXPECT_EQ(s.size(), 0u);
    }
  }
  EXPECT_EQ(s.next_id(), static_cast<CommandId>(kTotal + 1));
  for (CommandId id = s.base(); id < s.next_id(); ++id) EXPECT_EQ(s.find(id)->value, static_cast<int>(id));
}

// A window of records several chunks long slides over many chunks: the list
// of chunks drops its emptied front now and then, and neither lookups nor
// references to the live records notice.
TEST(CommandStoreTest, ASlidingWindowOfLiveChunks) {
  CommandStore<Rec> s;
  constexpr std::size_t kLive = CommandStore<Rec>::kChunk * 3 + 5;
  constexpr int kTotal = static_cast<int>(CommandStore<Rec>::kChunk) * 40;
  std::vector<Rec*> refs;  // refs[id - 1]: the record's address when added
  for (int i = 1; i <= kTotal; ++i) {
    Rec& r = s.add();
    r.value = i;
    refs.push_back(&r);
    if (s.size() > kLive) {
      s.find(s.base())->final = true;
      s.drop_front_while([](const Rec& x) { return x.final; });
    }
    if (i % 97 == 0) {
      for (CommandId id = s.base(); id < s.next_id(); id += 31) {
        ASSERT_EQ(s.find(id), refs[id - 1]) << "record " << id << " moved";
        ASSERT_EQ(s.find(id)->value, static_cast<int>(id));
      }
    }
  }
  EXPECT_EQ(s.size(), kLive);
  EXPECT_EQ(s.find(s.base() - 1), nullptr);
  EXPECT_EQ(s.find(s.next_id() - 1)->value, kTotal);
}

}  // namespace
}  // namespace uvcl::sched
