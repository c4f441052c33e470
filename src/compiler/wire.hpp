// wire.hpp — the byte encoding shared by the on-disk program cache and the
// compiler protocol: little-endian integers, length-prefixed strings, and
// a program's kernels with their parameter info.
//
// A Reader never trusts a length: every read checks it against what is
// left, and a list's count against a limit, so a corrupt cache entry or a
// broken frame is a failed read, never a crash or a huge allocation.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cl/kernel_info.hpp"

namespace uvcl::wire {

// More parameters than any OpenCL device accepts (CL_DEVICE_MAX_PARAMETER_SIZE
// is at least 1024 bytes, at least 4 per parameter); more kernels than a
// sane program has.
inline constexpr std::uint32_t kMaxParams = 4096;
inline constexpr std::uint32_t kMaxKernels = 65536;

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
  Reader(const char* data, std::size_t size) : data_(data), size_(size) {}
  explicit Reader(const std::string& s) : Reader(s.data(), s.size()) {}
  bool raw(void* p, std::size_t n) {
    if (n > size_ - pos_) return false;
    if (n > 0) std::memcpy(p, data_ + pos_, n);
    pos_ += n;
    return true;
  }
  bool u8(std::uint8_t& v) { return raw(&v, 1); }
  bool u32(std::uint32_t& v) { return raw(&v, 4); }
  bool u64(std::uint64_t& v) { return raw(&v, 8); }
  bool str(std::string& s) {
    std::uint32_t n = 0;
    if (!u32(n) || n > size_ - pos_) return false;
    s.assign(data_ + pos_, n);
    pos_ += n;
    return true;
  }
  // n bytes into v (n checked against what is left before allocating).
  bool bytes(std::vector<unsigned char>& v, std::uint64_t n) {
    if (n > size_ - pos_) return false;
    v.resize(static_cast<std::size_t>(n));
    return raw(v.data(), v.size());
  }
  bool at_end() const { return pos_ == size_; }

 private:
  const char* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

inline void put_kernels(Writer& w, const std::vector<cl::KernelInfo>& kernels) {
  w.u32(static_cast<std::uint32_t>(kernels.size()));
  for (const cl::KernelInfo& k : kernels) {
    w.str(k.name);
    w.u32(static_cast<std::uint32_t>(k.params.size()));
    for (const KernelParam& p : k.params) {
      w.u8(static_cast<std::uint8_t>(p.access));
      w.u32(static_cast<std::uint32_t>(p.scalar_size));
      w.str(p.type_name);
      w.str(p.name);
    }
  }
}

inline bool get_kernels(Reader& r, std::vector<cl::KernelInfo>& kernels) {
  std::uint32_t count = 0;
  if (!r.u32(count) || count > kMaxKernels) return false;
  for (std::uint32_t i = 0; i < count; ++i) {
    cl::KernelInfo k;
    std::uint32_t params = 0;
    if (!r.str(k.name) || !r.u32(params) || params > kMaxParams) return false;
    for (std::uint32_t j = 0; j < params; ++j) {
      KernelParam p;
      std::uint8_t access = 0;
      std::uint32_t scalar = 0;
      if (!r.u8(access) || access > static_cast<std::uint8_t>(ParamAccess::WriteOnly) || !r.u32(scalar) ||
          !r.str(p.type_name) || !r.str(p.name))
        return false;
      p.access = static_cast<ParamAccess>(access);
      p.scalar_size = scalar;
      k.params.push_back(std::move(p));
    }
    kernels.push_back(std::move(k));
  }
  return true;
}

}  // namespace uvcl::wire
