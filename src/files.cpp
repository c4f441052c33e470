#include "files.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace uvcl::files {

namespace {

Error cannot_read(const std::string& path, const std::string& why) {
  return Error{Status::Io, path + ": cannot read: " + why};
}

Error not_regular(const std::string& path, unsigned mode) {
  return cannot_read(path, std::string("not a regular file (") + type_name(mode) + ")");
}

}  // namespace

const char* type_name(unsigned mode) noexcept {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a file";
  }
}

Result<void> require_regular(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return cannot_read(path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
  return {};
}

Result<int> open_regular(const std::string& path) {
  // Checked before opening: opening some devices has effects of its own.
  UVCL_TRY(require_regular(path));
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return cannot_read(path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return cannot_read(path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {  // replaced since the check
    ::close(fd);
    return not_regular(path, st.st_mode);
  }
  return fd;
}

Result<std::string> read_regular(const std::string& path, std::uint64_t max_bytes, const char* why) {
  auto fd = open_regular(path);
  if (!fd) return std::move(fd).error();
  auto too_large = [&] {
    return Error{Status::Io, path + ": larger than " + std::to_string(max_bytes) + " bytes (" + why + ")"};
  };
  struct stat st {};
  if (::fstat(*fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    ::close(*fd);
    return too_large();
  }
  std::string data;
  if (st.st_size > 0) data.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(*fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(*fd);
      return cannot_read(path, std::strerror(err));
    }
    if (n == 0) break;
    if (static_cast<std::uint64_t>(n) > max_bytes - data.size()) {
      ::close(*fd);
      return too_large();
    }
    data.append(buf, static_cast<std::size_t>(n));
  }
  ::close(*fd);
  return data;
}

}  // namespace uvcl::files
