// records.hpp — what every part of the engine shares: the command and its record,
// the queues (timelines) and the per-device context.
#pragma once

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "cl/api.hpp"
#include "cl/devices.hpp"
#include "engine/compiler_process.hpp"
#include "engine/staging.hpp"
#include "engine/trace.hpp"
#include "sched/command_graph.hpp"
#include "sched/cost_table.hpp"
#include "sched/queue_choice.hpp"
#include "sched/scratch_list.hpp"
#include "sched/states.hpp"
#include "sched/window.hpp"
#include "uvcl/engine.hpp"

namespace uvcl {

using sched::CommandId;
using sched::QueueIndex;

enum class Op : std::uint8_t { Launch, Timed, Write, Fill, Read, Copy, CrossWrite };
const char* op_name(Op op) noexcept;

struct BufferRec;
struct KernelRec;

struct Access {
  std::uint64_t buffer = 0;
  bool read = false;
  bool write = false;
  // Its record, looked up once when the command is made: it stays put
  // (the buffer table's records do not move) and alive while the command
  // holds a pending use of it (until the command leaves its window).
  BufferRec* rec = nullptr;
};

// Called once per command when it is final: its outcome is known and its
// event (if it had one) has completed. nullopt error: success.
using FinalHook = std::function<void(CommandId, const std::optional<Error>&)>;

// Laid out for the cache: a command is written when it is issued and read
// when its window is submitted, with driver calls in between that evict it.
// What every command uses comes first, the lists' headers next to their
// first entries, what only transfers use after that.
struct Command {
  // User-provided, so that a command made in place (Window::emplace) is not
  // zero-filled first, as value-initialization does: only the members below
  // are set, the lists' inline slots stay untouched.
  Command() {}  // NOLINT(modernize-use-equals-default)
  CommandId id = 0;
  Op op = Op::Launch;
  bool wants_callback = false;  // someone waits: ask the driver for a callback
  // A cross-device copy's chunk read beyond its ring: on the device's
  // transfer queue, made only once what it reads is complete (no wait).
  bool on_transfer_queue = false;
  // A copy the engine enqueues itself once what it waits for has completed
  // (HeldCopy): a snapshot of a cross-device copy's unread source, which
  // an in-order queue could otherwise hold behind work waiting for that
  // very copy.
  bool held = false;
  // read_into: the driver writes the caller's memory. It always gets an
  // event of its own, so that its outcome is what the driver says of it: a
  // read completed by a later event can be left without one when its
  // device is lost, and failed then while the driver may still write there.
  bool into_caller_memory = false;
  bool has_local = false;
  std::uint32_t dims = 0;
  std::uint64_t tag = 0;
  // Its failures are reported as this command's, in its error scope (a
  // snapshot's: the copy it is made for, not the command that caused it).
  CommandId reports_as = 0;
  // Launch / Timed
  std::uint64_t kernel = 0;
  KernelRec* kernel_rec = nullptr;  // unordered_map nodes do not move; alive while the command counts a use of it
  FinalHook on_final;
  std::vector<CommandId> extra_producers;  // cross-device write: its chunk reads
  sched::ScratchList<Access, 8> accesses;
  std::array<std::size_t, 3> global{}, local{};
  // Transfers
  std::size_t offset = 0, bytes = 0, src_offset = 0;
  const void* host_src = nullptr;
  void* host_dst = nullptr;
  std::uint64_t cross = 0;  // CrossCopy id
  std::vector<std::byte> pattern;
  sched::ScratchList<KernelArg, 8> args;  // last: its entries are the command's largest part
  // Both are part of a cross-device copy made before they are: they wait
  // for what they read, not for a timed launch made since the copy, which
  // may itself wait for work that waits for that copy.
  bool of_earlier_copy() const { return on_transfer_queue || held; }
};

// What few commands have, kept out of the record that every command's
// completion reads.
struct CommandExtras {
  std::optional<Error> outcome;          // Parked: a failure known before the device finished
  std::optional<Result<Timing>> timing;  // timed launches, read at completion
  std::unique_ptr<TraceCommand> trace;   // while tracing
};

// One record per command, its whole life (sched::CommandState), in dense
// storage by id (Engine::Impl::commands) from enqueue until it is final.
// Its completion comes long after its submission, the record long out of
// the cache by then: what the completion reads comes first, together.
struct CommandRec {
  CommandRec() {}  // NOLINT(modernize-use-equals-default): as Command's
  sched::CommandState state = sched::CommandState::Pending;
  Op op = Op::Launch;
  bool seen_done = false;  // the driver said done; the completion step has not run yet
  std::uint32_t device = 0;
  QueueIndex queue = sched::kNoQueue;
  cl_int status = CL_QUEUED;
  // Its own, or a fence (a marker enqueued right after it) that completes
  // it and every event-less command before it on its queue. Released once
  // final.
  cl_event event = nullptr;
  cl_event gate = nullptr;   // timed launches: a user event later work waits on
  KernelRec* kernel_rec = nullptr;  // as Command::kernel_rec: alive while this command counts a use of it
  // A host transfer's, where its device learns from it: transfer rates
  // (sched::TransferRate::kMinBytes and up), spin rates (SpinRates).
  std::size_t bytes = 0;
  std::uint64_t submit_ns = 0;
  std::uint64_t kernel = 0;
  std::uint64_t tag = 0;
  CommandId reports_as = 0;  // Command::reports_as
  // Its kind in its device's cost table and what the table estimated when
  // it was placed: the completion learns from how long it took.
  std::uint64_t cost_kind = 0;
  std::uint64_t cost_ns = 0;
  std::uint64_t placed_ns = 0;  // the clock of the batch that submitted it
  FinalHook hook;                           // runs once, when final
  std::unique_ptr<CommandExtras> extras;    // nullptr unless one of them is set
  sched::GraphNode node;                    // its place in the dependency graph
  sched::ScratchList<std::uint64_t, 1> frees;    // Dying buffers whose last uses include this one
  sched::ScratchList<std::uint64_t, 8> written;  // buffers it writes: poisoned if it fails

  CommandExtras& extra() {
    if (!extras) extras = std::make_unique<CommandExtras>();
    return *extras;
  }
  // Moved out; nullopt when there is none.
  std::optional<Error> take_outcome() { return extras ? std::move(extras->outcome) : std::nullopt; }
  std::optional<Result<Timing>> take_timing() { return extras ? std::move(extras->timing) : std::nullopt; }
};

// An in-order queue is a timeline: its commands complete in the order they
// were enqueued, so one event completes every command before it. Commands
// get an event of their own only where someone awaits them (a read, a timed
// launch, a callback) or traces them; the others are completed by the next
// event on their queue — a fence (a marker) attached to the last command in
// flight before the loop may sleep, at a sync point, every kLongRun
// event-less commands of a burst, or when another queue must wait.
struct Queue {
  cl_command_queue queue = nullptr;
  std::deque<CommandId> in_flight;  // in submission order = completion order = id order
  // The commands of in_flight that carry an event (their own, or a fence
  // after them), in order: the one that completes a command is found by a
  // binary search, not a walk over the event-less ones between.
  std::deque<CommandId> evented;
  // When what it completes next began (its last completion, or the
  // submission that found it idle): a completed group's time, shared out
  // over the group's commands, is what the cost table learns.
  std::uint64_t busy_since_ns = 0;
  std::uint32_t unflushed = 0;      // commands (and fences) enqueued since its last clFlush
  bool needs_fence = false;         // the last command in flight has no event
  std::uint32_t unfenced = 0;       // event-less commands at its back, since its last event
  // Status reads of its oldest event that failed in a row: a read that
  // fails once is tried again at the next poll; only a persistent failure
  // fails the commands that event completes (it may complete many).
  std::uint8_t failed_reads = 0;
  // The completion walk (Completion::walk) in which its status read said
  // "not yet" or failed: not asked again until the next walk.
  std::uint64_t not_yet_walk = 0;
  // The command completed last on this queue, if it failed (0 if it did
  // not): a driver may fail what it queued behind a failed command (PoCL
  // fails the commands enqueued while it was pending), and the errors of
  // those commands name it.
  CommandId failed_ahead = 0;
  // While its device's window is submitted: the oldest event of this queue
  // read unfinished during that submission (0: none). Cleared after it.
  CommandId unfinished_from = 0;
  // The last command placed on it since the loop's last prepare phase that
  // someone awaits (0: none). Only its event gets a driver callback, asked
  // for right before the loop may sleep: a callback exists to wake a
  // sleeping loop, the awaited commands before it complete before it on
  // this in-order queue, and the completion step it wakes reads theirs
  // too. A callback per awaited command costs a driver thread's wake-up and
  // a uv_async each.
  CommandId callback_on = 0;
  // The same while the loop spins (Config::spin_us): the last awaited
  // command placed here since the spin began. Its callback is asked for
  // only if the spin ends before it completes, for the same reasons.
  CommandId callback_after_spin = 0;
};

struct DeviceCtx;

// Nanoseconds per byte the last large awaited transfer of each kind took on
// a device, submission to completion seen (0: none yet).
struct SpinRates {
  static constexpr std::size_t kMinBytes = std::size_t{1} << 20;  // smaller ones fit the plain spin
  static constexpr std::uint64_t kMaxSpinNs = 10'000'000;          // at most this much spinning per transfer
  double ns_per_byte[4] = {};  // Write, Fill, Read, Copy
  static int slot(Op op) noexcept {
    return op == Op::Write ? 0 : op == Op::Fill ? 1 : op == Op::Read ? 2 : op == Op::Copy ? 3 : -1;
  }
  // The spin a transfer of `bytes` bytes gets beyond the plain one: its
  // expected length with a quarter to spare, bounded; 0 when unknown.
  std::uint64_t extra_ns(Op op, std::size_t bytes) const noexcept {
    const int i = slot(op);
    if (i < 0 || bytes < kMinBytes || ns_per_byte[i] <= 0) return 0;
    const double ns = ns_per_byte[i] * static_cast<double>(bytes) * 1.25;
    return ns >= static_cast<double>(kMaxSpinNs) ? kMaxSpinNs : static_cast<std::uint64_t>(ns);
  }
  void learn(Op op, std::size_t bytes, std::uint64_t took_ns) noexcept {
    const int i = slot(op);
    if (i >= 0 && bytes >= kMinBytes) ns_per_byte[i] = static_cast<double>(took_ns) / static_cast<double>(bytes);
  }
};

// A device's compiler processes and the builds waiting for one
// (compilers.cpp). Owner of the processes' callbacks.
struct DeviceCompilers final : CompilerProcess::Owner {
  Engine::Impl* engine = nullptr;
  std::uint32_t device = 0;
  std::vector<CompilerProcess*> processes;
  std::deque<std::uint64_t> waiting;  // program ids, in compile order
  // The compiler program could not be started: builds run inline.
  bool inline_only = false;

  void on_result(CompilerProcess& c, compiler::BuildResult result) override;
  void on_lost(CompilerProcess& c, CompilerProcess::Lost how, std::uint64_t program, const Error& why) override;
};

struct DeviceCtx {
  // Before a device has measured anything: what a command is taken to run.
  static constexpr std::uint64_t kDefaultCostNs = 20000;
  static constexpr std::size_t kCostKinds = 4096;
  cl::Device dev;
  DeviceCompilers compilers;
  cl_context context = nullptr;
  // [0, n) compute queues chosen by the scheduler; n: profiling queue for
  // timed launches; n + 1: transfer queue for staged cross-device writes.
  std::vector<Queue> queues;
  std::vector<std::uint32_t> load;  // compute queues only
  // Compute queues only: when each is expected to finish what it holds
  // (uv_hrtime; 0: idle), as queue_choice.hpp places commands.
  std::vector<std::uint64_t> free_ns;
  sched::CostTable costs{kDefaultCostNs, kCostKinds};
  // Host to device and back, for placing work that has to move there
  // (Engine::choose_device).
  static constexpr double kDefaultNsPerByte = 1.0;
  sched::TransferRate to_device{kDefaultNsPerByte}, from_device{kDefaultNsPerByte};
  std::uint64_t cross_wait_ns = 0;  // Config::cross_wait_us
  sched::Window<Command> window;
  sched::DeviceState state = sched::DeviceState::Ready;
  std::uint64_t allocated = 0;
  std::optional<CommandId> barrier;  // a timed launch later work waits for
  std::unique_ptr<StagingPool> staging;
  // Staging maps and unmaps only: the loop blocks on a map, which must not
  // sit behind a transfer.
  cl_command_queue map_queue = nullptr;
  // Copies into this device with chunk writes still to enqueue, in
  // submission order: their writes go out in that order.
  std::deque<std::uint64_t> cross_writes;
  // Every command gets an event of its own (Config::command_events): no
  // event-less commands, no fences.
  bool event_per_command = false;
  unsigned spin_us = 0;  // Config::spin_us, "auto" resolved for this device
  // Config::spin_us "auto" on a device that spins: a large awaited transfer
  // also spins for as long as the last one of its kind took per byte
  // (SpinRates), bounded: a driver's completion callback can arrive late
  // after a long transfer, and the spin that sees it sooner costs only its
  // own length.
  bool learns_spin = false;
  SpinRates spin_rates;
  // Whether submission asks the driver if a running command has finished
  // (is_complete). Only where a wait on a failed event hangs (PoCL): the
  // answer lets the engine fail the waiting command itself. Elsewhere the
  // engine goes by what its completion walk has seen: on NVIDIA's driver a
  // status read of a running event costs more than a launch, and a wait on
  // a command that has in fact finished is harmless.
  bool status_at_submit = true;
  // Config::completion: the loop polls for this device's awaited commands
  // on a timer instead of registering driver callbacks.
  bool poll_completion = false;
  unsigned read_burst_us = 0;  // Config::read_burst_us, "auto" resolved for this device
  // A read before this time (uv_hrtime) is in a burst with the previous one:
  // issued within read_burst_us after it returned, with no prepare step in
  // between (on_prepare resets it).
  // A burst's first read submits its window; the rest wait to go together,
  // one submission and flush per window instead of one per read — a flush
  // costs more than the read on some drivers (NVIDIA's). 0: no burst.
  std::uint64_t read_burst_until_ns = 0;
  bool reads_in_window = false;  // reads of a burst wait in the window
  bool submitting = false;  // inside submit_window: a nested call leaves new commands to the outer one

  explicit DeviceCtx(std::size_t window_size) : window(window_size) {}
  QueueIndex compute_queues() const { return static_cast<QueueIndex>(load.size()); }
  QueueIndex profiling_queue() const { return compute_queues(); }
  QueueIndex transfer_queue() const { return compute_queues() + 1; }
};

}  // namespace uvcl
