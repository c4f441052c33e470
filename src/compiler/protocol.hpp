// protocol.hpp — the framed protocol between the engine and uvcl-compiler.
//
// Both directions are a stream of frames: a header of two little-endian
// u32 — the message type and the payload length — then the payload. The
// compiler reads frames on stdin and writes frames on stdout; it exits when
// stdin closes.
//
//   compiler -> engine  Ready    (empty)   the device is open, builds may come
//   compiler -> engine  Refused  str why   the device could not be opened or
//                                          is not the one named; then it exits
//   engine -> compiler  Build    u64 program, str options, str source
//   compiler -> engine  Result   u64 program, u8 outcome, str log or message,
//                                u64 size + the binary (CL_PROGRAM_BINARIES),
//                                the kernels with their parameter info
//
// Each side checks every frame strictly: an unknown type, a payload longer
// than kMaxPayload, or a payload that does not decode exactly (a short
// string, bytes left over) is a protocol violation — reported, never a
// crash and never an allocation of a length nobody checked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cl/kernel_info.hpp"
#include "uvcl/status.hpp"

namespace uvcl::compiler {

enum class Type : std::uint32_t { Ready = 1, Refused = 2, Build = 3, Result = 4 };

inline constexpr std::size_t kHeaderBytes = 8;
// A source or a binary beyond this is refused (sources of several MB are
// real; a length of gigabytes is a broken stream).
inline constexpr std::uint32_t kMaxPayload = 256u << 20;

struct Frame {
  Type type = Type::Ready;
  std::string payload;
};

struct BuildRequest {
  std::uint64_t program = 0;
  std::string options, source;
};

struct BuildResult {
  enum class Outcome : std::uint8_t { Built = 0, BuildFailed = 1, Error = 2 };
  std::uint64_t program = 0;
  Outcome outcome = Outcome::Error;
  std::string log;  // BuildFailed: the build log; Error: what failed
  std::vector<unsigned char> binary;
  std::vector<cl::KernelInfo> kernels;
};

struct Header {
  Type type = Type::Ready;
  std::uint32_t length = 0;
};
// Checks kHeaderBytes bytes: a known type, a length within kMaxPayload.
Result<Header> parse_header(const char* bytes);

// A whole frame (header and payload) ready to write.
std::string encode(Type type, const std::string& payload);
std::string encode(const BuildRequest& r);
std::string encode(const BuildResult& r);

// The payloads, decoded strictly: nullopt when the payload does not decode
// exactly.
std::optional<BuildRequest> decode_build(const std::string& payload);
std::optional<BuildResult> decode_result(const std::string& payload);

// Splits a byte stream into frames. feed() appends what arrived; next()
// gives the next whole frame, nullopt while one is incomplete, or an error
// naming the violation (the stream is then unusable).
class FrameReader {
 public:
  void feed(const char* data, std::size_t n) { buffer_.append(data, n); }
  Result<std::optional<Frame>> next();
  // Bytes received but not yet part of a whole frame.
  std::size_t pending() const { return buffer_.size() - pos_; }

 private:
  std::string buffer_;
  std::size_t pos_ = 0;
};

}  // namespace uvcl::compiler
