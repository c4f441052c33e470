// memory.hpp — device buffers and the pinned host memory handed to the
// caller: records, reference counts, frees deferred until the timelines pass
// a buffer's last use (memory.cpp, host_memory.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/records.hpp"
#include "sched/handle_table.hpp"
#include "sched/hazards.hpp"

namespace uvcl {

struct BufferRec {
  std::uint32_t device = 0;
  cl_mem mem = nullptr;
  std::size_t bytes = 0;
  std::uint32_t refs = 1;          // user references
  std::uint32_t pending_uses = 0;  // commands still in a window
  std::uint32_t uses_in_flight = 0;  // Dying: submitted uses it waits for (free_when_unused)
  sched::BufferState state = sched::BufferState::Live;
  sched::BufferHazards hazards;
  std::optional<Error> poison;
  // Cross-device copies that read it chunk by chunk, larger than their
  // ring: a command that writes it makes them snapshot the rest first
  // (Transfers::snapshot_unread).
  std::uint32_t cross_readers = 0;
};

// Memory from alloc_host: a staging block handed to the caller.
struct HostRec {
  std::uint32_t device = 0;
  Staging block;
  std::size_t bytes = 0;
  std::uint32_t uses = 0;  // transfers in flight from or into it
  bool released = false;   // freed when uses reaches 0
};

struct Memory {
  explicit Memory(Engine::Impl& engine) : e(engine) {}
  Engine::Impl& e;

  // Buffer handles carry the engine's number in their high bits, as every
  // handle does (Engine::create sets it), then this bit, which the other
  // kinds' counter never reaches, then the table's generation and slot.
  static constexpr std::uint64_t kBufferHandleBit = std::uint64_t{1} << 39;
  static_assert(sched::HandleTable<BufferRec>::kIndexMask < kBufferHandleBit);
  sched::HandleTable<BufferRec> buffers{kBufferHandleBit};
  std::unordered_map<std::uint64_t, HostRec> host_memory;
  std::map<const std::byte*, std::uint64_t> host_ranges;  // first byte -> host_memory id
  std::size_t dying = 0;            // buffers at zero references, not yet freed
  std::uint64_t mems_released = 0;  // SetArg: a buffer argument set before a release may name a reused cl_mem

  // A live buffer for an API call: `what` names the call in the error.
  // live_buffer is for calls that make work (refused unless the engine is
  // Open); held_buffer for those that only hold or query (release, retain,
  // buffer_size), accepted while it closes.
  Result<BufferRec*> live_buffer(Buffer b, const char* what);
  Result<BufferRec*> held_buffer(Buffer b, const char* what);
  // A new buffer on device `d` (index `device`); `what` starts the messages.
  Result<Buffer> allocate(DeviceCtx& d, std::size_t device, std::size_t bytes, const char* what);
  // Memory of the device's context `what` asks for: not empty, not beyond
  // the device's largest allocation.
  static Result<void> check_allocation_size(const DeviceCtx& d, std::size_t bytes, const char* what);
  // A Dying buffer that no window holds: its memory object goes back to the
  // driver at once (its uses are enqueued), its record and bytes once its
  // last uses have completed: each incomplete use frees it from its
  // completion step (release_uses); no scan.
  void free_when_unused(std::uint64_t id);
  // A release by the engine itself (no API checks): the last one frees the
  // buffer once its uses end.
  void drop_ref(std::uint64_t id, BufferRec& r);
  void release_uses(std::span<const std::uint64_t> frees);
  void free_buffer(std::uint64_t id, BufferRec& b);

  // host_memory.cpp
  // A transfer of [p, p + n) from or into host memory: counts a use of the
  // host memory holding it, undone when `then` (wrapped) runs. Memory that
  // is not host memory passes through unchanged; a range that starts in
  // host memory but runs past its end is an error.
  Result<FinalHook> hold_host_range(const void* p, std::size_t n, const char* what, FinalHook then);
  void free_host(std::uint64_t id);  // back to the staging pool
  void free_host_memory();           // shutdown
};

}  // namespace uvcl
