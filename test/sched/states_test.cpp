#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "sched/states.hpp"

namespace uvcl::sched {
namespace {

TEST(DependencyStateTest, LegalTransitions) {
  using S = DependencyState;
  using E = DependencyEvent;
  EXPECT_EQ(next(S::Pending, E::Submit), S::Submitted);
  EXPECT_EQ(next(S::Pending, E::Fail), S::Failed);
  EXPECT_EQ(next(S::Submitted, E::Complete), S::Complete);
  EXPECT_EQ(next(S::Submitted, E::Fail), S::Failed);
  EXPECT_EQ(next(S::Complete, E::Fail), S::Failed);
  EXPECT_EQ(next(S::Complete, E::Retire), S::Retired);
  EXPECT_EQ(next(S::Failed, E::Retire), S::Retired);
}

TEST(DependencyStateTest, IllegalTransitions) {
  using S = DependencyState;
  using E = DependencyEvent;
  EXPECT_FALSE(next(S::Pending, E::Complete));
  EXPECT_FALSE(next(S::Pending, E::Retire));
  EXPECT_FALSE(next(S::Submitted, E::Submit));
  EXPECT_FALSE(next(S::Submitted, E::Retire));
  EXPECT_FALSE(next(S::Complete, E::Complete));
  EXPECT_FALSE(next(S::Failed, E::Complete));
  EXPECT_FALSE(next(S::Failed, E::Fail));
  for (E e : {E::Submit, E::Complete, E::Fail, E::Retire}) EXPECT_FALSE(next(S::Retired, e));
}

TEST(BufferStateTest, Transitions) {
  EXPECT_EQ(next(BufferState::Live, BufferEvent::LastRelease), BufferState::Dying);
  EXPECT_EQ(next(BufferState::Dying, BufferEvent::UsesDone), BufferState::Freed);
  EXPECT_FALSE(next(BufferState::Live, BufferEvent::UsesDone));
  EXPECT_FALSE(next(BufferState::Dying, BufferEvent::LastRelease));
  EXPECT_FALSE(next(BufferState::Freed, BufferEvent::LastRelease));
  EXPECT_FALSE(next(BufferState::Freed, BufferEvent::UsesDone));
}

TEST(DeviceStateTest, Transitions) {
  EXPECT_EQ(next(DeviceState::Ready, DeviceEvent::Lose), DeviceState::Lost);
  EXPECT_FALSE(next(DeviceState::Lost, DeviceEvent::Lose));
}

// The record's machine: every legal edge, and every other pair refused.
TEST(CommandStateTest, EveryEdge) {
  using S = CommandState;
  using E = CommandEvent;
  const std::vector<std::tuple<S, E, S>> legal = {
      {S::Pending, E::Submit, S::Submitted},       {S::Pending, E::Fail, S::Failed},
      {S::Pending, E::Cancel, S::Cancelled},       {S::Submitted, E::DeviceDone, S::DeviceDone},
      {S::Submitted, E::Outcome, S::Parked},       {S::Submitted, E::Cancel, S::Cancelled},
      {S::DeviceDone, E::Outcome, S::OutcomeKnown}, {S::DeviceDone, E::Cancel, S::Cancelled},
      {S::Parked, E::DeviceDone, S::OutcomeKnown}, {S::Parked, E::Cancel, S::Cancelled},
      {S::OutcomeKnown, E::Finalize, S::Final},    {S::Failed, E::Finalize, S::Final},
      {S::Cancelled, E::Finalize, S::Final},
  };
  const S states[] = {S::Pending, S::Submitted, S::DeviceDone, S::Parked,
                      S::OutcomeKnown, S::Failed, S::Cancelled, S::Final};
  const E events[] = {E::Submit, E::DeviceDone, E::Outcome, E::Fail, E::Cancel, E::Finalize};
  for (S s : states)
    for (E e : events) {
      std::optional<S> want;
      for (const auto& [from, ev, to] : legal)
        if (from == s && ev == e) want = to;
      EXPECT_EQ(next(s, e), want) << name(s) << " on event " << static_cast<int>(e);
    }
  for (S s : states)
    EXPECT_EQ(device_done(s), s != S::Pending && s != S::Submitted && s != S::Parked) << name(s);
}

TEST(StateNamesTest, Named) {
  EXPECT_EQ(name(DependencyState::Submitted), "Submitted");
  EXPECT_EQ(name(BufferState::Dying), "Dying");
  EXPECT_EQ(name(DeviceState::Lost), "Lost");
  EXPECT_EQ(name(CommandState::OutcomeKnown), "OutcomeKnown");
}

}  // namespace
}  // namespace uvcl::sched
