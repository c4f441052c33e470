// disk_pool.hpp — files mapped into memory and uploaded without a copy.
//
// A Mapping is a whole file mapped read-only (mmap PROT_READ, MAP_PRIVATE).
// upload() hands a range of it to Engine::write with WriteMode::Borrow: the
// driver reads straight from the mapping, no staging copy on the host. The
// write's on_done callback owns a reference to the mapping, so the mapping
// stays mapped until every copy from it has completed (or failed, or was
// cancelled at engine teardown), whoever else let go of it; the last
// reference unmaps it.
//
// A DiskPool maps each file once while it is mapped (keyed by device and
// inode), and parses a safetensors header once per mapping.
//
// The mapped file must not be truncated while mapped (reading a page past
// the new end raises SIGBUS, as with any mmap reader). Errors are Io errors
// naming the file: "w.safetensors: cannot read: No such file or directory".
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "program/safetensors.hpp"
#include "uvcl/engine.hpp"

namespace uvcl::disk {

class Mapping {
 public:
  // Maps the whole file. An empty file gives an empty mapping.
  static Result<std::shared_ptr<const Mapping>> open(const std::string& path);
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  std::span<const std::byte> bytes() const noexcept { return {static_cast<const std::byte*>(data_), size_}; }
  const std::string& path() const noexcept { return path_; }
  std::uint64_t device() const noexcept { return dev_; }
  std::uint64_t inode() const noexcept { return ino_; }

  // Mappings currently mapped in this process (for tests and leak checks).
  static std::uint64_t live() noexcept;

 private:
  Mapping() = default;
  const void* data_ = nullptr;
  std::size_t size_ = 0;
  std::string path_;
  std::uint64_t dev_ = 0, ino_ = 0;
};

// A mapped safetensors file with its validated header.
struct SafetensorsFile {
  std::shared_ptr<const Mapping> mapping;
  safetensors::Header header;

  // The tensor's bytes inside the mapping.
  std::span<const std::byte> data(const safetensors::TensorInfo& t) const noexcept {
    return mapping->bytes().subspan(static_cast<std::size_t>(header.data_offset + t.begin),
                                    static_cast<std::size_t>(t.bytes()));
  }
};

class DiskPool {
 public:
  // The file's mapping: the one already mapped for it, if any, else a new one.
  Result<std::shared_ptr<const Mapping>> map(const std::string& path);
  // Maps the file and parses its safetensors header (once per mapping).
  // Malformed files are errors with `status`, naming the file.
  Result<std::shared_ptr<const SafetensorsFile>> safetensors(const std::string& path,
                                                             Status status = Status::InvalidArgument);

  // Files this pool has mapped that are still mapped.
  std::size_t mapped() const;

 private:
  using Key = std::pair<std::uint64_t, std::uint64_t>;  // (st_dev, st_ino)
  std::map<Key, std::weak_ptr<const Mapping>> files_;
  std::map<Key, std::weak_ptr<const SafetensorsFile>> headers_;
};

// Uploads `bytes` bytes at `offset` of the mapping into `dst` at
// `dst_offset`, straight from the mapping (Engine::write, WriteMode::Borrow).
// The mapping is kept mapped until the write has completed; then on_done
// runs (if given). As with every engine call: when this returns an error,
// nothing was enqueued and on_done is never called.
Result<void> upload(Engine& engine, const std::shared_ptr<const Mapping>& file, std::size_t offset, std::size_t bytes,
                    Buffer dst, std::size_t dst_offset, DoneCallback on_done = {});

}  // namespace uvcl::disk
