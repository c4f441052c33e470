// transfers.hpp — copies between devices, staged through a bounded ring
// of pinned chunks (transfers.cpp; reads, writes and fills are plain
// commands and need no state of their own).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/records.hpp"
#include "engine/staging.hpp"
#include "uvcl/engine.hpp"

namespace uvcl {

// What a command the engine enqueues itself waits for (a cross-device
// copy's chunk writes, a held copy): events it reads the status of instead
// of handing them to the driver as a wait list, retained, and the commands
// they belong to (0: unknown), for error messages.
struct PolledWaits {
  std::vector<cl_event> events;
  std::vector<CommandId> ids;
};

// A device copy the engine enqueues itself (Command::held): on its device's
// transfer queue, with no wait list, once what it waits for has completed.
// Until then later commands wait on its user event, which the engine
// completes when the copy has run. Whatever the outcome: only the command
// that overwrites its source waits on it, for the order; a failed copy
// fails the reads of the snapshot through its poison.
struct HeldCopy {
  CommandId command = 0;
  std::uint32_t device = 0;
  cl_mem src = nullptr, dst = nullptr;  // retained: the buffers may be released before it is enqueued
  std::size_t src_offset = 0, dst_offset = 0, bytes = 0;
  PolledWaits waits;
  cl_event user_event = nullptr;  // owned by the command's record
  cl_event event = nullptr;       // the copy's, once enqueued
  std::optional<Error> error;
  bool error_reported = false;    // where it started: a command it waited for failed
  bool abandoned = false;         // teardown completed its user event
};

struct CrossChunk {
  CommandId read = 0;
  std::size_t offset = 0, bytes = 0;  // relative to the copy
  Staging staging;
  cl_event write = nullptr;
  bool read_done = false;
};

struct CrossCopy {
  std::uint32_t src_device = 0, dst_device = 0;
  std::uint64_t dst = 0;
  // Retained by the copy: its chunk writes are enqueued after the
  // destination's command was submitted, when a released destination has
  // given its own reference back.
  cl_mem dst_mem = nullptr;
  std::size_t dst_offset = 0;
  // Chunk i reads [read_offset + chunks[i].offset - read_base, +bytes) of
  // read_from: the source itself, or, once a later command is about to
  // write the source while chunks are still unread, a snapshot of what is
  // left (a buffer of the engine's, from chunk offset read_base on).
  std::uint64_t read_from = 0;
  std::size_t read_offset = 0, read_base = 0;
  CommandId snapshot = 0;  // the held copy that wrote read_from, once there is one
  // The buffer the copy holds a reference on for the reads it has not
  // issued yet (0: none left); `lazy` while that is the source itself,
  // counted in its BufferRec::cross_readers.
  std::uint64_t held = 0;
  bool lazy = false;
  std::vector<CrossChunk> chunks;
  std::size_t reads_issued = 0, reads_done = 0;
  // Blocks of landed chunks, for the next chunks' reads; and the command
  // those reads wait to see complete, once asked for its completion.
  std::vector<Staging> free_blocks;
  CommandId producer_asked = 0;
  CommandId dst_command = 0;
  cl_event user_event = nullptr;     // owned by the dst command's record
  // What the dst command waits for: no chunk write goes out before all
  // have completed.
  PolledWaits dst_waits;
  std::size_t next_write = 0;        // chunks [0, next_write) have their write enqueued
  // Chunks [0, landed) have their write seen complete. The writes run in
  // chunk order on the destination's in-order transfer queue: only the
  // oldest outstanding one needs a status read.
  std::size_t landed = 0;
  bool dst_submitted = false;
  bool abandoned = false;            // teardown failed its user event
  std::optional<Error> error;  // reported with the copy's outcome, once it ends (cross_finish)
  // ... unless it was reported where it started: a chunk read's own outcome,
  // a command the copy waited for that failed.
  bool error_reported = false;
  std::size_t outstanding_writes = 0;
};

struct Transfers {
  explicit Transfers(Engine::Impl& engine) : e(engine) {}
  Engine::Impl& e;

  std::unordered_map<std::uint64_t, CrossCopy> crosses;
  // Each enqueued once what it waits for has completed, and completed once
  // it has run, whatever the others do: ordering them would make one wait
  // for another's producer, which may come after this one's copy.
  std::vector<HeldCopy> held_copies;

  // Reads into staging waiting for their data: the caller's callback and the
  // block, in reused slots, so that a read's final hook captures a slot
  // index and fits std::function's inline storage (no allocation per read).
  struct PendingRead {
    ReadCallback on_data;
    Staging staging;
    std::size_t bytes = 0;
    std::uint32_t device = 0;
  };
  std::vector<PendingRead> pending_reads;
  std::vector<std::uint32_t> free_read_slots;
  std::uint32_t park_read(PendingRead read);
  // Hands slot's data (or error) to its callback and the block back to its pool.
  void deliver_read(std::uint32_t slot, const std::optional<Error>& error);

  // Enqueues chunk i's read (`late`: beyond the ring, see Command::
  // on_transfer_queue); the caller counts reads_issued.
  CommandId cross_read(std::uint64_t xid, std::size_t i, bool late = false);
  // Makes the copy's next chunk reads, one per free block, once what they
  // read is complete; returns the device whose window holds them, if any.
  std::optional<std::uint32_t> issue_late_reads(std::uint64_t xid);
  void release_held(CrossCopy& x);  // the last read is issued, or the copy ends
  // A command about to be submitted writes `buffer`, which copies still read
  // chunk by chunk: each first snapshots what it has not read (a held copy
  // put into the window ahead of that command), or fails if it cannot.
  void snapshot_unread(std::uint64_t buffer);
  void cross_chunk_read(std::uint64_t xid, std::size_t i, const std::optional<Error>& error);
  void poll_crosses();
  void cross_finish(std::uint64_t xid);
  void submit_cross_write(DeviceCtx& d, const Command& c, std::span<const cl_event> waits, cl_event* ev);
  // A held copy's submission: its user event (*ev), its waits taken over.
  void submit_held_copy(DeviceCtx& d, const Command& c, std::span<const cl_event> waits, cl_event* ev);
  // Teardown, before the devices are drained: sets the user events that
  // only the loop would set, so that what waits on them does not hang:
  // failed for copies not finished, complete for held copies (they only
  // order).
  void abandon();
  // Teardown, once drained: gives back what every copy still holds.
  void release_all();

 private:
  // Enqueues the held copies whose waits have completed; then completes
  // those that have run.
  void enqueue_ready_held_copies();
  void poll_held_copies();
  // Completes a command the engine runs itself, with `error` if it failed
  // (a failure to set its user event joins it), and its user event: failed
  // with it, so that what waits on it fails, unless it is `order_only` (what
  // waits on it does not read what the command wrote). `reported`: the
  // error was reported where it started (not again as this command's).
  void complete_user_event(CommandId id, cl_event user_event, std::optional<Error>& error, bool reported,
                           bool order_only);
};

}  // namespace uvcl
