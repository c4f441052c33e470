// st_util.hpp — writing safetensors files byte by byte, for the disk tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

namespace uvcl::disk_testing {

struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> data;
};

template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// 8-byte little-endian `length`, then `header`, then `data`.
inline std::vector<std::byte> raw_file(std::uint64_t length, const std::string& header,
                                       const std::vector<std::byte>& data = {}) {
  std::vector<std::byte> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((length >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// A header with its true length.
inline std::vector<std::byte> with_header(const std::string& header, const std::vector<std::byte>& data = {}) {
  return raw_file(header.size(), header, data);
}

// A well-formed file: tensors laid out one after another in the order
// given, the header padded with spaces to a multiple of 8 bytes (as the
// reference writer does).
inline std::vector<std::byte> safetensors_file(const std::vector<TensorSpec>& tensors,
                                               const std::string& metadata_json = {}) {
  std::string h = "{";
  if (!metadata_json.empty()) h += "\"__metadata__\":" + metadata_json;
  std::vector<std::byte> data;
  for (const TensorSpec& t : tensors) {
    if (h.size() > 1) h += ",";
    h += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) h += (i ? "," : "") + std::to_string(t.shape[i]);
    const std::size_t begin = data.size();
    data.insert(data.end(), t.data.begin(), t.data.end());
    h += "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  h += "}";
  while (h.size() % 8) h += ' ';
  return with_header(h, data);
}

inline void write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
}

// A fresh directory under TMPDIR (or /tmp), removed with its files.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/uvcl-disk-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) std::abort();
    path_ = buf.data();
  }
  ~TempDir() {
    for (const std::string& f : files_) ::unlink(f.c_str());
    ::rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `name` in the directory and returns its path.
  std::string write(const std::string& name, const std::vector<std::byte>& bytes) {
    const std::string p = path_ + "/" + name;
    write_file(p, bytes);
    files_.push_back(p);
    return p;
  }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

}  // namespace uvcl::disk_testing
