#include "sched/states.hpp"

namespace uvcl::sched {

std::optional<CommandState> next(CommandState s, CommandEvent e) noexcept {
  using S = CommandState;
  using E = CommandEvent;
  if (e == E::Cancel && (s == S::Pending || s == S::Submitted || s == S::DeviceDone || s == S::Parked))
    return S::Cancelled;
  if (e == E::Finalize && (s == S::OutcomeKnown || s == S::Failed || s == S::Cancelled)) return S::Final;
  switch (s) {
    case S::Pending:
      if (e == E::Submit) return S::Submitted;
      if (e == E::Fail) return S::Failed;
      break;
    case S::Submitted:
      if (e == E::DeviceDone) return S::DeviceDone;
      if (e == E::Outcome) return S::Parked;
      break;
    case S::DeviceDone:
      if (e == E::Outcome) return S::OutcomeKnown;
      break;
    case S::Parked:
      if (e == E::DeviceDone) return S::OutcomeKnown;
      break;
    default: break;
  }
  return std::nullopt;
}

bool device_done(CommandState s) noexcept { return s != CommandState::Pending && s != CommandState::Submitted && s != CommandState::Parked; }

std::optional<DependencyState> next(DependencyState s, DependencyEvent e) noexcept {
  using S = DependencyState;
  using E = DependencyEvent;
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

std::string_view name(DependencyState s) noexcept {
  switch (s) {
    case DependencyState::Pending: return "Pending";
    case DependencyState::Submitted: return "Submitted";
    case DependencyState::Complete: return "Complete";
    case DependencyState::Failed: return "Failed";
    case DependencyState::Retired: return "Retired";
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
std::string_view name(CommandState s) noexcept {
  switch (s) {
    case CommandState::Pending: return "Pending";
    case CommandState::Submitted: return "Submitted";
    case CommandState::DeviceDone: return "DeviceDone";
    case CommandState::Parked: return "Parked";
    case CommandState::OutcomeKnown: return "OutcomeKnown";
    case CommandState::Failed: return "Failed";
    case CommandState::Cancelled: return "Cancelled";
    case CommandState::Final: return "Final";
  }
  return "?";
}

}  // namespace uvcl::sched
