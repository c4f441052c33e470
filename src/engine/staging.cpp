#include "engine/staging.hpp"

#include <bit>
#include <string>

namespace uvcl {

StagingPool::~StagingPool() {
  for (auto& [cap, s] : free_)
    if (!s.in_slab) destroy(s);
  for (Staging& s : slabs_) destroy(s);
  if (!free_.empty() || !slabs_.empty()) api_.clFinish(queue_);
}

Result<Staging> StagingPool::acquire(std::size_t bytes) {
  std::size_t want = bytes < kMinBlock ? kMinBlock : std::bit_ceil(bytes);
  if (want < bytes) want = bytes;  // bit_ceil overflow guard
  if (auto it = free_.lower_bound(want); it != free_.end() && it->first <= want * 2) {
    Staging s = it->second;
    cached_ -= it->first;
    free_.erase(it);
    ++live_;
    live_bytes_ += s.capacity;
    return s;
  }
  if (want <= kSlabBlockMax) {
    auto slab = map_new(kSlabBytes);
    if (!slab) return std::move(slab).error();
    slabs_.push_back(slab.value());
    auto* base = static_cast<unsigned char*>(slab->ptr);
    for (std::size_t off = want; off + want <= kSlabBytes; off += want) {
      free_.emplace(want, Staging{slab->mem, base + off, want, true});
      cached_ += want;
    }
    ++live_;
    live_bytes_ += want;
    return Staging{slab->mem, base, want, true};
  }
  auto s = map_new(want);
  if (!s) return std::move(s).error();
  ++live_;
  live_bytes_ += want;
  return s;
}

Result<Staging> StagingPool::map_new(std::size_t want) {
  cl_int rc = CL_SUCCESS;
  Staging s;
  s.capacity = want;
  s.mem = api_.clCreateBuffer(context_, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, want, nullptr, &rc);
  if (rc != CL_SUCCESS)
    return cl::call_error(Status::MemoryAllocation, "clCreateBuffer(pinned staging)", rc)
        .context("staging " + std::to_string(want) + " bytes");
  s.ptr = api_.clEnqueueMapBuffer(queue_, s.mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, want, 0, nullptr, nullptr,
                                  &rc);
  if (rc != CL_SUCCESS) {
    api_.clReleaseMemObject(s.mem);
    return cl::call_error(Status::MemoryAllocation, "clEnqueueMapBuffer(pinned staging)", rc);
  }
  return s;
}

void StagingPool::give_back(Staging s) {
  if (!s) return;
  --live_;
  live_bytes_ -= s.capacity;
  if (!s.in_slab && cached_ + s.capacity > kMaxCachedBytes) {
    destroy(s);
    return;
  }
  cached_ += s.capacity;
  free_.emplace(s.capacity, s);
}

void StagingPool::destroy(Staging& s) {
  api_.clEnqueueUnmapMemObject(queue_, s.mem, s.ptr, 0, nullptr, nullptr);
  api_.clReleaseMemObject(s.mem);
  s = Staging{};
}

}  // namespace uvcl
