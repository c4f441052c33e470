#include <gtest/gtest.h>

#include "sched/states.hpp"

namespace uvcl::sched {
namespace {

TEST(CommandStateTest, LegalTransitions) {
  using S = CommandState;
  using E = CommandEvent;
  EXPECT_EQ(next(S::Pending, E::Submit), S::Submitted);
  EXPECT_EQ(next(S::Pending, E::Fail), S::Failed);
  EXPECT_EQ(next(S::Submitted, E::Complete), S::Complete);
  EXPECT_EQ(next(S::Submitted, E::Fail), S::Failed);
  EXPECT_EQ(next(S::Complete, E::Fail), S::Failed);
  EXPECT_EQ(next(S::Complete, E::Retire), S::Retired);
  EXPECT_EQ(next(S::Failed, E::Retire), S::Retired);
}

TEST(CommandStateTest, IllegalTransitions) {
  using S = CommandState;
  using E = CommandEvent;
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

TEST(ReadbackStateTest, Transitions) {
  using S = ReadbackState;
  using E = ReadbackEvent;
  EXPECT_EQ(next(S::Requested, E::Submit), S::WaitingForWriter);
  EXPECT_EQ(next(S::WaitingForWriter, E::WriterDone), S::Reading);
  EXPECT_EQ(next(S::Reading, E::Done), S::Delivered);
  for (S s : {S::Requested, S::WaitingForWriter, S::Reading}) EXPECT_EQ(next(s, E::Fail), S::Failed);
  EXPECT_FALSE(next(S::Requested, E::Done));
  EXPECT_FALSE(next(S::Reading, E::Submit));
  for (E e : {E::Submit, E::WriterDone, E::Done, E::Fail}) {
    EXPECT_FALSE(next(S::Delivered, e));
    EXPECT_FALSE(next(S::Failed, e));
  }
}

TEST(StateNamesTest, Named) {
  EXPECT_EQ(name(CommandState::Submitted), "Submitted");
  EXPECT_EQ(name(BufferState::Dying), "Dying");
  EXPECT_EQ(name(DeviceState::Lost), "Lost");
  EXPECT_EQ(name(ReadbackState::WaitingForWriter), "WaitingForWriter");
}

}  // namespace
}  // namespace uvcl::sched
