#include "sched/states.hpp"

namespace uvcl::sched {

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
