#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "sched/handle_table.hpp"

namespace uvcl::sched {
namespace {

struct TableRec {
  int value = 0;
  std::vector<int> held;
};

using Table = HandleTable<TableRec>;
constexpr std::uint64_t kTag = std::uint64_t{5} << 40 | std::uint64_t{1} << 39;

TEST(HandleTableTest, HandlesCarryTheTagAndNameTheirRecord) {
  Table t(kTag);
  auto a = t.add();
  auto b = t.add();
  ASSERT_NE(a.record, nullptr);
  ASSERT_NE(b.record, nullptr);
  EXPECT_NE(a.handle, b.handle);
  EXPECT_EQ(a.handle & ~Table::kIndexMask, kTag);
  a.record->value = 1;
  b.record->value = 2;
  EXPECT_EQ(t.find(a.handle), a.record);
  EXPECT_EQ(t.find(b.handle)->value, 2);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.find(0), nullptr);
  EXPECT_EQ(t.find(a.handle & Table::kIndexMask), nullptr) << "a handle without the tag";
  EXPECT_EQ(t.find((a.handle & Table::kIndexMask) | std::uint64_t{6} << 40 | std::uint64_t{1} << 39), nullptr)
      << "another table's tag";
  EXPECT_EQ(t.find(kTag | 5), nullptr) << "a slot never handed out";
}

// An erased record's slot is reused under a new handle: the old one names
// nothing, and the new record starts fresh.
TEST(HandleTableTest, AReusedSlotDoesNotAnswerToTheOldHandle) {
  Table t(kTag);
  auto a = t.add();
  a.record->value = 7;
  a.record->held = {1, 2, 3};
  TableRec* where = a.record;
  t.erase(a.handle);
  EXPECT_EQ(t.find(a.handle), nullptr);
  EXPECT_TRUE(t.empty());
  auto b = t.add();
  EXPECT_EQ(b.record, where) << "the last freed slot is reused first";
  EXPECT_NE(b.handle, a.handle);
  EXPECT_EQ(t.find(a.handle), nullptr);
  EXPECT_EQ(b.record->value, 0);
  EXPECT_TRUE(b.record->held.empty());
  t.erase(a.handle);  // stale: ignored
  EXPECT_EQ(t.find(b.handle), b.record);
}

// Records stay where they are while the table grows over many chunks.
TEST(HandleTableTest, RecordsDoNotMove) {
  Table t(kTag);
  auto first = t.add();
  first.record->value = -1;
  std::vector<Table::Added> all;
  for (std::size_t i = 0; i < Table::kChunk * 3 + 5; ++i) {
    all.push_back(t.add());
    all.back().record->value = static_cast<int>(i);
  }
  EXPECT_EQ(t.find(first.handle), first.record);
  EXPECT_EQ(first.record->value, -1);
  for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(t.find(all[i].handle)->value, static_cast<int>(i));
  std::size_t seen = 0;
  t.for_each([&](std::uint64_t h, TableRec& r) {
    EXPECT_EQ(t.find(h), &r);
    ++seen;
  });
  EXPECT_EQ(seen, t.size());
}

// A slot whose generations are used up is never handed out again: no
// handle ever names two records.
TEST(HandleTableTest, ASlotIsRetiredBeforeItsGenerationsWrap) {
  Table t(kTag);
  std::set<std::uint64_t> handles;
  auto first = t.add();
  handles.insert(first.handle);
  t.erase(first.handle);
  for (std::uint64_t i = 1; i < Table::kGenerations; ++i) {
    auto a = t.add();
    ASSERT_EQ(a.record, first.record) << "reuse " << i;
    ASSERT_TRUE(handles.insert(a.handle).second) << "handle repeated at reuse " << i;
    t.erase(a.handle);
  }
  auto next = t.add();
  EXPECT_NE(next.record, first.record) << "the slot's generations are used up";
  EXPECT_TRUE(handles.insert(next.handle).second);
  for (std::uint64_t h : handles) {
    if (h != next.handle) {
      EXPECT_EQ(t.find(h), nullptr);
    }
  }
}

}  // namespace
}  // namespace uvcl::sched
