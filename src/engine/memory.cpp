// memory.cpp — device buffers: accounting, reference counts, deferred frees.
#include "engine/engine_impl.hpp"

namespace uvcl {

namespace {
std::string buffer_name(Buffer b) { return "buffer " + std::to_string(b.id); }
}  // namespace

Result<BufferRec*> Memory::live_buffer(Buffer b, const char* what) {
  UVCL_TRY(e.refuse_new_work(what));
  return held_buffer(b, what);
}

Result<BufferRec*> Memory::held_buffer(Buffer b, const char* what) {
  e.check_thread(what);
  BufferRec* r = buffers.find(b.id);
  if (!r || r->state != sched::BufferState::Live)
    return Error{Status::InvalidArgument,
                 std::string(what) + ": " + buffer_name(b) + " is not a live buffer (released or never allocated)"};
  return r;
}

Result<DeviceCtx*> Engine::Impl::usable_device(std::size_t device, const char* what) {
  UVCL_TRY(refuse_new_work(what));
  if (device >= devices.size())
    return Error{Status::InvalidArgument, std::string(what) + ": device " + std::to_string(device) +
                                              " out of range (" + std::to_string(devices.size()) + " devices)"};
  DeviceCtx& d = *devices[device];
  if (d.state == sched::DeviceState::Lost)
    return Error{Status::DeviceLost, std::string(what) + ": device " + std::to_string(device) + " is lost"};
  return &d;
}

Result<void> Memory::check_allocation_size(const DeviceCtx& d, std::size_t bytes, const char* what) {
  if (bytes == 0) return Error{Status::InvalidArgument, std::string(what) + ": size must not be 0"};
  if (bytes > d.dev.info.max_allocation)
    return Error{Status::MemoryAllocation, std::string(what) + ": requested " + std::to_string(bytes) +
                                               " bytes, the device's largest allocation is " +
                                               std::to_string(d.dev.info.max_allocation)};
  return {};
}

Result<Buffer> Engine::allocate(std::size_t device, std::size_t bytes) {
  Impl& e = *impl_;
  auto usable = e.usable_device(device, "allocate");
  if (!usable) return std::move(usable).error();
  return e.memory.allocate(*usable.value(), device, bytes, "allocate");
}

Result<Buffer> Memory::allocate(DeviceCtx& d, std::size_t device, std::size_t bytes, const char* what) {
  // Free memory first: its message carries both numbers a caller can act on.
  const std::uint64_t total = d.dev.info.global_memory;
  const std::uint64_t free = total > d.allocated ? total - d.allocated : 0;
  if (bytes > free)
    return Error{Status::MemoryAllocation, std::string(what) + ": requested " + std::to_string(bytes) +
                                               " bytes on device " + std::to_string(device) + ", " +
                                               std::to_string(free) + " free"};
  UVCL_TRY(Memory::check_allocation_size(d, bytes, what));
  // A slot first: running out of them must not leak the memory.
  auto slot = buffers.add();
  if (!slot.record)
    return Error{Status::MemoryAllocation, std::string(what) + ": " +
                                               std::to_string(sched::HandleTable<BufferRec>::kSlots) +
                                               " buffer handles are in use or retired, the most one engine has"};
  cl_int rc = CL_SUCCESS;
  cl_mem mem = e.api->clCreateBuffer(d.context, CL_MEM_READ_WRITE, bytes, nullptr, &rc);
  if (rc != CL_SUCCESS) {
    buffers.erase(slot.handle);
    return cl::call_error(Status::MemoryAllocation, "clCreateBuffer", rc)
        .context(std::string(what) + " " + std::to_string(bytes) + " bytes on device " + std::to_string(device));
  }
  BufferRec& b = *slot.record;
  b.device = static_cast<std::uint32_t>(device);
  b.mem = mem;
  b.bytes = bytes;
  d.allocated += bytes;
  return Buffer{slot.handle};
}

Result<void> Engine::retain(Buffer b) {
  auto rec = impl_->memory.held_buffer(b, "retain");
  if (!rec) return std::move(rec).error();
  ++rec.value()->refs;
  return {};
}

Result<void> Engine::release(Buffer b) {
  Impl& e = *impl_;
  if (e.released_everything()) return {};  // closed or being destroyed: released with everything else
  auto rec = e.memory.held_buffer(b, "release");
  if (!rec) return std::move(rec).error();
  e.memory.drop_ref(b.id, *rec.value());
  e.update_busy();
  return {};
}

void Memory::drop_ref(std::uint64_t id, BufferRec& r) {
  if (--r.refs > 0) return;
  r.state = *sched::next(r.state, sched::BufferEvent::LastRelease);
  ++dying;
  if (r.pending_uses == 0) free_when_unused(id);  // else: once the window has submitted them
}

Result<std::size_t> Engine::buffer_size(Buffer b) const {
  auto rec = impl_->memory.held_buffer(b, "buffer_size");
  if (!rec) return std::move(rec).error();
  return rec.value()->bytes;
}

std::uint64_t Engine::free_bytes(std::size_t device) const {
  if (device >= impl_->devices.size()) return 0;
  const DeviceCtx& d = *impl_->devices[device];
  return d.dev.info.global_memory > d.allocated ? d.dev.info.global_memory - d.allocated : 0;
}

// The last uses of a buffer are its hazard slots: the last writer and the
// last reader per queue since. Earlier uses completed before them (the same
// in-order queue) or before the writer (it waited for them).
void Memory::free_when_unused(std::uint64_t id) {
  BufferRec& b = *buffers.find(id);
  auto wait_for = [&](CommandId use) {
    CommandRec* r = e.commands.find(use);
    if (!r || sched::device_done(r->state)) return;
    r->frees.push_back(id);
    ++b.uses_in_flight;
  };
  if (b.hazards.writer) wait_for(b.hazards.writer->id);
  for (const sched::Slot& r : b.hazards.readers) wait_for(r.id);
  // Every use is enqueued: the driver keeps the memory object until they
  // have run (the OpenCL contract), so it goes back now, as a bare program
  // releases a temporary right after enqueuing its last use. The record
  // stays Dying until then: its bytes count as allocated while the device
  // may still use them, and its hazards order nothing new.
  if (b.mem) {
    e.api->clReleaseMemObject(b.mem);
    b.mem = nullptr;
    ++mems_released;  // the driver may hand its address to the next buffer
  }
  if (b.uses_in_flight == 0) {
    free_buffer(id, b);
    buffers.erase(id);
  }
}

void Memory::release_uses(std::span<const std::uint64_t> frees) {
  for (std::uint64_t id : frees) {
    BufferRec* b = buffers.find(id);
    if (!b || --b->uses_in_flight > 0) continue;
    free_buffer(id, *b);
    buffers.erase(id);
  }
}

void Memory::free_buffer(std::uint64_t, BufferRec& b) {
  b.state = *sched::next(b.state, sched::BufferEvent::UsesDone);
  --dying;
  e.hazards.clear(b.hazards);
  DeviceCtx& d = *e.devices[b.device];
  d.allocated -= b.bytes;
}

}  // namespace uvcl
