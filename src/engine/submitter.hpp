// submitter.hpp — windows to queues: which queue a command goes to, what it
// waits for, its enqueue, fences and flushes (submit.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/records.hpp"
#include "sched/hazards.hpp"
#include "sched/queue_choice.hpp"
#include "sched/scratch_list.hpp"

namespace uvcl {

struct Submitter {
  explicit Submitter(Engine::Impl& engine) : e(engine) {}
  Engine::Impl& e;

  CommandId enqueue(std::uint32_t device, Command c);  // into the window; may submit
  // The same in two steps, for a command built in place in the window:
  // stage() gives a fresh command at its back, then either commit() (as
  // enqueue) or unstage() (filling it failed) — nothing in between may
  // touch the device's window.
  Command& stage(std::uint32_t device);
  CommandId commit(std::uint32_t device);
  void unstage(std::uint32_t device);
  // A window submitted because it filled (Flush::LongRuns) neither fences
  // nor flushes every queue it used: the caller is still issuing, and per
  // queue per window a marker costs the driver what a launch does and a
  // clFlush two microseconds on NVIDIA's. A queue gets a fence once it has
  // kLongRun event-less commands, and a flush once it has kLongRun
  // unflushed ones (or was fenced). Every other submission fences and
  // flushes all: completion is observed only through events, and a
  // command is only sure to start once its queue is flushed.
  enum class Flush : std::uint8_t { All, LongRuns };
  static constexpr std::uint32_t kLongRun = 128;
  void submit_window(std::uint32_t device, Flush flush = Flush::All);
  // A read is a sync point: its window is submitted at once — unless the
  // read comes in a burst (Config::read_burst_us), when it stays in the
  // window with the burst's other reads, submitted together when the window
  // fills or before the loop next waits.
  void submit_read(std::uint32_t device);
  // Every window, each followed by every queue of its device fenced and
  // flushed (submit_window with Flush::All does that even for an empty
  // window): what the engine's step, a blocking call, poll() and drain() do
  // before they wait.
  void submit_all();
  void submit_one(DeviceCtx& d, Command& c);
  void fail_unsubmitted(const Command& c, Error error);
  cl_int enqueue_cl(DeviceCtx& d, Command& c, QueueIndex q, std::span<const cl_event> waits, cl_event* ev,
                    const char** call);
  // Fences the queues whose last command has no event, then flushes the
  // queues with unflushed commands (all, or as Flush::LongRuns says).
  void flush_queues(DeviceCtx& d, Flush flush = Flush::All);
  cl_int flush_queue(DeviceCtx& d, QueueIndex q);  // clFlush's status
  // A marker after the last command of queue q, which then carries it as
  // its event; nullptr if the marker could not be enqueued.
  cl_event fence(DeviceCtx& d, QueueIndex q);
  // The event another queue waits on for command `id`: its own, the next
  // fence on its queue, or a new fence. nullptr: no fence could be made.
  cl_event event_for_wait(DeviceCtx& d, CommandId id);
  // From the prepare handle, right before the loop may sleep: the driver
  // callbacks watch() left for then (Queue::callback_on).
  void ask_callbacks(DeviceCtx& d);
  // Whether the command gets an event of its own.
  bool needs_own_event(const DeviceCtx& d, const Command& c) const;
  // Reads of a burst that share the event of a later read of theirs: at
  // most this many in a row, each at most kSharedReadMaxBytes, so the first
  // waits for at most that many more small transfers.
  static constexpr unsigned kSharedReads = 16;
  static constexpr std::size_t kSharedReadMaxBytes = std::size_t{64} * 1024;
  // Its kind in its device's cost table (sched::CostTable).
  static std::uint64_t cost_kind(const Command& c);

 private:
  // The window's last command, about to be committed, writes the source of
  // a cross-device copy that still reads it in place: the copy has what it
  // has not read copied aside first, in the window right before that
  // command (Transfers::snapshot_unread), so the reads it makes later find
  // the source as it was at copy().
  void snapshot_what_the_last_overwrites(DeviceCtx& d);
  // A command's record, and the holds it keeps on its buffers and kernel
  // until it is submitted.
  void record(std::uint32_t device, Command& c);
  // submit_one's steps; false: the command failed and its submission ends.
  using WaitEvents = sched::ScratchList<cl_event, 8>;
  struct Waits {
    sched::WaitList waits;
    sched::WaitList completed;           // dropped waits, for the schedule record
    std::optional<CommandId> gate_of;    // the timed launch waited on through its gate
  };
  struct Enqueued {
    cl_event event = nullptr;  // its own, if it gets one
    cl_event gate = nullptr;   // a timed launch's
    bool own_event = false;
  };
  bool admit(const DeviceCtx& d, const Command& c);
  // Where a command goes (sched/queue_choice.hpp), when it is expected to
  // end there, and its cost-table kind and estimate.
  struct Placed {
    QueueIndex queue = 0;
    std::uint64_t finish_ns = 0;
    std::uint64_t kind = 0;
    std::uint64_t cost_ns = 0;
  };
  Placed place(DeviceCtx& d, const Command& c);
  std::optional<sched::Placement> place_for_consumer(const DeviceCtx& d, const Command& c,
                                                     const sched::Estimate& est) const;
  using Views = sched::ScratchList<sched::AccessView, 8>;
  static void views_of(const Command& c, Views& out);
  bool has_pending_deps(const Command& c) const;  // anything unfinished to wait for, on any queue
  void collect_waits(const DeviceCtx& d, const Command& c, QueueIndex q, Waits& w);
  bool wait_events(DeviceCtx& d, const Command& c, QueueIndex q, const Waits& w, WaitEvents& events);
  bool enqueue_or_fail(DeviceCtx& d, Command& c, QueueIndex q, std::span<const cl_event> events, Enqueued& done);
  void record_submitted(DeviceCtx& d, const Command& c, const Placed& at, const Enqueued& done, const Waits& w);
  // Someone awaits it: spin for it, or have the driver's callback asked for
  // before the loop next sleeps (ask_callbacks).
  void watch(const DeviceCtx& d, Queue& queue, const Command& c);
  void show(const DeviceCtx& d, const Command& c, QueueIndex q, const Waits& w);  // trace, schedule record

  // The engine's clock when the batch being submitted was taken: one read
  // per batch, not one per command.
  std::uint64_t now_ns_ = 0;
  // The commands after the one being submitted in the batch being
  // submitted (place() looks ahead for a fresh command's consumer).
  const Command* batch_next_ = nullptr;
  const Command* batch_end_ = nullptr;
  // Released buffers whose last use in the batch is enqueued; they go back
  // to the driver after every kCommandsPerFreeGroup commands (free_unused).
  static constexpr std::size_t kCommandsPerFreeGroup = 8;
  std::vector<std::uint64_t> unused_;
  void free_unused();
  // Reads of settled data in the window being submitted (commands that
  // write nothing on the device and continue no chain).
  struct SettledReads {
    QueueIndex queue = sched::kNoQueue;  // where the first of them went: the others follow
    bool placing = false;                // place() put the command being submitted there
    unsigned shared = 0;                 // reads in a row there without an event of their own
  };
  SettledReads settled_;
  bool completed_by_next_read(const Command& c) const;
  bool read_by_several_later(const Command& c) const;
  // How far place() and needs_own_event() look ahead in the batch.
  static constexpr std::ptrdiff_t kLookahead = 8;
};

}  // namespace uvcl
