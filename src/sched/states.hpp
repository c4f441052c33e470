// states.hpp — the engine's explicit state machines.
//
// Each machine is an enum, its events, and ONE transition function that
// returns the next state or nullopt for an illegal transition. The engine
// asserts legality through these functions; tests cover every edge.
//
//   Command — the engine's one record per command, its whole life:
//     Pending -Submit-> Submitted -DeviceDone-> DeviceDone -Outcome-> OutcomeKnown
//     Submitted -Outcome-> Parked -DeviceDone-> OutcomeKnown  (an input failed while it still ran)
//     Pending -Fail-> Failed                                  (never enqueued)
//     Pending|Submitted|DeviceDone|Parked -Cancel-> Cancelled (teardown gives up on it)
//     OutcomeKnown|Failed|Cancelled -Finalize-> Final         (its callback has run)
//   Dependency — a command's node in the CommandGraph (failure that follows the data):
//     Pending -Submit-> Submitted -Complete-> Complete -Retire-> Retired
//     Pending -Fail-> Failed; Submitted|Complete -Fail-> Failed -Retire-> Retired
//   Buffer:   Live -LastRelease-> Dying -UsesDone-> Freed
//   Device:   Ready -Lose-> Lost
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace uvcl::sched {

enum class CommandState : std::uint8_t { Pending, Submitted, DeviceDone, Parked, OutcomeKnown, Failed, Cancelled, Final };
enum class CommandEvent : std::uint8_t { Submit, DeviceDone, Outcome, Fail, Cancel, Finalize };

// Defined in the header: a command takes several transitions, each with a
// constant event the compiler folds into the caller.
constexpr std::optional<CommandState> next(CommandState s, CommandEvent e) noexcept {
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
// The device has finished with it (or it never reached the device).
constexpr bool device_done(CommandState s) noexcept {
  return s != CommandState::Pending && s != CommandState::Submitted && s != CommandState::Parked;
}

enum class DependencyState { Pending, Submitted, Complete, Failed, Retired };
enum class DependencyEvent { Submit, Complete, Fail, Retire };
constexpr std::optional<DependencyState> next(DependencyState s, DependencyEvent e) noexcept {
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

enum class BufferState { Live, Dying, Freed };
enum class BufferEvent { LastRelease, UsesDone };
std::optional<BufferState> next(BufferState s, BufferEvent e) noexcept;

enum class DeviceState { Ready, Lost };
enum class DeviceEvent { Lose };
std::optional<DeviceState> next(DeviceState s, DeviceEvent e) noexcept;

std::string_view name(DependencyState s) noexcept;
std::string_view name(BufferState s) noexcept;
std::string_view name(DeviceState s) noexcept;
std::string_view name(CommandState s) noexcept;

}  // namespace uvcl::sched
