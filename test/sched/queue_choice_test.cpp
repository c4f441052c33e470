#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "fake_refs.hpp"
#include "sched/cost_table.hpp"
#include "sched/queue_choice.hpp"

namespace uvcl::sched {
namespace {

using testing::FakeRefs;

constexpr std::uint64_t kUs = 1000;

// Commands placed one after another on 4 queues, nothing completing: what
// the engine does within one window.
struct Placer {
  FakeRefs refs;
  Hazards hz{refs};
  std::vector<std::uint64_t> free_ns = std::vector<std::uint64_t>(4, 0);
  std::vector<std::uint32_t> load = std::vector<std::uint32_t>(4, 0);
  Timelines timelines() const { return {free_ns, load}; }
  Estimate est{100 * kUs, 20 * kUs, 5 * kUs};
  CommandId next = 1;

  Placement where(const std::vector<AccessView>& a) {
    Deps deps;
    pending_deps(a, refs, deps);
    return earliest_finish(timelines(), deps.span(), est);
  }
  // Places, then records the command as the engine does.
  Placement submit(const std::vector<AccessView>& a) {
    const Placement p = where(a);
    for (const AccessView& v : a) hz.record(*const_cast<BufferHazards*>(v.hazards), v.write, next, p.queue, p.finish_ns);
    free_ns[p.queue] = p.finish_ns;
    ++load[p.queue];
    ++next;
    return p;
  }
};

struct QueueChoiceTest : ::testing::Test, Placer {
  // A consumer's other input, produced last on queue 2, its queue's last
  // command too, ending at `at`.
  Deps chain_on_queue_2_ending(std::uint64_t at) {
    free_ns = {0, 0, at, 0};
    Deps d;
    d.push_back(Dep{9, 2, at});
    return d;
  }
};

TEST_F(QueueChoiceTest, FreshWorkGoesToTheQueueFreeFirst) {
  BufferHazards b;
  free_ns = {300 * kUs, 150 * kUs, 0, 200 * kUs};
  const Placement p = where({{&b, true}});
  EXPECT_EQ(p.queue, 2u);
  EXPECT_EQ(p.finish_ns, est.now_ns + est.cost_ns);
}

TEST_F(QueueChoiceTest, TiesGoToTheLowestIndex) {
  BufferHazards b;
  free_ns = {300 * kUs, 0, 0, 0};
  EXPECT_EQ(where({{&b, true}}).queue, 1u);
}

TEST_F(QueueChoiceTest, AQueueStillRunningPastItsEstimateLosesATieToAnIdleOne) {
  BufferHazards b;
  free_ns = {est.now_ns - 50 * kUs, 0, 0, 0};  // estimated done, not seen done
  load = {1, 0, 0, 0};
  EXPECT_EQ(where({{&b, true}}).queue, 1u);
}

TEST_F(QueueChoiceTest, WithEveryEstimatePassedTheNewestProducersQueueWins) {
  // Two producers still running past their estimates (a slow host): the
  // one submitted last is expected to end last, so the consumer waits on
  // the other one.
  BufferHazards x, y;
  hz.record(x, true, 1, 0, est.now_ns - 90 * kUs);
  hz.record(y, true, 2, 1, est.now_ns - 60 * kUs);
  load = {1, 1, 0, 0};
  EXPECT_EQ(where({{&y, false}, {&x, true}}).queue, 1u);
}

TEST_F(QueueChoiceTest, AWaitMustSaveMoreThanItCosts) {
  // The consumer's chain queue is busy 3 us longer than another queue:
  // moving saves 3 us of device time but costs a wait (5 us) of the host's.
  BufferHazards in, out;
  hz.record(in, true, 1, 1, est.now_ns);
  free_ns = {0, est.now_ns + 3 * kUs, 0, 0};
  load = {0, 1, 0, 0};
  EXPECT_EQ(where({{&in, false}, {&out, true}}).queue, 1u);
}

TEST_F(QueueChoiceTest, ACommandWaitedForTwiceCountsAsOneWait) {
  // It wrote both inputs: one wait elsewhere, not two.
  BufferHazards a, b, out;
  hz.record(a, true, 1, 0, est.now_ns + 40 * kUs);
  hz.record(b, true, 1, 0, est.now_ns + 40 * kUs);
  Deps deps;
  pending_deps(std::vector<AccessView>{{&a, false}, {&b, false}, {&out, true}}, refs, deps);
  EXPECT_EQ(deps.size(), 1u);
  // Queue 0 holds 16 us more after it: moving saves more than one wait costs.
  free_ns = {est.now_ns + 56 * kUs, 0, 0, 0};
  load = {2, 0, 0, 0};
  EXPECT_EQ(where({{&a, false}, {&b, false}, {&out, true}}).queue, 1u);
}

TEST_F(QueueChoiceTest, AChainStaysOnItsQueue) {
  BufferHazards x, y, z;
  const Placement first = submit({{&x, false}, {&y, true}});
  const Placement second = submit({{&y, false}, {&z, true}});
  EXPECT_EQ(second.queue, first.queue);  // elsewhere it would wait across queues
  EXPECT_EQ(second.finish_ns, first.finish_ns + est.cost_ns);
}

TEST_F(QueueChoiceTest, FanOutSpreadsAndFanInJoinsWithoutWaitingLonger) {
  BufferHazards w, o[4], s;
  submit({{&w, true}});  // the input's producer, queue 0
  std::set<QueueIndex> used;
  for (BufferHazards& oi : o) used.insert(submit({{&w, false}, {&oi, true}}).queue);
  EXPECT_EQ(used.size(), 4u);  // one consumer per queue: they run side by side
  const Placement join = submit({{&o[0], false}, {&o[1], false}, {&o[2], false}, {&o[3], false}, {&s, true}});
  // The branches off queue 0 wait once for the producer; the join waits
  // once more for the branches on other queues, whichever queue it takes.
  EXPECT_EQ(join.finish_ns, est.now_ns + 3 * est.cost_ns + 2 * est.wait_ns);
}

TEST_F(QueueChoiceTest, ABusyProducerQueueSendsTheNextConsumerElsewhere) {
  // The second reader of one weight buffer does not pile onto the
  // producer's queue (the seed sent every reader after the first input's
  // writer there).
  BufferHazards w, a, b;
  const Placement prod = submit({{&w, true}});
  const Placement first = submit({{&w, false}, {&a, true}});
  const Placement second = submit({{&w, false}, {&b, true}});
  EXPECT_EQ(first.queue, prod.queue);
  EXPECT_NE(second.queue, prod.queue);
}

TEST_F(QueueChoiceTest, AShortWaitIsNotWorthALongQueue) {
  BufferHazards in, out;
  hz.record(in, true, 1, 3, est.now_ns + 10 * kUs);
  free_ns = {0, 0, 0, est.now_ns + 400 * kUs};  // queue 3 holds much more after the producer
  EXPECT_NE(where({{&in, false}, {&out, true}}).queue, 3u);
}

TEST_F(QueueChoiceTest, ACompletedProducerDoesNotAttract) {
  BufferHazards in;
  hz.record(in, true, 1, 3, est.now_ns + 50 * kUs);
  refs.complete.insert(1);
  free_ns = {est.now_ns + 10 * kUs, 0, 0, 0};
  EXPECT_EQ(where({{&in, false}}).queue, 1u);
}

TEST_F(QueueChoiceTest, EveryInputCanContinueAChain) {
  BufferHazards first, second;
  hz.record(second, true, 1, 3, est.now_ns + 30 * kUs);
  free_ns = {0, 0, 0, est.now_ns + 30 * kUs};
  EXPECT_EQ(where({{&first, false}, {&second, false}}).queue, 3u);
}

TEST_F(QueueChoiceTest, OverwritingWhatOneQueueStillReadsFollowsTheReaders) {
  // A model's next pass rewrites a buffer: its writer is done, its reader
  // on queue 2 still runs. Placed there, the write waits for nothing.
  BufferHazards x;
  hz.record(x, true, 1, 1, est.now_ns);
  hz.record(x, false, 2, 2, est.now_ns + 20 * kUs);
  refs.complete.insert(1);
  free_ns = {0, 0, est.now_ns + 20 * kUs, 0};
  EXPECT_EQ(where({{&x, true}}).queue, 2u);
}

TEST_F(QueueChoiceTest, AWriteWaitsForReadersOnEveryQueue) {
  BufferHazards x;
  hz.record(x, true, 1, 1, est.now_ns);
  hz.record(x, false, 2, 2, est.now_ns + 20 * kUs);
  hz.record(x, false, 3, 3, est.now_ns + 60 * kUs);
  refs.complete.insert(1);
  const Placement p = where({{&x, true}});
  EXPECT_EQ(p.queue, 3u);  // after the last reader, with no wait for it
  EXPECT_EQ(p.finish_ns, est.now_ns + 60 * kUs + est.cost_ns);
}

TEST_F(QueueChoiceTest, WorkOnNoQueueIsAlwaysWaitedForAcrossQueues) {
  BufferHazards x;
  hz.record(x, true, 1, kNoQueue, est.now_ns + 10 * kUs);
  const Placement p = where({{&x, false}});
  EXPECT_EQ(p.queue, 0u);
  EXPECT_EQ(p.finish_ns, est.now_ns + 10 * kUs + est.wait_ns + est.cost_ns);
}

TEST_F(QueueChoiceTest, FreshWorkGoesOnItsConsumersChain) {
  // The consumer continues a chain on queue 2 (its other input's producer
  // ends there, about now): the fresh producer placed there too spares the
  // consumer a wait across queues.
  const Deps consumer_deps = chain_on_queue_2_ending(est.now_ns + 1 * kUs);
  est.cost_ns = 2 * kUs;  // a small producer: waiting costs more than it runs
  const Placement p = earliest_finish_for_consumer(timelines(), est, consumer_deps.span(), 20 * kUs);
  EXPECT_EQ(p.queue, 2u);
  // Alone it would go to the queue free first.
  EXPECT_EQ(earliest_finish(timelines(), {}, est).queue, 0u);
}

TEST_F(QueueChoiceTest, ALongProducerRunsBesideItsConsumersChain) {
  // The chain's queue is busy for 100 us: the producer, run beside it
  // meanwhile, saves the consumer more than the wait costs.
  const Deps consumer_deps = chain_on_queue_2_ending(est.now_ns + 100 * kUs);
  est.cost_ns = 200 * kUs;
  EXPECT_EQ(earliest_finish_for_consumer(timelines(), est, consumer_deps.span(), 20 * kUs).queue, 0u);
}

TEST_F(QueueChoiceTest, TheSameInputsGiveTheSameSchedule) {
  const auto run = [] {
    Placer t;
    std::vector<BufferHazards> bufs(12);
    std::mt19937 rng(7);
    std::vector<QueueIndex> queues;
    for (int i = 0; i < 60; ++i) {
      std::vector<AccessView> a;
      a.push_back({&bufs[rng() % bufs.size()], false});
      a.push_back({&bufs[rng() % bufs.size()], true});
      queues.push_back(t.submit(a).queue);
    }
    return queues;
  };
  EXPECT_EQ(run(), run());
}

// A layered random graph placed over 4 queues: every pair of commands that
// touch one buffer, one of them writing, stays in program order — on one
// queue, or through the waits collect_waits gives (directly or through
// other commands' waits). And the graph's independent work spreads.
TEST_F(QueueChoiceTest, ARandomGraphKeepsProgramOrderAndSpreads) {
  std::mt19937 rng(12345);
  constexpr int kBuffers = 16, kCommands = 200;
  std::vector<BufferHazards> bufs(kBuffers);
  struct Use {
    int buffer;
    bool write;
  };
  std::vector<std::vector<Use>> uses(kCommands + 1);
  std::vector<QueueIndex> queue_of(kCommands + 1);
  std::vector<std::set<CommandId>> before(kCommands + 1);  // what each is ordered after, transitively
  std::map<QueueIndex, CommandId> last_on;
  for (CommandId id = 1; id <= kCommands; ++id) {
    std::vector<AccessView> a;
    std::set<int> seen;
    for (int k = 0; k < 3; ++k) {
      const int b = static_cast<int>(rng() % kBuffers);
      if (!seen.insert(b).second) continue;
      const bool w = k == 2 || rng() % 4 == 0;
      uses[id].push_back({b, w});
      a.push_back({&bufs[b], w});
    }
    ASSERT_EQ(next, id);
    const Placement p = where(a);
    WaitList waits;
    for (const AccessView& v : a) hz.collect_waits(*v.hazards, v.write, p.queue, waits);
    auto& order = before[id];
    if (auto it = last_on.find(p.queue); it != last_on.end()) {
      order.insert(it->second);
      order.insert(before[it->second].begin(), before[it->second].end());
    }
    for (CommandId w : waits.ids()) {
      order.insert(w);
      order.insert(before[w].begin(), before[w].end());
    }
    for (const AccessView& v : a) hz.record(*const_cast<BufferHazards*>(v.hazards), v.write, id, p.queue, p.finish_ns);
    free_ns[p.queue] = p.finish_ns;
    queue_of[id] = p.queue;
    last_on[p.queue] = id;
    ++next;
  }
  for (CommandId j = 1; j <= kCommands; ++j)
    for (CommandId i = 1; i < j; ++i)
      for (const Use& ui : uses[i])
        for (const Use& uj : uses[j])
          if (ui.buffer == uj.buffer && (ui.write || uj.write)) {
            ASSERT_TRUE(before[j].count(i)) << "command " << j << " is not ordered after " << i;
          }
  std::set<QueueIndex> used(queue_of.begin() + 1, queue_of.end());
  EXPECT_EQ(used.size(), 4u);
}

TEST(CostTable, ADefaultBeforeAnyMeasurement) {
  CostTable t(20 * kUs, 8);
  EXPECT_EQ(t.estimate(cost_kind(1, 64)), 20 * kUs);
}

TEST(CostTable, AKindMovesAQuarterTowardEachMeasurement) {
  CostTable t(20 * kUs, 8);
  const std::uint64_t k = cost_kind(1, 64);
  t.learn(k, 100 * kUs);
  EXPECT_EQ(t.estimate(k), 100 * kUs);
  t.learn(k, 500 * kUs);
  EXPECT_EQ(t.estimate(k), 200 * kUs);
}

TEST(CostTable, AKindNeverMeasuredGetsTheAverageOfTheOthers) {
  CostTable t(20 * kUs, 8);
  t.learn(cost_kind(1, 64), 100 * kUs);
  EXPECT_EQ(t.estimate(cost_kind(2, 64)), 100 * kUs);
  EXPECT_NE(cost_kind(1, 64), cost_kind(2, 64));
  EXPECT_NE(cost_kind(1, 64), cost_kind(1, 128));
}

TEST(CostTable, KindsPastItsCapacityAreEstimatedNotStored) {
  CostTable t(20 * kUs, 2);
  for (std::uint64_t i = 0; i < 10; ++i) t.learn(cost_kind(i, 1), 10 * kUs);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.estimate(cost_kind(9, 1)), 10 * kUs);
}

}  // namespace
}  // namespace uvcl::sched
