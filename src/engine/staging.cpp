#include "engine/staging.hpp"

#include <bit>
#include <string>
#include <utility>

namespace uvcl {

namespace {
// The size class of a power-of-two capacity.
std::size_t size_class(std::size_t capacity) { return static_cast<std::size_t>(std::bit_width(capacity)) - 1; }
}  // namespace

StagingPool::~StagingPool() {
  for (auto& blocks : free_)
    for (Staging& s : blocks)
      if (!s.in_slab) destroy(s);
  for (Staging& s : slabs_) destroy(s);
  const bool mapped = free_blocks_ > 0 || !slabs_.empty() || spare_slab_;
  if (spare_slab_) destroy(spare_slab_);
  if (mapped) api_.clFinish(queue_);
}

Result<void> StagingPool::reserve_slab() {
  if (spare_slab_) return {};
  auto slab = map_new(kSlabBytes);
  if (!slab) return std::move(slab).error();
  spare_slab_ = slab.value();
  return {};
}

Result<Staging> StagingPool::acquire(std::size_t bytes) {
  std::size_t want = bytes < kMinBlock ? kMinBlock : std::bit_ceil(bytes);
  if (want < bytes) want = bytes;  // bit_ceil overflow guard
  // A free block of the size asked for, or else one of twice that size.
  if (std::has_single_bit(want))
    for (std::size_t k = size_class(want); k < free_.size() && k <= size_class(want) + 1; ++k) {
      if (free_[k].empty()) continue;
      Staging s = free_[k].back();
      free_[k].pop_back();
      --free_blocks_;
      cached_ -= s.capacity;
      live_bytes_ += s.capacity;
      return s;
    }
  if (want <= kSlabBlockMax) {
    if (!spare_slab_) {
      auto slab = map_new(kSlabBytes);
      if (!slab) return std::move(slab).error();
      spare_slab_ = slab.value();
    }
    const Staging* slab = &slabs_.emplace_back(std::exchange(spare_slab_, Staging{}));
    auto* base = static_cast<unsigned char*>(slab->ptr);
    for (std::size_t off = want; off + want <= kSlabBytes; off += want) {
      free_[size_class(want)].push_back(Staging{slab->mem, base + off, want, true});
      ++free_blocks_;
      cached_ += want;
    }
    live_bytes_ += want;
    return Staging{slab->mem, base, want, true};
  }
  auto s = map_new(want);
  if (!s) return std::move(s).error();
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
  live_bytes_ -= s.capacity;
  if (!s.in_slab && cached_ + s.capacity > kMaxCachedBytes) {
    destroy(s);
    return;
  }
  if (!std::has_single_bit(s.capacity)) {  // not from a size class (a request past 2^63 bytes): not kept
    destroy(s);
    return;
  }
  cached_ += s.capacity;
  free_[size_class(s.capacity)].push_back(s);
  ++free_blocks_;
}

void StagingPool::destroy(Staging& s) {
  api_.clEnqueueUnmapMemObject(queue_, s.mem, s.ptr, 0, nullptr, nullptr);
  api_.clReleaseMemObject(s.mem);
  s = Staging{};
}

}  // namespace uvcl
