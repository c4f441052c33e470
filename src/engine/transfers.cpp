// transfers.cpp — host<->device transfers and copies, all hazard-tracked.
//
// Cross-device copies (other device, other platform) go through pinned host
// memory in chunks: chunk i is written to the destination as soon as it has
// been read from the source, so the two halves overlap. The destination side
// is one command whose event is a user event of the destination context: it
// is tracked like any write (later commands wait for it) and completes when
// the last chunk has landed. The chunk writes run on the destination's
// transfer queue, never on a scheduled queue, so nothing queued behind the
// user event can block them; and with no wait list: the engine holds each
// back until what the destination command waits for has completed, so they
// cannot block, in order, the writes of another copy they would wait for.
// The chunk reads beyond the ring, made as chunks land, likewise go to the
// source's transfer queue only once what they read is complete, and so does
// a snapshot of the source's unread part (a held copy) when a later command
// overwrites the source.
#include <algorithm>
#include <cstring>

#include "engine/engine_impl.hpp"

namespace uvcl {

namespace {

Result<void> check_range(const char* what, Buffer b, const BufferRec& r, std::size_t offset, std::size_t bytes) {
  if (bytes == 0) return Error{Status::InvalidArgument, std::string(what) + ": size must not be 0"};
  if (offset > r.bytes || bytes > r.bytes - offset)
    return Error{Status::InvalidArgument, std::string(what) + ": range [" + std::to_string(offset) + ", " +
                                              std::to_string(offset) + " + " + std::to_string(bytes) +
                                              ") is outside buffer " + std::to_string(b.id) + " of " +
                                              std::to_string(r.bytes) + " bytes"};
  return {};
}

// A write that covers only part of a buffer keeps the rest: it also "reads"
// the previous contents, so a failure upstream still reaches its readers.
Access write_access(Buffer b, const BufferRec& r, std::size_t offset, std::size_t bytes) {
  return Access{b.id, offset != 0 || bytes != r.bytes, true};
}

FinalHook done_hook(DoneCallback cb) {
  if (!cb) return {};
  return [cb = std::move(cb)](CommandId, const std::optional<Error>& err) {
    if (err) cb(*err);
    else cb(Result<void>{});
  };
}

}  // namespace

Result<void> Engine::write(Buffer dst, std::size_t offset, std::span<const std::byte> src, WriteMode mode,
                           DoneCallback on_done) {
  Impl& e = *impl_;
  auto rec = e.memory.live_buffer(dst, "write");
  if (!rec) return std::move(rec).error();
  BufferRec& r = *rec.value();
  UVCL_TRY(check_range("write", dst, r, offset, src.size()));
  DeviceCtx& d = *e.devices[r.device];
  if (d.state == sched::DeviceState::Lost)
    return Error{Status::DeviceLost, "write: device " + std::to_string(r.device) + " is lost"};
  // Someone waits for on_done: ask the driver for a completion callback
  // (otherwise only the 1 ms poll timer would notice the completion).
  const bool awaited = static_cast<bool>(on_done);
  // What can fail comes first: the command is then built in place in the
  // window (nothing in between may touch it).
  FinalHook on_final;
  const void* host_src = src.data();
  if (mode == WriteMode::Copy) {
    auto staging = d.staging->acquire(src.size());
    if (!staging) return std::move(staging).error().context("write");
    std::memcpy(staging->ptr, src.data(), src.size());
    host_src = staging->ptr;
    on_final = [&e, dev = r.device, s = staging.value(), done = done_hook(std::move(on_done))](
                   CommandId id, const std::optional<Error>& err) {
      e.devices[dev]->staging->give_back(s);
      if (done) done(id, err);
    };
  } else {
    auto held = e.memory.hold_host_range(src.data(), src.size(), "write", done_hook(std::move(on_done)));
    if (!held) return std::move(held).error();
    on_final = std::move(held).value();
  }
  Command& c = e.submitter.stage(r.device);
  c.op = Op::Write;
  c.accesses.push_back(write_access(dst, r, offset, src.size()));
  c.offset = offset;
  c.bytes = src.size();
  c.host_src = host_src;
  c.wants_callback = awaited;
  c.on_final = std::move(on_final);
  ++e.counters.writes;
  e.counters.bytes_to_device += src.size();
  e.submitter.commit(r.device);
  return {};
  // NOLINTNEXTLINE(clang-analyzer-cplusplus.NewDeleteLeaks): the std::function from done_hook is owned by c.on_final, moved into the queue
}

Result<void> Engine::fill(Buffer dst, std::span<const std::byte> pattern, std::size_t offset, std::size_t bytes,
                          DoneCallback on_done) {
  Impl& e = *impl_;
  auto rec = e.memory.live_buffer(dst, "fill");
  if (!rec) return std::move(rec).error();
  BufferRec& r = *rec.value();
  const std::size_t p = pattern.size();
  if (p == 0 || p > 128 || (p & (p - 1)) != 0)
    return Error{Status::InvalidArgument, "fill: pattern size " + std::to_string(p) + " is not a power of two 1..128"};
  if (offset % p != 0 || bytes % p != 0)
    return Error{Status::InvalidArgument, "fill: offset " + std::to_string(offset) + " and size " +
                                              std::to_string(bytes) + " must be multiples of the pattern size " +
                                              std::to_string(p)};
  UVCL_TRY(check_range("fill", dst, r, offset, bytes));
  if (e.devices[r.device]->state == sched::DeviceState::Lost)
    return Error{Status::DeviceLost, "fill: device " + std::to_string(r.device) + " is lost"};
  Command& c = e.submitter.stage(r.device);
  c.op = Op::Fill;
  c.accesses.push_back(write_access(dst, r, offset, bytes));
  c.offset = offset;
  c.bytes = bytes;
  c.pattern.assign(pattern.begin(), pattern.end());
  c.wants_callback = static_cast<bool>(on_done);
  c.on_final = done_hook(std::move(on_done));
  ++e.counters.writes;
  e.submitter.commit(r.device);
  return {};
}

// A read of `bytes` at `offset` of buffer `src` into `dst`, built in place
// in its device's window and submitted as a read is (Submitter::submit_read).
static void enqueue_read(Engine::Impl& e, BufferRec& r, Buffer src, std::size_t offset, std::size_t bytes, void* dst,
                         bool into_caller_memory, FinalHook on_final) {
  Command& c = e.submitter.stage(r.device);
  c.op = Op::Read;
  c.accesses.push_back(Access{src.id, true, false, &r});
  c.offset = offset;
  c.bytes = bytes;
  c.host_dst = dst;
  c.into_caller_memory = into_caller_memory;
  c.wants_callback = true;
  c.on_final = std::move(on_final);
  ++e.counters.reads;
  e.counters.bytes_from_device += bytes;
  e.submitter.commit(r.device);
  e.submitter.submit_read(r.device);
}

Result<void> Engine::read(Buffer src, std::size_t offset, std::size_t bytes, ReadCallback on_data) {
  Impl& e = *impl_;
  if (!on_data) return Error{Status::InvalidArgument, "read: a callback is required"};
  auto rec = e.memory.live_buffer(src, "read");
  if (!rec) return std::move(rec).error();
  BufferRec& r = *rec.value();
  UVCL_TRY(check_range("read", src, r, offset, bytes));
  DeviceCtx& d = *e.devices[r.device];
  if (d.state == sched::DeviceState::Lost)
    return Error{Status::DeviceLost, "read: device " + std::to_string(r.device) + " is lost"};
  auto staging = d.staging->acquire(bytes);
  if (!staging) return std::move(staging).error().context("read");
  const std::uint32_t slot = e.transfers.park_read({std::move(on_data), staging.value(), bytes, r.device});
  // Into the engine's staging: a block given back early goes to no other
  // transfer of the lost device (each is refused), so sharing an event is
  // safe.
  enqueue_read(e, r, src, offset, bytes, staging->ptr, false,
               [t = &e.transfers, slot](CommandId, const std::optional<Error>& err) { t->deliver_read(slot, err); });
  return {};
}

std::uint32_t Transfers::park_read(PendingRead read) {
  if (free_read_slots.empty()) {
    pending_reads.push_back(std::move(read));
    return static_cast<std::uint32_t>(pending_reads.size() - 1);
  }
  const std::uint32_t slot = free_read_slots.back();
  free_read_slots.pop_back();
  pending_reads[slot] = std::move(read);
  return slot;
}

void Transfers::deliver_read(std::uint32_t slot, const std::optional<Error>& error) {
  // Out of its slot first: the callback may issue reads that reuse it.
  PendingRead r = std::move(pending_reads[slot]);
  free_read_slots.push_back(slot);
  if (error) r.on_data(*error);
  else r.on_data(std::span<const std::byte>(static_cast<const std::byte*>(r.staging.ptr), r.bytes));
  e.devices[r.device]->staging->give_back(r.staging);
}

Result<void> Engine::read_into(Buffer src, std::size_t offset, std::span<std::byte> dst, DoneCallback on_done) {
  Impl& e = *impl_;
  auto rec = e.memory.live_buffer(src, "read_into");
  if (!rec) return std::move(rec).error();
  BufferRec& r = *rec.value();
  UVCL_TRY(check_range("read_into", src, r, offset, dst.size()));
  if (e.devices[r.device]->state == sched::DeviceState::Lost)
    return Error{Status::DeviceLost, "read_into: device " + std::to_string(r.device) + " is lost"};
  auto held = e.memory.hold_host_range(dst.data(), dst.size(), "read_into", done_hook(std::move(on_done)));
  if (!held) return std::move(held).error();
  enqueue_read(e, r, src, offset, dst.size(), dst.data(), true, std::move(held).value());
  return {};
}

Result<void> Engine::copy(Buffer src, std::size_t src_offset, Buffer dst, std::size_t dst_offset, std::size_t bytes,
                          DoneCallback on_done) {
  Impl& e = *impl_;
  auto srec = e.memory.live_buffer(src, "copy source");
  if (!srec) return std::move(srec).error();
  auto drec = e.memory.live_buffer(dst, "copy destination");
  if (!drec) return std::move(drec).error();
  BufferRec& s = *srec.value();
  BufferRec& t = *drec.value();
  UVCL_TRY(check_range("copy source", src, s, src_offset, bytes));
  UVCL_TRY(check_range("copy destination", dst, t, dst_offset, bytes));
  for (std::uint32_t dev : {s.device, t.device})
    if (e.devices[dev]->state == sched::DeviceState::Lost)
      return Error{Status::DeviceLost, "copy: device " + std::to_string(dev) + " is lost"};
  ++e.counters.copies;
  e.counters.bytes_copied += bytes;

  if (s.device == t.device) {
    if (src == dst && src_offset < dst_offset + bytes && dst_offset < src_offset + bytes)
      return Error{Status::InvalidArgument, "copy: source and destination ranges overlap in buffer " +
                                                std::to_string(src.id)};
    Command c;
    c.op = Op::Copy;
    c.accesses.push_back(Access{src.id, true, false});
    if (src == dst) c.accesses[0].write = true;
    else c.accesses.push_back(write_access(dst, t, dst_offset, bytes));
    c.src_offset = src_offset;
    c.offset = dst_offset;
    c.bytes = bytes;
    c.on_final = done_hook(std::move(on_done));
    c.wants_callback = static_cast<bool>(c.on_final);
    e.submitter.enqueue(s.device, std::move(c));
    return {};
  }

  // Across devices, through a ring of pinned chunks: blocks first, so a
  // failure leaves nothing behind.
  const std::size_t chunk_bytes = std::size_t{e.config.cross_copy_chunk_mib} << 20;
  const std::size_t n = (bytes + chunk_bytes - 1) / chunk_bytes;
  const std::size_t ring = std::min<std::size_t>(n, e.config.cross_copy_ring);
  CrossCopy x;
  x.src_device = s.device;
  x.dst_device = t.device;
  x.dst = dst.id;
  if (cl_int rc = e.api->clRetainMemObject(t.mem); rc != CL_SUCCESS)
    return cl::call_error(Status::MemoryCopyH2P, "clRetainMemObject(cross-device copy destination)", rc);
  x.dst_mem = t.mem;
  x.dst_offset = dst_offset;
  x.read_from = src.id;
  x.read_offset = src_offset;
  x.chunks.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    x.chunks[i].offset = i * chunk_bytes;
    x.chunks[i].bytes = std::min(chunk_bytes, bytes - i * chunk_bytes);
  }
  StagingPool& pool = *e.devices[s.device]->staging;
  auto give_back_all = [&] {
    for (const CrossChunk& c : x.chunks) pool.give_back(c.staging);
    e.api->clReleaseMemObject(x.dst_mem);
  };
  for (std::size_t i = 0; i < ring; ++i) {
    auto st = pool.acquire(x.chunks[i].bytes);
    if (!st) {
      give_back_all();
      return std::move(st).error().context("cross-device copy");
    }
    x.chunks[i].staging = st.value();
  }
  if (ring < n) {  // the reads beyond the ring need the source later
    ++s.refs;
    x.held = src.id;
  }
  const std::uint64_t xid = e.next_handle++;
  x.reads_issued = ring;
  e.transfers.crosses.emplace(xid, std::move(x));
  std::vector<CommandId> reads;
  for (std::size_t i = 0; i < ring; ++i) reads.push_back(e.transfers.cross_read(xid, i));
  e.submitter.submit_window(s.device);
  if (ring < n) {
    // Chunks beyond the ring are read once earlier ones have landed. Until a
    // later command writes the source they read it in place; that command
    // first has the copy snapshot what is still unread (snapshot_unread).
    // Counted only now: the window just submitted holds earlier commands,
    // whose writes the copy must see.
    ++s.cross_readers;
    e.transfers.crosses.at(xid).lazy = true;
  }
  Command w;
  w.op = Op::CrossWrite;
  w.accesses.push_back(write_access(dst, t, dst_offset, bytes));
  // Later chunks' reads come after these (they reuse their blocks); the
  // engine holds each chunk's write until its read is done.
  w.extra_producers = std::move(reads);
  w.cross = xid;
  w.bytes = bytes;
  w.on_final = done_hook(std::move(on_done));
  e.transfers.crosses.at(xid).dst_command = e.submitter.enqueue(t.device, std::move(w));
  e.submitter.submit_window(t.device);
  return {};
}

CommandId Transfers::cross_read(std::uint64_t xid, std::size_t i, bool late) {
  const CrossCopy& x = crosses.at(xid);
  const CrossChunk& chunk = x.chunks[i];
  Command r;
  r.op = Op::Read;
  r.accesses.push_back(Access{x.read_from, true, false});
  r.offset = x.read_offset + chunk.offset - x.read_base;
  r.bytes = chunk.bytes;
  r.host_dst = chunk.staging.ptr;
  r.wants_callback = true;
  r.on_transfer_queue = late;
  // A late read is made long after the copy, maybe in another error scope:
  // its failure is the copy's, in the copy's scope.
  r.reports_as = x.dst_command;
  r.on_final = [this, xid, i](CommandId, const std::optional<Error>& err) { cross_chunk_read(xid, i, err); };
  const CommandId id = e.submitter.enqueue(x.src_device, std::move(r));
  crosses.at(xid).chunks[i].read = id;  // enqueue may have submitted: look x up again
  return id;
}

void Transfers::release_held(CrossCopy& x) {
  if (x.held == 0) return;
  const std::uint64_t id = x.held;
  x.held = 0;
  BufferRec* b = e.memory.buffers.find(id);
  if (!b) return;
  if (x.lazy) --b->cross_readers;
  x.lazy = false;
  if (b->state == sched::BufferState::Live) e.memory.drop_ref(id, *b);
}

void Transfers::snapshot_unread(std::uint64_t buffer) {
  for (auto& [xid, x] : crosses) {
    if (!x.lazy || x.read_from != buffer) continue;
    if (x.reads_issued == x.chunks.size() || x.error || x.abandoned) {
      release_held(x);
      continue;
    }
    const std::size_t base = x.chunks[x.reads_issued].offset;
    const std::size_t rest = x.chunks.back().offset + x.chunks.back().bytes - base;
    const std::string what = "copy: snapshot of the unread part of buffer " + std::to_string(buffer);
    auto snap = e.memory.allocate(*e.devices[x.src_device], x.src_device, rest, what.c_str());
    if (!snap) {  // the copy fails (reported when it ends); the command that writes the source goes on
      x.error = std::move(snap).error();
      release_held(x);
      continue;
    }
    Command c;
    c.op = Op::Copy;
    c.accesses.push_back(Access{buffer, true, false});
    c.accesses.push_back(Access{snap->id, false, true});
    c.src_offset = x.read_offset + base;
    c.bytes = rest;
    // Not on a compute queue: commands made after the copy, queued there
    // ahead of it, may wait (through other copies) for this very copy,
    // whose later chunks read the snapshot.
    c.held = true;
    c.reports_as = x.dst_command;
    const CommandId snapshot = e.submitter.enqueue(x.src_device, std::move(c));
    release_held(x);  // the snapshot's copy holds the source until it ran
    x.held = x.read_from = snap->id;
    x.snapshot = snapshot;
    x.read_offset = 0;
    x.read_base = base;
    ++e.counters.snapshots;
  }
}

namespace {

// The command a cross-device copy waits for through `w`, for error messages:
// submit_one took the copy's waits from the destination's hazard slots and
// the device's timed-launch barrier, which still hold them. 0: not found.
CommandId wait_owner(const Engine::Impl& e, const DeviceCtx& d, const Command& c, cl_event w) {
  auto owns = [&](CommandId id) {
    const CommandRec* r = e.commands.find(id);
    return r && (r->event == w || r->gate == w);
  };
  if (d.barrier && owns(*d.barrier)) return *d.barrier;
  for (const Access& a : c.accesses) {
    const sched::BufferHazards& h = a.rec->hazards;
    if (h.writer && owns(h.writer->id)) return h.writer->id;
    for (const sched::Slot& s : h.readers)
      if (owns(s.id)) return s.id;
  }
  return 0;
}

// Takes over a command's waits for the engine to poll: each retained, with
// the command it belongs to, and a driver callback asked for to wake the
// loop when it completes. Returns the first failure to retain one.
std::optional<Error> take_waits(Engine::Impl& e, const DeviceCtx& d, const Command& c, std::span<const cl_event> waits,
                                PolledWaits& out) {
  std::optional<Error> error;
  for (cl_event w : waits) {
    if (cl_int r = e.api->clRetainEvent(w); r != CL_SUCCESS) {
      if (!error) error = cl::call_error(Status::KernelSync, "clRetainEvent(wait of an engine-run command)", r);
      continue;
    }
    out.events.push_back(w);
    out.ids.push_back(wait_owner(e, d, c, w));
    e.ask_callback(d, w);
  }
  return error;
}

// True once every wait has been seen complete; each is released then.
// failed(command, status) for each that completed with an error.
template <class Failed>
bool waits_done(Engine::Impl& e, PolledWaits& w, Failed failed) {
  while (!w.events.empty()) {
    cl_int status = CL_QUEUED;
    ++e.status_queries;
    if (cl_int rc = e.api->clGetEventInfo(w.events.back(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                                          nullptr);
        rc != CL_SUCCESS)
      status = rc;
    if (status > CL_COMPLETE) return false;
    if (status < 0) failed(w.ids.back(), status);
    e.api->clReleaseEvent(w.events.back());
    w.events.pop_back();
    w.ids.pop_back();
  }
  return true;
}

void release_waits(const cl::Api& api, PolledWaits& w) {
  for (cl_event ev : w.events) api.clReleaseEvent(ev);
  w.events.clear();
  w.ids.clear();
}

void release_held_copy(const cl::Api& api, HeldCopy& h) {
  release_waits(api, h.waits);
  if (h.event) api.clReleaseEvent(h.event);
  for (cl_mem m : {h.src, h.dst})
    if (m) api.clReleaseMemObject(m);
}

std::string waited_for(CommandId owner, cl_int status) {
  return (owner ? "command " + std::to_string(owner) : std::string("an event")) + " it waits for completed with " +
         cl::error_name(status);
}

// True once everything the copy's destination command waits for has been
// seen complete. A failed one fails the copy.
bool cross_waits_done(Engine::Impl& e, CrossCopy& x) {
  return waits_done(e, x.dst_waits, [&](CommandId owner, cl_int status) {
    if (x.error) return;
    x.error = Error{Status::KernelSync, "copy (command " + std::to_string(x.dst_command) + ") into buffer " +
                                            std::to_string(x.dst) + " on device " + std::to_string(x.dst_device) +
                                            ": " + waited_for(owner, status)};
    x.error_reported = true;
  });
}

// Enqueues the copy's chunk writes that may go: read, and in chunk order.
// Returns true when none is left to enqueue (all out, or the copy failed).
bool cross_issue(Engine::Impl& e, DeviceCtx& d, CrossCopy& x, bool& flush) {
  if (!x.error && !x.abandoned && !cross_waits_done(e, x)) return false;
  if (x.error || x.abandoned) return true;
  Queue& tq = d.queues[d.transfer_queue()];
  for (; x.next_write < x.chunks.size(); ++x.next_write) {
    CrossChunk& chunk = x.chunks[x.next_write];
    if (!chunk.read_done) return false;
    const cl_int rc = e.api->clEnqueueWriteBuffer(tq.queue, x.dst_mem, CL_FALSE, x.dst_offset + chunk.offset, chunk.bytes,
                                                  chunk.staging.ptr, 0, nullptr, &chunk.write);
    if (rc != CL_SUCCESS) {
      chunk.write = nullptr;
      x.error = cl::call_error(Status::MemoryCopyH2P, "clEnqueueWriteBuffer(cross-device chunk)", rc);
      return true;
    }
    ++x.outstanding_writes;
    e.ask_callback(d, chunk.write);
    flush = true;
  }
  return true;
}

// A destination's chunk writes go out in the order of the copies' submission:
// a copy's writes wait until every earlier copy into the device has all of
// its writes out.
void cross_issue_device(Engine::Impl& e, DeviceCtx& d) {
  bool flush = false;
  while (!d.cross_writes.empty()) {
    auto it = e.transfers.crosses.find(d.cross_writes.front());
    if (it != e.transfers.crosses.end() && !cross_issue(e, d, it->second, flush)) break;
    d.cross_writes.pop_front();
  }
  if (flush) {
    ++e.counters.flushes;
    e.api->clFlush(d.queues[d.transfer_queue()].queue);
  }
}

}  // namespace

void Transfers::submit_cross_write(DeviceCtx& d, const Command& c, std::span<const cl_event> waits, cl_event* ev) {
  CrossCopy& x = crosses.at(c.cross);
  cl_int rc = CL_SUCCESS;
  *ev = e.api->clCreateUserEvent(d.context, &rc);
  if (rc != CL_SUCCESS) {
    *ev = nullptr;
    x.error = cl::call_error(Status::KernelSync, "clCreateUserEvent", rc);
    return;
  }
  // The engine waits for these itself (poll_crosses) before a chunk write
  // goes out, so the transfer queue never holds a command waiting on a user
  // event: one copy's writes waiting there on another copy's user event would
  // block, in order, the very writes that complete it.
  if (auto err = take_waits(e, d, c, waits, x.dst_waits); err && !x.error) x.error = std::move(err);
  x.user_event = *ev;
  x.dst_submitted = true;
  d.cross_writes.push_back(c.cross);
}

void Transfers::submit_held_copy(DeviceCtx& d, const Command& c, std::span<const cl_event> waits, cl_event* ev) {
  cl_int rc = CL_SUCCESS;
  *ev = e.api->clCreateUserEvent(d.context, &rc);
  if (rc != CL_SUCCESS || *ev == nullptr) {
    *ev = nullptr;
    return;
  }
  HeldCopy& h = held_copies.emplace_back();
  h.command = c.id;
  h.device = static_cast<std::uint32_t>(d.dev.info.index);
  h.src_offset = c.src_offset;
  h.dst_offset = c.offset;
  h.bytes = c.bytes;
  h.user_event = *ev;
  h.error = take_waits(e, d, c, waits, h.waits);
  // Both may be released before the copy is enqueued.
  h.src = c.accesses[0].rec->mem;
  h.dst = c.accesses[1].rec->mem;
  for (cl_mem* m : {&h.src, &h.dst}) {
    if (cl_int retained = e.api->clRetainMemObject(*m); retained != CL_SUCCESS) {
      if (!h.error) h.error = cl::call_error(Status::KernelSync, "clRetainMemObject(held copy)", retained);
      *m = nullptr;
    }
  }
  enqueue_ready_held_copies();  // most often nothing to wait for: no need to wait for the loop
}

void Transfers::enqueue_ready_held_copies() {
  for (HeldCopy& h : held_copies) {
    if (h.event || h.error || h.abandoned) continue;
    const bool ready = waits_done(e, h.waits, [&](CommandId owner, cl_int status) {
      if (h.error) return;
      h.error = Error{Status::KernelSync, waited_for(owner, status)};
      h.error_reported = true;
    });
    if (!ready || h.error) continue;
    DeviceCtx& d = *e.devices[h.device];
    Queue& tq = d.queues[d.transfer_queue()];
    if (cl_int rc = e.api->clEnqueueCopyBuffer(tq.queue, h.src, h.dst, h.src_offset, h.dst_offset, h.bytes, 0, nullptr,
                                               &h.event);
        rc != CL_SUCCESS) {
      h.event = nullptr;
      h.error = cl::call_error(Status::KernelSync, "clEnqueueCopyBuffer", rc);
      continue;
    }
    ++e.counters.events;
    ++e.counters.flushes;
    e.api->clFlush(tq.queue);
    e.ask_callback(d, h.event);
  }
}

void Transfers::poll_held_copies() {
  enqueue_ready_held_copies();
  for (std::size_t i = 0; i < held_copies.size();) {
    HeldCopy& h = held_copies[i];
    if (!h.error && !h.abandoned) {
      cl_int status = CL_QUEUED;
      if (h.event) {
        ++e.status_queries;
        if (e.api->clGetEventInfo(h.event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) !=
            CL_SUCCESS)
          status = CL_INVALID_EVENT;
      }
      if (status > CL_COMPLETE) {
        ++i;
        continue;
      }
      if (status < 0) h.error = Error{Status::KernelSync, std::string("completed with ") + cl::error_name(status)};
    }
    HeldCopy done = std::move(h);
    held_copies.erase(held_copies.begin() + static_cast<std::ptrdiff_t>(i));
    // Its user event only orders the command that overwrites its source
    // after it; the reads of the snapshot check its outcome themselves.
    if (!done.abandoned) complete_user_event(done.command, done.user_event, done.error, done.error_reported, true);
    release_held_copy(*e.api, done);
  }
}

void Transfers::complete_user_event(CommandId id, cl_event user_event, std::optional<Error>& error, bool reported,
                                    bool order_only) {
  const cl_int failed = order_only ? CL_COMPLETE : CL_INVALID_OPERATION;
  if (cl_int rc = e.api->clSetUserEventStatus(user_event, error ? failed : CL_COMPLETE); rc != CL_SUCCESS) {
    // Commands wait on this user event: left unset, they (and clFinish)
    // would wait forever. Try once more, as failed.
    Error err = cl::call_error(Status::KernelSync, "clSetUserEventStatus", rc);
    if (error) {
      e.report(id, err);  // a failure of its own, beside the one its callback gets
    } else {
      error = std::move(err);
      reported = false;
    }
    e.api->clSetUserEventStatus(user_event, failed);
  }
  // The command's callback gets what failed, not the user event's status.
  e.completion.event_completed(id, error ? CL_INVALID_OPERATION : CL_COMPLETE, 0, 0, error ? &*error : nullptr,
                               reported);
}

void Transfers::abandon() {
  for (auto& [id, x] : crosses) {
    if (!x.dst_submitted || x.abandoned) continue;
    e.api->clSetUserEventStatus(x.user_event, CL_INVALID_OPERATION);
    x.abandoned = true;
  }
  // A held copy's user event orders only the command that overwrites its
  // source, whose copy nothing will read now: that command runs.
  for (HeldCopy& h : held_copies) {
    if (h.abandoned) continue;
    e.api->clSetUserEventStatus(h.user_event, CL_COMPLETE);
    h.abandoned = true;
  }
}

void Transfers::release_all() {
  for (auto& [id, x] : crosses) {
    release_waits(*e.api, x.dst_waits);
    e.api->clReleaseMemObject(x.dst_mem);
    for (CrossChunk& c : x.chunks) {
      if (c.write) e.api->clReleaseEvent(c.write);
      e.devices[x.src_device]->staging->give_back(c.staging);
    }
    for (const Staging& st : x.free_blocks) e.devices[x.src_device]->staging->give_back(st);
  }
  crosses.clear();
  for (HeldCopy& h : held_copies) release_held_copy(*e.api, h);
  held_copies.clear();
}

void Transfers::cross_chunk_read(std::uint64_t xid, std::size_t i, const std::optional<Error>& error) {
  auto it = crosses.find(xid);
  if (it == crosses.end()) return;
  CrossCopy& x = it->second;
  x.chunks[i].read_done = true;
  ++x.reads_done;
  if (error && !x.error) {
    x.error = *error;
    x.error_reported = true;  // by the read's own outcome, or where it started upstream
  }
  poll_crosses();
}

void Transfers::poll_crosses() {
  // Finishing a copy completes its user event, which later copies may wait
  // for: go round until no copy finishes.
  for (bool again = true; again;) {
    poll_held_copies();  // first: late chunk reads may read a snapshot it completes
    for (const auto& d : e.devices) cross_issue_device(e, *d);
    std::vector<std::uint64_t> finished;
    std::vector<std::uint64_t> with_free_blocks;  // copies with landed chunks' blocks for their next reads
    for (auto& [xid, x] : crosses) {
      for (; x.landed < x.next_write; ++x.landed) {
        CrossChunk& chunk = x.chunks[x.landed];
        cl_int status = CL_QUEUED;
        ++e.status_queries;
        if (e.api->clGetEventInfo(chunk.write, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) !=
            CL_SUCCESS)
          status = CL_INVALID_EVENT;
        if (status > CL_COMPLETE) break;
        if (status < 0 && !x.error) {
          x.error = Error{Status::MemoryCopyH2P, std::string("cross-device chunk write completed with ") +
                                                     cl::error_name(status)};
        }
        e.api->clReleaseEvent(chunk.write);
        chunk.write = nullptr;
        --x.outstanding_writes;
        if (x.reads_issued + x.free_blocks.size() < x.chunks.size() && !x.error && !x.abandoned) {
          x.free_blocks.push_back(chunk.staging);
          chunk.staging = Staging{};
        }
      }
      if (!x.free_blocks.empty()) with_free_blocks.push_back(xid);
      const bool settled = x.error || x.abandoned || !x.dst_submitted || x.next_write == x.chunks.size();
      if (x.reads_done == x.reads_issued && settled && x.outstanding_writes == 0) finished.push_back(xid);
    }
    std::vector<std::uint32_t> sources;
    for (std::uint64_t xid : with_free_blocks)
      if (auto dev = issue_late_reads(xid)) sources.push_back(*dev);
    for (std::uint32_t dev : sources) e.submitter.submit_window(dev);
    for (std::uint64_t xid : finished) cross_finish(xid);
    again = !finished.empty();
  }
}

std::optional<std::uint32_t> Transfers::issue_late_reads(std::uint64_t xid) {
  CrossCopy& x = crosses.at(xid);
  if (x.error || x.abandoned) return std::nullopt;
  // What the reads read must be complete: its last writer (the copy's
  // source's, from before copy(); or the snapshot's copy). Made before
  // that, a read would wait in the transfer queue, and chunk writes queued
  // there behind it could be what that writer waits for. A timed launch
  // made since the copy is not waited for (Command::of_earlier_copy).
  const DeviceCtx& d = *e.devices[x.src_device];
  CommandId writer = x.snapshot;  // it may still sit in its window, recorded as no buffer's writer yet
  if (writer == 0) {
    const BufferRec* from = e.memory.buffers.find(x.read_from);
    if (from && from->hazards.writer) writer = from->hazards.writer->id;
  }
  if (writer != 0 && !e.is_complete(writer)) {
    if (x.producer_asked != writer) {  // the loop looks again once it completes
      e.ask_callback_for(d, writer);
      x.producer_asked = writer;
    }
    return std::nullopt;
  }
  const std::uint32_t device = x.src_device;
  while (!x.free_blocks.empty() && x.reads_issued < x.chunks.size()) {
    const std::size_t i = x.reads_issued++;
    x.chunks[i].staging = x.free_blocks.back();
    x.free_blocks.pop_back();
    cross_read(xid, i, true);
  }
  // Only once every read is made: the copy's reference may be the source's
  // last, and a read made after it was dropped would find no buffer.
  CrossCopy& again = crosses.at(xid);  // enqueue may have submitted: look x up again
  if (again.reads_issued == again.chunks.size()) release_held(again);
  return device;
}

void Transfers::cross_finish(std::uint64_t xid) {
  auto it = crosses.find(xid);
  if (it == crosses.end()) return;
  CrossCopy x = std::move(it->second);
  crosses.erase(it);
  for (CrossChunk& c : x.chunks) e.devices[x.src_device]->staging->give_back(c.staging);
  for (const Staging& s : x.free_blocks) e.devices[x.src_device]->staging->give_back(s);
  release_held(x);
  release_waits(*e.api, x.dst_waits);
  e.api->clReleaseMemObject(x.dst_mem);
  // Not submitted: its failure was reported when submission failed.
  // Abandoned: the teardown failed its user event; its callback is cancelled.
  if (!x.dst_submitted || x.abandoned) return;
  complete_user_event(x.dst_command, x.user_event, x.error, x.error_reported, false);
}

}  // namespace uvcl
