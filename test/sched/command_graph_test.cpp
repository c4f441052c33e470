#include <gtest/gtest.h>

#include <algorithm>
#include <unordered_map>

#include "sched/command_graph.hpp"

namespace uvcl::sched {
namespace {

using Outcomes = std::vector<CommandGraph::Outcome>;

// Nodes by id, made on first use (the engine keeps them in its records).
struct MapNodes final : GraphNodes {
  std::unordered_map<CommandId, GraphNode> nodes;
  GraphNode* find(CommandId id) override { return &nodes[id]; }
};

std::vector<CommandId> ids(const Outcomes& o) {
  std::vector<CommandId> out;
  for (auto& x : o) out.push_back(x.id);
  return out;
}

Error boom() { return Error{Status::KernelLaunch, "boom"}; }

// 1 -> 2, both submitted.
void add_pair(CommandGraph& g) {
  const CommandId p1[] = {1};
  g.add(1, {});
  g.add(2, p1);
  g.submitted(1);
  g.submitted(2);
}

// 1 -> {2, 3} -> 4, every one submitted.
void add_diamond(CommandGraph& g) {
  const CommandId p1[] = {1};
  const CommandId p23[] = {2, 3};
  g.add(1, {});
  g.add(2, p1);
  g.add(3, p1);
  g.add(4, p23);
  for (CommandId id = 1; id <= 4; ++id) g.submitted(id);
}

TEST(CommandGraphTest, SuccessNeedsOwnEventAndProducers) {
  MapNodes nodes;
  CommandGraph g{nodes};
  g.add(1, {});
  g.submitted(1);
  const CommandId p[] = {1};
  g.add(2, p);
  g.submitted(2);
  g.event_done(2, std::nullopt);  // done, but its producer is not
  EXPECT_TRUE(g.take_outcomes().empty());
  EXPECT_EQ(g.state(2), DependencyState::Complete);
  g.event_done(1, std::nullopt);
  auto o = g.take_outcomes();
  EXPECT_EQ(ids(o), (std::vector<CommandId>{1, 2}));
  EXPECT_FALSE(o[0].error);
  EXPECT_FALSE(o[1].error);
  EXPECT_EQ(g.size(), 0u);
}

TEST(CommandGraphTest, FailurePropagatesDownstreamTransitively) {
  MapNodes nodes;
  CommandGraph g{nodes};
  g.add(1, {});
  g.submitted(1);
  const CommandId p1[] = {1};
  g.add(2, p1);
  g.submitted(2);
  const CommandId p2[] = {2};
  g.add(3, p2);
  g.submitted(3);
  g.add(4, {});  // independent
  g.submitted(4);
  g.event_done(2, std::nullopt);
  g.event_done(1, boom());
  auto o = g.take_outcomes();
  ASSERT_EQ(ids(o), (std::vector<CommandId>{1, 2, 3}));
  for (auto& x : o) {
    ASSERT_TRUE(x.error);
    EXPECT_EQ(x.error->status, Status::KernelLaunch);
    EXPECT_NE(x.error->message.find("boom"), std::string::npos);
  }
  EXPECT_NE(o[2].error->message.find("failed command 1"), std::string::npos);
  // 3 still runs on the device: it stays until its event is done.
  EXPECT_EQ(g.state(3), DependencyState::Failed);
  g.event_done(3, std::nullopt);
  EXPECT_FALSE(g.state(3));
  EXPECT_TRUE(g.take_outcomes().empty());  // one outcome per command
  g.event_done(4, std::nullopt);
  o = g.take_outcomes();
  ASSERT_EQ(ids(o), (std::vector<CommandId>{4}));
  EXPECT_FALSE(o[0].error);
  EXPECT_EQ(g.size(), 0u);
}

TEST(CommandGraphTest, AddingAfterAProducerFailedFailsAtOnce) {
  MapNodes nodes;
  CommandGraph g{nodes};
  g.add(1, {});
  g.submitted(1);
  g.fail(1, boom());
  (void)g.take_outcomes();
  const CommandId p[] = {1};
  g.add(2, p);
  auto o = g.take_outcomes();
  ASSERT_EQ(ids(o), (std::vector<CommandId>{2}));
  ASSERT_TRUE(o[0].error);
  EXPECT_FALSE(g.state(2));  // never submitted: retired at once
}

TEST(CommandGraphTest, PendingFailureRetiresAtOnce) {
  MapNodes nodes;
  CommandGraph g{nodes};
  g.add(5, {});
  g.fail(5, boom());
  EXPECT_FALSE(g.state(5));
  auto o = g.take_outcomes();
  ASSERT_EQ(o.size(), 1u);
  EXPECT_TRUE(o[0].error);
}

TEST(CommandGraphTest, FailingTwiceGivesOneOutcome) {
  MapNodes nodes;
  CommandGraph g{nodes};
  g.add(1, {});
  g.submitted(1);
  g.fail(1, boom());
  g.fail(1, boom());
  g.event_done(1, boom());
  EXPECT_EQ(g.take_outcomes().size(), 1u);
  EXPECT_EQ(g.size(), 0u);
}

TEST(CommandGraphTest, UnknownProducersAreSettled) {
  MapNodes nodes;
  CommandGraph g{nodes};
  const CommandId p[] = {42};
  g.add(1, p);
  g.submitted(1);
  g.event_done(1, std::nullopt);
  EXPECT_EQ(ids(g.take_outcomes()), (std::vector<CommandId>{1}));
}

TEST(CommandGraphTest, AddSaysWhetherTheCommandSurvived) {
  MapNodes nodes;
  CommandGraph g{nodes};
  EXPECT_TRUE(g.add(1, {}));
  g.submitted(1);
  g.fail(1, boom());
  const CommandId p[] = {1};
  EXPECT_FALSE(g.add(2, p));  // its producer failed: failed and retired with it
  EXPECT_FALSE(g.state(2));
  const CommandId unknown[] = {42};
  EXPECT_TRUE(g.add(3, unknown));
}

// 1 -> {2, 3} -> 4: settling 1 reaches 4 through both, and each command
// yields one outcome, 4 only after both of its producers.
TEST(CommandGraphTest, ADiamondSettlesEachCommandOnce) {
  MapNodes nodes;
  CommandGraph g{nodes};
  add_diamond(g);
  for (CommandId id = 4; id >= 2; --id) g.event_done(id, std::nullopt);
  EXPECT_TRUE(g.take_outcomes().empty());
  g.event_done(1, std::nullopt);
  auto got = ids(g.take_outcomes());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got.front(), 1u);
  EXPECT_EQ(got.back(), 4u);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<CommandId>{1, 2, 3, 4}));
  EXPECT_EQ(g.size(), 0u);
}

TEST(CommandGraphTest, CompleteLeavesItsOwnOutcomeToTheCaller) {
  MapNodes nodes;
  CommandGraph g{nodes};
  add_pair(g);
  EXPECT_FALSE(g.complete(*nodes.find(2)));  // its producer still runs: its outcome comes queued
  EXPECT_EQ(g.state(2), DependencyState::Complete);
  EXPECT_TRUE(g.take_outcomes().empty());
  EXPECT_TRUE(g.complete(*nodes.find(1)));  // settled at once: the caller gives its outcome
  const Outcomes o = g.take_outcomes();
  EXPECT_EQ(ids(o), (std::vector<CommandId>{2}));
  EXPECT_FALSE(o[0].error);
  EXPECT_EQ(g.size(), 0u);
}

TEST(CommandGraphTest, CompleteSettlesADiamondOnce) {
  MapNodes nodes;
  CommandGraph g{nodes};
  add_diamond(g);
  for (CommandId id = 4; id >= 2; --id) EXPECT_FALSE(g.complete(*nodes.find(id)));
  EXPECT_TRUE(g.complete(*nodes.find(1)));
  auto got = ids(g.take_outcomes());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got.back(), 4u);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<CommandId>{2, 3, 4}));
  EXPECT_EQ(g.size(), 0u);
}

TEST(CommandGraphTest, CompleteAfterAProducerFailedLeavesTheFailure) {
  MapNodes nodes;
  CommandGraph g{nodes};
  add_pair(g);
  EXPECT_FALSE(g.complete(*nodes.find(2)));
  g.event_done(1, boom());
  const Outcomes o = g.take_outcomes();
  EXPECT_EQ(ids(o), (std::vector<CommandId>{1, 2}));
  EXPECT_TRUE(o[0].error);
  EXPECT_TRUE(o[1].error);
  EXPECT_EQ(g.size(), 0u);
}

TEST(CommandGraphTest, LongChainsSettleWithoutRecursion) {
  MapNodes nodes;
  CommandGraph g{nodes};
  constexpr CommandId n = 200000;
  for (CommandId i = 1; i <= n; ++i) {
    const CommandId p[] = {i - 1};
    g.add(i, i == 1 ? std::span<const CommandId>{} : std::span<const CommandId>(p));
    g.submitted(i);
  }
  for (CommandId i = n; i >= 2; --i) g.event_done(i, std::nullopt);
  EXPECT_TRUE(g.take_outcomes().empty());
  g.event_done(1, std::nullopt);
  EXPECT_EQ(g.take_outcomes().size(), n);
  EXPECT_EQ(g.size(), 0u);
}

TEST(CommandGraphTest, LongChainsFailWithoutRecursion) {
  MapNodes nodes;
  CommandGraph g{nodes};
  constexpr CommandId n = 200000;
  for (CommandId i = 1; i <= n; ++i) {
    const CommandId p[] = {i - 1};
    g.add(i, i == 1 ? std::span<const CommandId>{} : std::span<const CommandId>(p));
    g.submitted(i);
    if (i > 1) g.event_done(i, std::nullopt);
  }
  g.event_done(1, boom());
  auto o = g.take_outcomes();
  EXPECT_EQ(o.size(), n);
  EXPECT_EQ(g.size(), 0u);
}

}  // namespace
}  // namespace uvcl::sched
