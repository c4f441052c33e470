// states.hpp — the engine's explicit state machines.
//
// Each machine is an enum, its events, and ONE transition function that
// returns the next state or nullopt for an illegal transition. The engine
// asserts legality through these functions; tests cover every edge.
//
//   Command:  Pending -Submit-> Submitted -Complete-> Complete -Retire-> Retired
//             Pending -Fail-> Failed (enqueue failed, or it read poisoned data)
//             Submitted|Complete -Fail-> Failed (its event, or an upstream
//             producer, failed) -Retire-> Retired
//   Buffer:   Live -LastRelease-> Dying -UsesDone-> Freed
//   Device:   Ready -Lose-> Lost
//   Readback: Requested -Submit-> WaitingForWriter -WriterDone-> Reading
//             -Done-> Delivered; Requested|WaitingForWriter|Reading -Fail-> Failed
#pragma once

#include <optional>
#include <string_view>

namespace uvcl::sched {

enum class CommandState { Pending, Submitted, Complete, Failed, Retired };
enum class CommandEvent { Submit, Complete, Fail, Retire };
std::optional<CommandState> next(CommandState s, CommandEvent e) noexcept;

enum class BufferState { Live, Dying, Freed };
enum class BufferEvent { LastRelease, UsesDone };
std::optional<BufferState> next(BufferState s, BufferEvent e) noexcept;

enum class DeviceState { Ready, Lost };
enum class DeviceEvent { Lose };
std::optional<DeviceState> next(DeviceState s, DeviceEvent e) noexcept;

enum class ReadbackState { Requested, WaitingForWriter, Reading, Delivered, Failed };
enum class ReadbackEvent { Submit, WriterDone, Done, Fail };
std::optional<ReadbackState> next(ReadbackState s, ReadbackEvent e) noexcept;

std::string_view name(CommandState s) noexcept;
std::string_view name(BufferState s) noexcept;
std::string_view name(DeviceState s) noexcept;
std::string_view name(ReadbackState s) noexcept;

}  // namespace uvcl::sched
