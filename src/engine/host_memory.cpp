// host_memory.cpp — pinned host memory handed to the caller (alloc_host).
//
// A block comes from the device's staging pool and goes back there once it
// is released and no transfer in flight uses it: a transfer from pinned
// memory is a DMA the device may still be running after the call returned,
// so the block cannot be reused (or unmapped) before that transfer is final.
#include "engine/engine_impl.hpp"

namespace uvcl {

namespace {
std::string host_name(std::uint64_t id) { return "host memory " + std::to_string(id); }
}  // namespace

Result<HostMemory> Engine::alloc_host(std::size_t device, std::size_t bytes) {
  Impl& e = *impl_;
  auto usable = e.usable_device(device, "alloc_host");
  if (!usable) return std::move(usable).error();
  DeviceCtx& d = *usable.value();
  UVCL_TRY(Memory::check_allocation_size(d, bytes, "alloc_host"));
  auto block = d.staging->acquire(bytes);
  if (!block) return std::move(block).error().context("alloc_host " + std::to_string(bytes) + " bytes");
  const std::uint64_t id = e.next_handle++;
  HostRec& h = e.memory.host_memory[id];
  h.device = static_cast<std::uint32_t>(device);
  h.block = block.value();
  h.bytes = bytes;
  auto* first = static_cast<std::byte*>(h.block.ptr);
  e.memory.host_ranges.emplace(first, id);
  e.counters.host_memory_bytes += bytes;
  return HostMemory{id, std::span<std::byte>(first, bytes)};
}

Result<void> Engine::release(HostMemory hm) {
  Impl& e = *impl_;
  e.check_thread("release");
  if (e.released_everything()) return {};  // closed or being destroyed: released with everything else
  auto it = e.memory.host_memory.find(hm.id);
  if (it == e.memory.host_memory.end() || it->second.released)
    return Error{Status::InvalidArgument,
                 "release: " + host_name(hm.id) + " is not live host memory (released or never allocated)"};
  HostRec& h = it->second;
  if (hm.bytes.data() != nullptr && hm.bytes.data() != static_cast<std::byte*>(h.block.ptr))
    return Error{Status::InvalidArgument, "release: the span does not match " + host_name(hm.id)};
  h.released = true;
  if (h.uses == 0) e.memory.free_host(hm.id);
  return {};
}

void Memory::free_host(std::uint64_t id) {
  auto it = host_memory.find(id);
  HostRec& h = it->second;
  host_ranges.erase(static_cast<const std::byte*>(h.block.ptr));
  e.counters.host_memory_bytes -= h.bytes;
  e.devices[h.device]->staging->give_back(h.block);
  host_memory.erase(it);
}

Result<FinalHook> Memory::hold_host_range(const void* p, std::size_t n, const char* what, FinalHook then) {
  if (host_ranges.empty()) return then;
  const auto* first = static_cast<const std::byte*>(p);
  auto it = host_ranges.upper_bound(first);
  if (it == host_ranges.begin()) return then;
  --it;
  const std::uint64_t id = it->second;
  HostRec& h = host_memory.at(id);
  const std::size_t start = static_cast<std::size_t>(first - it->first);
  if (start >= h.bytes) return then;  // past its end: not host memory
  if (h.released)
    return Error{Status::InvalidArgument, std::string(what) + ": " + host_name(id) + " was released"};
  if (n > h.bytes - start)
    return Error{Status::InvalidArgument, std::string(what) + ": range [" + std::to_string(start) + ", " +
                                              std::to_string(start) + " + " + std::to_string(n) +
                                              ") runs past the end of " + host_name(id) + " of " +
                                              std::to_string(h.bytes) + " bytes"};
  ++h.uses;
  return FinalHook([this, id, then = std::move(then)](CommandId cmd, const std::optional<Error>& err) {
    if (then) then(cmd, err);  // first: it may release the memory
    HostRec& held = host_memory.at(id);
    if (--held.uses == 0 && held.released) free_host(id);
  });
}

void Memory::free_host_memory() {
  for (auto& [id, h] : host_memory) e.devices[h.device]->staging->give_back(h.block);
  host_memory.clear();
  host_ranges.clear();
  e.counters.host_memory_bytes = 0;
}

}  // namespace uvcl
