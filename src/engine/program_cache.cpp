#include "engine/program_cache.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include "compiler/wire.hpp"
#include "files.hpp"

namespace uvcl {

namespace {

constexpr char kMagic[8] = {'U', 'V', 'C', 'L', 'B', 'I', 'N', '1'};

std::uint64_t fnv1a(const std::string& s, std::uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

ProgramCache::Key ProgramCache::key(const std::string& platform, const std::string& device,
                                    const std::string& driver, const std::string& options,
                                    const std::string& source) const {
  std::string text;
  for (const std::string* part : {&platform, &device, &driver, &options, &source}) {
    text += std::to_string(part->size());
    text += ':';
    text += *part;
  }
  Key k;
  k.a = fnv1a(text, 0xcbf29ce484222325ull);
  k.b = fnv1a(text, 0x84222325cbf29ce4ull);
  char name[40];
  std::snprintf(name, sizeof name, "%016llx.bin", static_cast<unsigned long long>(k.a));
  k.file = dir_ + "/" + name;
  return k;
}

Result<void> ProgramCache::check_dir(const std::string& dir) {
  const auto unusable = [&](const std::string& why) {
    return Error{Status::Io, "opencl.cache_dir: " + dir + ": " + why};
  };
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return unusable(std::strerror(errno));
    if (::mkdir(dir.c_str(), 0755) != 0) return unusable(std::string("cannot create: ") + std::strerror(errno));
    if (::stat(dir.c_str(), &st) != 0) return unusable(std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return unusable(std::string("not a directory (") + files::type_name(st.st_mode) + ")");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return unusable(std::string("not writable: ") + std::strerror(errno));
  return {};
}

std::optional<CacheEntry> ProgramCache::load(const Key& k) const {
  // Only a regular file: anything else in the folder (a FIFO) must not block a build.
  auto read = files::read_regular(k.file);
  if (!read) return std::nullopt;
  const std::string& data = read.value();
  wire::Reader r(data);
  char magic[8];
  std::uint64_t a = 0, b = 0, size = 0;
  if (!r.raw(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) return std::nullopt;
  if (!r.u64(a) || !r.u64(b) || a != k.a || b != k.b) return std::nullopt;  // foreign entry
  if (!r.u64(size) || size == 0 || size > data.size()) return std::nullopt;
  CacheEntry e;
  if (!r.bytes(e.binary, size)) return std::nullopt;
  if (!wire::get_kernels(r, e.kernels)) return std::nullopt;
  if (!r.at_end()) return std::nullopt;
  return e;
}

bool ProgramCache::store(const Key& k, const CacheEntry& e) const {
  ::mkdir(dir_.c_str(), 0755);
  wire::Writer w;
  w.raw(kMagic, 8);
  w.u64(k.a);
  w.u64(k.b);
  w.u64(e.binary.size());
  w.raw(e.binary.data(), e.binary.size());
  wire::put_kernels(w, e.kernels);
  static unsigned counter = 0;
  const std::string tmp = k.file + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(w.out.data(), static_cast<std::streamsize>(w.out.size()));
    if (!out) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), k.file.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace uvcl
