// program_memo.hpp — built programs kept in memory, bounded, least recently
// used evicted first.
//
// PoCL builds synchronously inside clBuildProgram, so a server that compiles
// the same kernels for every job would stall the loop for each build. The
// memo holds one reference on each built program; a compile of the same
// (device, options, source) takes a new reference instead of building.
// Programs still in use keep their own references, so eviction only drops
// the memo's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/program_cache.hpp"

namespace uvcl {

class ProgramMemo {
 public:
  using Handle = void*;  // a cl_program; opaque here so the memo needs no OpenCL
  // release drops the memo's reference on an evicted or cleared program.
  ProgramMemo(std::size_t capacity, std::function<void(Handle)> release)
      : capacity_(capacity), release_(std::move(release)) {}
  ~ProgramMemo() { clear(); }
  ProgramMemo(const ProgramMemo&) = delete;
  ProgramMemo& operator=(const ProgramMemo&) = delete;

  struct Hit {
    Handle program;
    const std::vector<CachedKernel>* kernels;  // parameter info, empty for source builds
  };
  // Marks the entry most recently used. The caller retains the program.
  std::optional<Hit> find(std::uint32_t device, const std::string& options, const std::string& source);
  // Takes over one reference on program (released at once when capacity is 0
  // or the key is already present).
  void insert(std::uint32_t device, const std::string& options, const std::string& source, Handle program,
              std::vector<CachedKernel> kernels);
  void clear();

  std::size_t size() const { return order_.size(); }
  std::size_t capacity() const { return capacity_; }

 private:
  struct Entry {
    std::string key;
    Handle program;
    std::vector<CachedKernel> kernels;
  };
  static std::string make_key(std::uint32_t device, const std::string& options, const std::string& source);

  std::size_t capacity_;
  std::function<void(Handle)> release_;
  std::list<Entry> order_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace uvcl
