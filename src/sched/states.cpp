#include "sched/states.hpp"

namespace uvcl::sched {

std::optional<CommandState> next(CommandState s, CommandEvent e) noexcept {
  using S = CommandState;
  using E = CommandEvent;
  switch (s) {
    case S::Pending:
      if (e == E::Submit) return S::Submitted;
      if (e == E::Fail) return S::Failed;
      break;
    case S::Submitted:
      if (e == E::Complete) return S::Complete;
      if (e == E::Fail) return S::Failed;
      break;
    case S::Complete:
      if (e == E::Fail) return S::Failed;
      if (e == E::Retire) return S::Retired;
      break;
    case S::Failed:
      if (e == E::Retire) return S::Retired;
      break;
    case S::Retired:
      break;
  }
  return std::nullopt;
}

std::optional<BufferState> next(BufferState s, BufferEvent e) noexcept {
  if (s == BufferState::Live && e == BufferEvent::LastRelease) return BufferState::Dying;
  if (s == BufferState::Dying && e == BufferEvent::UsesDone) return BufferState::Freed;
  return std::nullopt;
}

std::optional<DeviceState> next(DeviceState s, DeviceEvent e) noexcept {
  if (s == DeviceState::Ready && e == DeviceEvent::Lose) return DeviceState::Lost;
  return std::nullopt;
}

std::optional<ReadbackState> next(ReadbackState s, ReadbackEvent e) noexcept {
  using S = ReadbackState;
  using E = ReadbackEvent;
  if (e == E::Fail && (s == S::Requested || s == S::WaitingForWriter || s == S::Reading)) return S::Failed;
  if (s == S::Requested && e == E::Submit) return S::WaitingForWriter;
  if (s == S::WaitingForWriter && e == E::WriterDone) return S::Reading;
  if (s == S::Reading && e == E::Done) return S::Delivered;
  return std::nullopt;
}

std::string_view name(CommandState s) noexcept {
  switch (s) {
    case CommandState::Pending: return "Pending";
    case CommandState::Submitted: return "Submitted";
    case CommandState::Complete: return "Complete";
    case CommandState::Failed: return "Failed";
    case CommandState::Retired: return "Retired";
  }
  return "?";
}
std::string_view name(BufferState s) noexcept {
  switch (s) {
    case BufferState::Live: return "Live";
    case BufferState::Dying: return "Dying";
    case BufferState::Freed: return "Freed";
  }
  return "?";
}
std::string_view name(DeviceState s) noexcept { return s == DeviceState::Ready ? "Ready" : "Lost"; }
std::string_view name(ReadbackState s) noexcept {
  switch (s) {
    case ReadbackState::Requested: return "Requested";
    case ReadbackState::WaitingForWriter: return "WaitingForWriter";
    case ReadbackState::Reading: return "Reading";
    case ReadbackState::Delivered: return "Delivered";
    case ReadbackState::Failed: return "Failed";
  }
  return "?";
}

}  // namespace uvcl::sched
