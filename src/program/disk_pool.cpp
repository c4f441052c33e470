#include "program/disk_pool.hpp"

#include "files.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace uvcl::disk {

namespace {

std::atomic<std::uint64_t> g_live{0};

Error io_error(const std::string& path, const char* what, int err) {
  return Error{Status::Io, path + ": " + what + ": " + std::strerror(err)};
}

}  // namespace

Result<std::shared_ptr<const Mapping>> Mapping::open(const std::string& path) {
  // A FIFO would block the open itself: only regular files are opened.
  auto opened = files::open_regular(path);
  if (!opened) return std::move(opened).error();
  const int fd = *opened;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error(path, "cannot stat", err);
  }
  std::shared_ptr<Mapping> m(new Mapping());
  m->path_ = path;
  m->dev_ = static_cast<std::uint64_t>(st.st_dev);
  m->ino_ = static_cast<std::uint64_t>(st.st_ino);
  m->size_ = static_cast<std::size_t>(st.st_size);
  if (m->size_ > 0) {
    void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      m->size_ = 0;
      return io_error(path, "cannot map", err);
    }
    m->data_ = p;
    ++g_live;
  }
  ::close(fd);  // the mapping keeps the file
  return std::shared_ptr<const Mapping>(std::move(m));
}

Mapping::~Mapping() {
  if (data_ != nullptr) {
    ::munmap(const_cast<void*>(data_), size_);
    --g_live;
  }
}

std::uint64_t Mapping::live() noexcept { return g_live.load(); }

Result<std::shared_ptr<const Mapping>> DiskPool::map(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return io_error(path, "cannot read", errno);
  const Key key{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
  auto it = files_.find(key);
  if (it != files_.end()) {
    if (auto m = it->second.lock(); m && m->bytes().size() == static_cast<std::size_t>(st.st_size)) return m;
  }
  auto m = Mapping::open(path);
  if (!m) return m;
  files_[Key{m.value()->device(), m.value()->inode()}] = m.value();
  return m;
}

Result<std::shared_ptr<const SafetensorsFile>> DiskPool::safetensors(const std::string& path, Status status) {
  auto m = map(path);
  if (!m) return std::move(m).error();
  const Key key{m.value()->device(), m.value()->inode()};
  if (auto it = headers_.find(key); it != headers_.end())
    if (auto f = it->second.lock(); f && f->mapping == m.value()) return f;
  auto header = safetensors::parse(m.value()->bytes(), path, status);
  if (!header) return std::move(header).error();
  auto f = std::make_shared<SafetensorsFile>();
  f->mapping = std::move(m.value());
  f->header = std::move(header.value());
  headers_[key] = f;
  return std::shared_ptr<const SafetensorsFile>(std::move(f));
}

std::size_t DiskPool::mapped() const {
  std::size_t n = 0;
  for (const auto& [key, w] : files_)
    if (!w.expired()) ++n;
  return n;
}

Result<void> upload(Engine& engine, const std::shared_ptr<const Mapping>& file, std::size_t offset, std::size_t bytes,
                    Buffer dst, std::size_t dst_offset, DoneCallback on_done) {
  if (!file) return Error{Status::InvalidArgument, "upload: no mapping"};
  const std::span<const std::byte> all = file->bytes();
  if (offset > all.size() || bytes > all.size() - offset)
    return Error{Status::InvalidArgument, file->path() + ": upload of bytes [" + std::to_string(offset) + ", " +
                                              std::to_string(offset) + " + " + std::to_string(bytes) +
                                              ") is outside the file (" + std::to_string(all.size()) + " bytes)"};
  const std::span<const std::byte> src = all.subspan(offset, bytes);
  if (bytes > 0) {
    // Ask the kernel to start reading the pages in; the driver reads them soon.
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto start = reinterpret_cast<std::uintptr_t>(src.data()) & ~(page - 1);
    const auto end = reinterpret_cast<std::uintptr_t>(src.data()) + bytes;
    (void)::madvise(reinterpret_cast<void*>(start), end - start, MADV_WILLNEED);
  }
  // The callback owns a reference: the mapping outlives the driver's reads.
  auto r = engine.write(dst, dst_offset, src, WriteMode::Borrow,
                        [file, done = std::move(on_done)](Result<void> res) {
                          if (done) done(std::move(res));
                        });
  if (!r) return std::move(r).error().context(file->path());
  return {};
}

}  // namespace uvcl::disk
