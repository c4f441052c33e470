// staging.hpp — pinned host memory for transfers, pooled per context.
//
// Transfers from and to pinned memory (CL_MEM_ALLOC_HOST_PTR, mapped once)
// run at the pinned rate, several times the rate from pageable memory on a
// GPU. Blocks are pooled by power-of-two size class so small read-backs do
// not create and map a buffer each time.
#pragma once

#include <cstddef>
#include <array>
#include <vector>

#include "cl/api.hpp"

namespace uvcl {

struct Staging {
  cl_mem mem = nullptr;
  void* ptr = nullptr;
  std::size_t capacity = 0;
  bool in_slab = false;  // part of a shared slab: never unmapped on its own
  explicit operator bool() const { return ptr != nullptr; }
};

class StagingPool {
 public:
  // Keeps at most this many bytes of free blocks; more are released.
  static constexpr std::size_t kMaxCachedBytes = std::size_t{256} << 20;
  static constexpr std::size_t kMinBlock = 4096;
  // Blocks up to kSlabBlockMax are carved from slabs of kSlabBytes (one
  // buffer, one map): many small transfers in flight at once would otherwise
  // create and map a pinned buffer each (~0.2 ms apiece on PoCL).
  static constexpr std::size_t kSlabBlockMax = std::size_t{64} << 10;
  static constexpr std::size_t kSlabBytes = std::size_t{1} << 20;

  StagingPool(const cl::Api& api, cl_context context, cl_command_queue map_queue)
      : api_(api), context_(context), queue_(map_queue) {}
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A block of at least `bytes`. Creating one maps it with a blocking
  // clEnqueueMapBuffer on a fresh buffer, on `map_queue`: a queue that
  // carries maps and unmaps only, so the map never waits behind a transfer
  // (nor behind one that waits on a user event only the loop can complete).
  Result<Staging> acquire(std::size_t bytes);
  // Maps one slab ahead of the first small block asked for, so that the
  // first read or write does not hold the loop for the map (a millisecond
  // and more on NVIDIA's OpenCL; Engine::create pays it instead).
  Result<void> reserve_slab();
  void give_back(Staging s);
  std::size_t bytes_live() const { return live_bytes_; }

 private:
  Result<Staging> map_new(std::size_t want);
  void destroy(Staging& s);
  const cl::Api& api_;
  cl_context context_;
  cl_command_queue queue_;
  // Free blocks by size class: free_[k] holds blocks of 2^k bytes. Vectors
  // keep their storage, so taking and giving back a block allocates nothing
  // (a tree node per give_back did, once per awaited read).
  std::array<std::vector<Staging>, 64> free_;
  Staging spare_slab_;  // reserve_slab's, not yet carved into blocks
  std::size_t free_blocks_ = 0;
  std::vector<Staging> slabs_;  // whole slabs, released with the pool
  std::size_t cached_ = 0;
  std::size_t live_bytes_ = 0;
};

}  // namespace uvcl
