// memory.cpp — device buffers: accounting, reference counts, deferred frees.
#include "engine/engine_impl.hpp"

namespace uvcl {

namespace {
std::string buffer_name(Buffer b) { return "buffer " + std::to_string(b.id); }
}  // namespace

Result<BufferRec*> Engine::Impl::live_buffer(Buffer b, const char* what) {
  auto it = buffers.find(b.id);
  if (it == buffers.end() || it->second.state != sched::BufferState::Live)
    return Error{Status::InvalidArgument,
                 std::string(what) + ": " + buffer_name(b) + " is not a live buffer (released or never allocated)"};
  return &it->second;
}

Result<DeviceCtx*> Engine::Impl::usable_device(std::size_t device, const char* what) {
  if (device >= devices.size())
    return Error{Status::InvalidArgument, std::string(what) + ": device " + std::to_string(device) +
                                              " out of range (" + std::to_string(devices.size()) + " devices)"};
  DeviceCtx& d = *devices[device];
  if (d.state == sched::DeviceState::Lost)
    return Error{Status::DeviceLost, std::string(what) + ": device " + std::to_string(device) + " is lost"};
  return &d;
}

Result<void> Engine::Impl::check_allocation_size(const DeviceCtx& d, std::size_t bytes, const char* what) {
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
  DeviceCtx& d = *usable.value();
  // Free memory first: its message carries both numbers a caller can act on.
  const std::uint64_t total = d.dev.info.global_memory;
  const std::uint64_t free = total > d.allocated ? total - d.allocated : 0;
  if (bytes > free)
    return Error{Status::MemoryAllocation, "allocate: requested " + std::to_string(bytes) + " bytes on device " +
                                               std::to_string(device) + ", " + std::to_string(free) + " free"};
  UVCL_TRY(Impl::check_allocation_size(d, bytes, "allocate"));
  cl_int rc = CL_SUCCESS;
  cl_mem mem = e.api->clCreateBuffer(d.context, CL_MEM_READ_WRITE, bytes, nullptr, &rc);
  if (rc != CL_SUCCESS)
    return cl::call_error(Status::MemoryAllocation, "clCreateBuffer", rc)
        .context("allocate " + std::to_string(bytes) + " bytes on device " + std::to_string(device));
  const std::uint64_t id = e.next_handle++;
  BufferRec& b = e.buffers[id];
  b.device = static_cast<std::uint32_t>(device);
  b.mem = mem;
  b.bytes = bytes;
  d.allocated += bytes;
  return Buffer{id};
}

Result<void> Engine::retain(Buffer b) {
  auto rec = impl_->live_buffer(b, "retain");
  if (!rec) return std::move(rec).error();
  ++rec.value()->refs;
  return {};
}

Result<void> Engine::release(Buffer b) {
  Impl& e = *impl_;
  auto rec = e.live_buffer(b, "release");
  if (!rec) return std::move(rec).error();
  BufferRec& r = *rec.value();
  if (--r.refs > 0) return {};
  r.state = *sched::next(r.state, sched::BufferEvent::LastRelease);
  e.dying.push_back(b.id);
  e.free_dying_buffers();
  e.update_busy();
  return {};
}

Result<std::size_t> Engine::buffer_size(Buffer b) const {
  auto rec = impl_->live_buffer(b, "buffer_size");
  if (!rec) return std::move(rec).error();
  return rec.value()->bytes;
}

std::uint64_t Engine::free_bytes(std::size_t device) const {
  if (device >= impl_->devices.size()) return 0;
  const DeviceCtx& d = *impl_->devices[device];
  return d.dev.info.global_memory > d.allocated ? d.dev.info.global_memory - d.allocated : 0;
}

// A Dying buffer is freed once no window holds it and every tracked use has
// completed — by event status, never by draining a queue.
void Engine::Impl::free_dying_buffers() {
  for (std::size_t i = 0; i < dying.size();) {
    auto it = buffers.find(dying[i]);
    if (it == buffers.end()) {
      dying[i] = dying.back();
      dying.pop_back();
      continue;
    }
    BufferRec& b = it->second;
    if (b.pending_uses > 0 || !hazards.uses_complete(b.hazards)) {
      ++i;
      continue;
    }
    free_buffer(it->first, b);
    buffers.erase(it);
    dying[i] = dying.back();
    dying.pop_back();
  }
}

void Engine::Impl::free_buffer(std::uint64_t, BufferRec& b) {
  b.state = *sched::next(b.state, sched::BufferEvent::UsesDone);
  hazards.clear(b.hazards);
  if (b.mem) api->clReleaseMemObject(b.mem);
  b.mem = nullptr;
  DeviceCtx& d = *devices[b.device];
  d.allocated -= b.bytes;
}

}  // namespace uvcl
