// protocol.cpp — frames and messages of the compiler protocol.
#include "compiler/protocol.hpp"

#include "compiler/wire.hpp"

namespace uvcl::compiler {

std::string encode(Type type, const std::string& payload) {
  wire::Writer w;
  w.u32(static_cast<std::uint32_t>(type));
  w.u32(static_cast<std::uint32_t>(payload.size()));
  w.raw(payload.data(), payload.size());
  return std::move(w.out);
}

std::string encode(const BuildRequest& r) {
  wire::Writer w;
  w.u64(r.program);
  w.str(r.options);
  w.str(r.source);
  return encode(Type::Build, w.out);
}

std::string encode(const BuildResult& r) {
  wire::Writer w;
  w.u64(r.program);
  w.u8(static_cast<std::uint8_t>(r.outcome));
  w.str(r.log);
  w.u64(r.binary.size());
  w.raw(r.binary.data(), r.binary.size());
  wire::put_kernels(w, r.kernels);
  return encode(Type::Result, w.out);
}

std::optional<BuildRequest> decode_build(const std::string& payload) {
  wire::Reader r(payload);
  BuildRequest b;
  if (!r.u64(b.program) || !r.str(b.options) || !r.str(b.source) || !r.at_end()) return std::nullopt;
  return b;
}

std::optional<BuildResult> decode_result(const std::string& payload) {
  wire::Reader r(payload);
  BuildResult b;
  std::uint8_t outcome = 0;
  std::uint64_t size = 0;
  if (!r.u64(b.program) || !r.u8(outcome) || outcome > static_cast<std::uint8_t>(BuildResult::Outcome::Error) ||
      !r.str(b.log) || !r.u64(size) || !r.bytes(b.binary, size) || !wire::get_kernels(r, b.kernels) || !r.at_end())
    return std::nullopt;
  b.outcome = static_cast<BuildResult::Outcome>(outcome);
  return b;
}

Result<Header> parse_header(const char* bytes) {
  wire::Reader r(bytes, kHeaderBytes);
  std::uint32_t type = 0, length = 0;
  (void)r.u32(type);
  (void)r.u32(length);
  if (type < static_cast<std::uint32_t>(Type::Ready) || type > static_cast<std::uint32_t>(Type::Result))
    return Error{Status::KernelCompilation, "unknown frame type " + std::to_string(type) + " (expected 1..4)"};
  if (length > kMaxPayload)
    return Error{Status::KernelCompilation, "frame length " + std::to_string(length) + " exceeds the limit of " +
                                                std::to_string(kMaxPayload) + " bytes"};
  return Header{static_cast<Type>(type), length};
}

Result<std::optional<Frame>> FrameReader::next() {
  if (pending() < kHeaderBytes) return std::optional<Frame>{};
  auto header = parse_header(buffer_.data() + pos_);
  if (!header) return std::move(header).error();
  const std::uint32_t length = header->length;
  if (pending() - kHeaderBytes < length) return std::optional<Frame>{};
  Frame f;
  f.type = header->type;
  f.payload.assign(buffer_, pos_ + kHeaderBytes, length);
  pos_ += kHeaderBytes + length;
  // Drop what was consumed once it is most of the buffer: amortised O(1)
  // per byte, however the stream is split.
  if (pos_ > 4096 && pos_ * 2 > buffer_.size()) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  return std::optional<Frame>{std::move(f)};
}

}  // namespace uvcl::compiler
