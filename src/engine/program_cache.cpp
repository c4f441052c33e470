#include "engine/program_cache.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

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

class Writer {
 public:
  void u8(std::uint8_t v) { out.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v) { raw(&v, 4); }
  void u64(std::uint64_t v) { raw(&v, 8); }
  void str(const std::string& s) {
    u32(static_cast<std::uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void raw(const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); }
  std::string out;
};

class Reader {
 public:
  explicit Reader(const std::string& s) : data_(s) {}
  bool raw(void* p, std::size_t n) {
    if (n > data_.size() - pos_) return false;
    std::memcpy(p, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool u8(std::uint8_t& v) { return raw(&v, 1); }
  bool u32(std::uint32_t& v) { return raw(&v, 4); }
  bool u64(std::uint64_t& v) { return raw(&v, 8); }
  bool str(std::string& s) {
    std::uint32_t n = 0;
    if (!u32(n) || n > data_.size() - pos_) return false;
    s.assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool at_end() const { return pos_ == data_.size(); }

 private:
  const std::string& data_;
  std::size_t pos_ = 0;
};

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
  Reader r(data);
  char magic[8];
  std::uint64_t a = 0, b = 0, size = 0;
  if (!r.raw(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) return std::nullopt;
  if (!r.u64(a) || !r.u64(b) || a != k.a || b != k.b) return std::nullopt;  // foreign entry
  if (!r.u64(size) || size == 0 || size > data.size()) return std::nullopt;
  CacheEntry e;
  e.binary.resize(size);
  if (!r.raw(e.binary.data(), size)) return std::nullopt;
  std::uint32_t kernels = 0;
  if (!r.u32(kernels)) return std::nullopt;
  for (std::uint32_t i = 0; i < kernels; ++i) {
    CachedKernel ck;
    std::uint32_t params = 0;
    if (!r.str(ck.name) || !r.u32(params) || params > 4096) return std::nullopt;
    for (std::uint32_t j = 0; j < params; ++j) {
      KernelParam p;
      std::uint8_t access = 0;
      std::uint32_t scalar = 0;
      if (!r.u8(access) || access > static_cast<std::uint8_t>(ParamAccess::WriteOnly) || !r.u32(scalar) ||
          !r.str(p.type_name) || !r.str(p.name))
        return std::nullopt;
      p.access = static_cast<ParamAccess>(access);
      p.scalar_size = scalar;
      ck.params.push_back(std::move(p));
    }
    e.kernels.push_back(std::move(ck));
  }
  if (!r.at_end()) return std::nullopt;
  return e;
}

bool ProgramCache::store(const Key& k, const CacheEntry& e) const {
  ::mkdir(dir_.c_str(), 0755);
  Writer w;
  w.raw(kMagic, 8);
  w.u64(k.a);
  w.u64(k.b);
  w.u64(e.binary.size());
  w.raw(e.binary.data(), e.binary.size());
  w.u32(static_cast<std::uint32_t>(e.kernels.size()));
  for (const CachedKernel& ck : e.kernels) {
    w.str(ck.name);
    w.u32(static_cast<std::uint32_t>(ck.params.size()));
    for (const KernelParam& p : ck.params) {
      w.u8(static_cast<std::uint8_t>(p.access));
      w.u32(static_cast<std::uint32_t>(p.scalar_size));
      w.str(p.type_name);
      w.str(p.name);
    }
  }
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
