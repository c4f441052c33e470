// transfers.hpp — copies between devices, staged through a bounded ring
// of pinned chunks (transfers.cpp; reads, writes and fills are plain
// commands and need no state of their own).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/records.hpp"

namespace uvcl {

struct CrossChunk {
  CommandId read = 0;
  std::size_t offset = 0, bytes = 0;  // relative to the copy
  Staging staging;
  cl_event write = nullptr;
  bool read_done = false, written = false;
};

struct CrossCopy {
  std::uint32_t src_device = 0, dst_device = 0;
  std::uint64_t dst = 0;
  std::size_t dst_offset = 0;
  // The chunk reads read [read_offset, +bytes) of read_from: the source
  // itself, or a snapshot of it (a buffer of the engine's, reference dropped
  // once the last read is enqueued) when the copy is larger than its ring.
  std::uint64_t read_from = 0, snapshot = 0;
  std::size_t read_offset = 0;
  std::vector<CrossChunk> chunks;
  std::size_t reads_issued = 0, reads_done = 0;
  CommandId dst_command = 0;
  cl_event user_event = nullptr;     // owned by the dst command's record
  // What the dst command waits for (retained), and the commands they belong
  // to (0: unknown): no chunk write goes out before all have completed.
  std::vector<cl_event> dst_waits;
  std::vector<CommandId> dst_wait_ids;
  std::size_t next_write = 0;        // chunks [0, next_write) have their write enqueued
  bool dst_submitted = false;
  bool abandoned = false;            // teardown failed its user event
  std::optional<Error> error;
  std::size_t outstanding_writes = 0;
};

struct Transfers {
  explicit Transfers(Engine::Impl& engine) : e(engine) {}
  Engine::Impl& e;

  std::unordered_map<std::uint64_t, CrossCopy> crosses;

  CommandId cross_read(std::uint64_t xid, std::size_t i);  // enqueues chunk i's read; the caller counts reads_issued
  void release_snapshot(CrossCopy& x);
  void cross_chunk_read(std::uint64_t xid, std::size_t i, const std::optional<Error>& error);
  void poll_crosses();
  void cross_finish(std::uint64_t xid);
  void submit_cross_write(DeviceCtx& d, const Command& c, const std::vector<cl_event>& waits, cl_event* ev);
};

}  // namespace uvcl
