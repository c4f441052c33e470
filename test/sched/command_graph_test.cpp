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

// Records what the graph says starts where, and what it fails.
struct RecordingSink final : FailureSink {
  std::vector<CommandId> own, failed;
  void on_failed(CommandId id, const Error&) override { failed.push_back(id); }
  void on_own_failure(CommandId id, const Error&) override { own.push_back(id); }
};

// A graph that tells a recording sink.
class CommandGraphFailureOrigin : public ::testing::Test {
 protected:
  MapNodes nodes;
  RecordingSink sink;
  CommandGraph g{nodes, &sink};
};

// A failure is told as its own once, where it starts; what it fails
// downstream is failed but not told.
TEST_F(CommandGraphFailureOrigin, AFailureIsOwnOnlyWhereItStarts) {
  add_pair(g);
  g.event_done(1, boom());
  g.event_done(2, Error{Status::KernelSync, "the driver failed it for its wait"});
  EXPECT_EQ(sink.own, (std::vector<CommandId>{1}));
  EXPECT_EQ(sink.failed, (std::vector<CommandId>{1, 2}));
  EXPECT_EQ(g.size(), 0u);
}

// The driver fails a command that waited on a failed producer, and its event
// is read first: its failure is held, and the producer's failure, read
// after, is the one told; the dependent gets it as its downstream.
TEST_F(CommandGraphFailureOrigin, ADependentReadBeforeItsFailedProducerIsDownstream) {
  add_pair(g);
  g.event_done(2, Error{Status::KernelSync, "the driver failed it for its wait"});
  EXPECT_TRUE(sink.own.empty()) << "told before its producer settled";
  EXPECT_TRUE(g.take_outcomes().empty());
  g.event_done(1, boom());
  EXPECT_EQ(sink.own, (std::vector<CommandId>{1}));
  auto o = g.take_outcomes();
  ASSERT_EQ(ids(o), (std::vector<CommandId>{1, 2}));
  ASSERT_TRUE(o[1].error);
  EXPECT_NE(o[1].error->message.find("failed command 1"), std::string::npos) << o[1].error->message;
  EXPECT_EQ(g.size(), 0u);
}

// Held, and every producer succeeds: the failure is the command's own,
// told then, and passed on to its dependents.
TEST_F(CommandGraphFailureOrigin, AHeldFailureIsOwnOnceItsProducersSucceed) {
  add_diamond(g);
  g.event_done(4, boom());
  g.event_done(2, std::nullopt);
  g.event_done(1, std::nullopt);
  EXPECT_TRUE(sink.own.empty()) << "told before producer 3 settled";
  g.event_done(3, std::nullopt);
  EXPECT_EQ(sink.own, (std::vector<CommandId>{4}));
  auto o = g.take_outcomes();
  ASSERT_EQ(ids(o), (std::vector<CommandId>{1, 2, 3, 4}));
  ASSERT_TRUE(o[3].error);
  EXPECT_EQ(o[3].error->message, "boom");
  EXPECT_EQ(g.size(), 0u);
}

// The fast path (complete) settles a held dependent the same way.
TEST_F(CommandGraphFailureOrigin, CompleteSettlesAHeldDependent) {
  add_pair(g);
  g.event_done(2, boom());
  EXPECT_TRUE(g.complete(nodes.nodes[1]));
  EXPECT_EQ(sink.own, (std::vector<CommandId>{2}));
  auto o = g.take_outcomes();
  ASSERT_EQ(ids(o), (std::vector<CommandId>{2}));
  EXPECT_TRUE(o[0].error);
  EXPECT_EQ(g.size(), 0u);
}

// Report::Never: failed, its dependents too, but never told as own, held or
// not.
TEST_F(CommandGraphFailureOrigin, ReportNeverIsNotTold) {
  add_pair(g);
  g.event_done(2, boom(), CommandGraph::Report::Never);
  g.event_done(1, boom(), CommandGraph::Report::Never);
  EXPECT_TRUE(sink.own.empty());
  EXPECT_EQ(sink.failed, (std::vector<CommandId>{1, 2}));  // 2: held, then downstream of 1
  EXPECT_EQ(ids(g.take_outcomes()), (std::vector<CommandId>{1, 2}));
  EXPECT_EQ(g.size(), 0u);
}

// 1 and 2 independent; 3 reads 2's output and waits for 1 (another queue,
// for the order): all submitted.
void add_waiter(CommandGraph& g, MapNodes& nodes) {
  const CommandId p2[] = {2};
  const CommandId w1[] = {1};
  g.add(1, {});
  g.add(2, {});
  g.add(3, p2);
  for (CommandId id = 1; id <= 3; ++id) g.submitted(id);
  g.waits_for(3, nodes.nodes[3], w1);
}

// The driver fails the waiter for its failed wait, and the waiter's event is
// read first: the wait's failure is the one told, and the waiter's names it.
TEST_F(CommandGraphFailureOrigin, AWaitersFailureIsExplainedByItsFailedWait) {
  add_waiter(g, nodes);
  g.event_done(3, Error{Status::KernelSync, "the driver failed it for its wait"});
  g.event_done(2, std::nullopt);
  EXPECT_TRUE(sink.own.empty()) << "told before its wait settled";
  g.event_done(1, boom());
  EXPECT_EQ(sink.own, (std::vector<CommandId>{1}));
  auto o = g.take_outcomes();
  ASSERT_EQ(ids(o), (std::vector<CommandId>{2, 1, 3}));
  ASSERT_TRUE(o[2].error);
  EXPECT_NE(o[2].error->message.find("waited for failed command 1"), std::string::npos) << o[2].error->message;
  EXPECT_EQ(g.size(), 0u);
}

// The same, with the wait's failure read first: the waiter's, read after,
// is not told either.
TEST_F(CommandGraphFailureOrigin, AWaitersFailureReadAfterItsFailedWaitIsNotTold) {
  add_waiter(g, nodes);
  g.event_done(1, boom());
  g.event_done(2, std::nullopt);
  g.event_done(3, Error{Status::KernelSync, "the driver failed it for its wait"});
  EXPECT_EQ(sink.own, (std::vector<CommandId>{1}));
  auto o = g.take_outcomes();
  ASSERT_EQ(ids(o), (std::vector<CommandId>{1, 2, 3}));
  EXPECT_TRUE(o[2].error);
  EXPECT_EQ(g.size(), 0u);
}

// A wait only orders: the waiter that ran fine after a failed wait succeeds
// (its data does not come from it)...
TEST_F(CommandGraphFailureOrigin, AWaiterThatRanAfterAFailedWaitSucceeds) {
  add_waiter(g, nodes);
  g.event_done(1, boom());
  g.event_done(2, std::nullopt);
  g.event_done(3, std::nullopt);
  auto o = g.take_outcomes();
  ASSERT_EQ(ids(o), (std::vector<CommandId>{1, 2, 3}));
  EXPECT_FALSE(o[2].error) << o[2].error->message;
}

// ... and one that fails after its wait succeeded fails on its own.
TEST_F(CommandGraphFailureOrigin, AWaiterThatFailsAfterItsWaitSucceededFailsOnItsOwn) {
  add_waiter(g, nodes);
  g.event_done(3, boom());
  g.event_done(2, std::nullopt);
  g.event_done(1, std::nullopt);
  EXPECT_EQ(sink.own, (std::vector<CommandId>{3}));
  auto o = g.take_outcomes();
  ASSERT_EQ(ids(o), (std::vector<CommandId>{2, 1, 3}));
  ASSERT_TRUE(o[2].error);
  EXPECT_EQ(o[2].error->message, "boom");
  EXPECT_EQ(g.size(), 0u);
}

}  // namespace
}  // namespace uvcl::sched
