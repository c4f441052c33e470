// program_cache.hpp — program binaries cached on disk (opencl.cache_dir).
//
// Key: a hash of platform, device, driver version, build options and
// source. An entry holds the binary (CL_PROGRAM_BINARIES) and the parameter
// info of every kernel in it, because kernel argument info is only
// guaranteed for programs built from source. Entries are written to a
// temporary file and renamed, so readers never see a partial one; a corrupt,
// truncated or foreign entry is a miss and the program is built from source.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cl/kernel_info.hpp"
#include "uvcl/status.hpp"

namespace uvcl {

using CachedKernel = cl::KernelInfo;

struct CacheEntry {
  std::vector<unsigned char> binary;
  std::vector<CachedKernel> kernels;
};

class ProgramCache {
 public:
  explicit ProgramCache(std::string dir) : dir_(std::move(dir)) {}
  // Makes `dir` if it is missing (its parent must exist) and checks that it
  // is a directory uvcl can write: Engine::create refuses an unusable
  // opencl.cache_dir at start instead of ignoring it at every build.
  static Result<void> check_dir(const std::string& dir);

  struct Key {
    std::uint64_t a = 0, b = 0;  // two independent 64-bit hashes of the same text
    std::string file;            // where the entry lives
  };
  Key key(const std::string& platform, const std::string& device, const std::string& driver,
          const std::string& options, const std::string& source) const;
  std::optional<CacheEntry> load(const Key& k) const;
  // Best effort: a cache that cannot be written is not an error.
  bool store(const Key& k, const CacheEntry& e) const;

 private:
  std::string dir_;
};

}  // namespace uvcl
