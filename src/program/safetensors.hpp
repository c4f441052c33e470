// safetensors.hpp — the header of a .safetensors file, parsed and validated.
//
// The format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON, then the data section. The
// JSON is an object of tensor name -> {"dtype": "F32", "shape": [2, 3],
// "data_offsets": [begin, end]} plus an optional "__metadata__" object of
// string -> string. Offsets are relative to the data section (byte 8 + N).
//
// Contract: parse() checks everything a reader relies on before it touches
// tensor data — the header length against the file (and a 100 MB limit), the
// JSON (simdjson On-Demand over padded storage, no exceptions), every
// tensor's dtype, shape and offsets (begin <= end <= data size, end - begin ==
// elements x dtype size, no two tensors overlapping), duplicate names. Each
// error names the file and the tensor or key:
//   w.safetensors: tensor "w1": data_offsets [0, 100] past the end of the data (64 bytes)
// Keys of a tensor entry other than dtype, shape and data_offsets are ignored
// (as the reference implementation does); gaps between tensors are allowed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "uvcl/status.hpp"
#include "uvcl/types.hpp"

namespace uvcl::safetensors {

// Every dtype of the safetensors format this reader knows.
enum class DType : std::uint8_t { Bool, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

std::size_t dtype_size(DType t) noexcept;                              // bytes per element
std::string_view dtype_name(DType t) noexcept;                         // "F32", "BF16", ...
std::optional<DType> dtype_from_name(std::string_view name) noexcept;  // exact, upper case
// The OpenCL C type holding the same bits: F16 half, F32 float, F64 double,
// I8 char, U8 uchar, I16 short, U16 ushort, I32 int, U32 uint, I64 long,
// U64 ulong, BOOL uchar (one byte, 0 or 1). BF16 and the F8 types have none.
std::optional<ScalarType> scalar_type_of(DType t) noexcept;

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference limit

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::uint64_t> shape;  // empty: a scalar (one element)
  std::uint64_t begin = 0, end = 0;  // byte range within the data section

  std::uint64_t bytes() const noexcept { return end - begin; }
  std::uint64_t elements() const noexcept;
};

struct Header {
  std::vector<TensorInfo> tensors;  // in document order
  std::vector<std::pair<std::string, std::string>> metadata;  // "__metadata__", in document order
  std::uint64_t data_offset = 0;    // where the data section starts in the file: 8 + N
  std::uint64_t data_size = 0;      // bytes from data_offset to the end of the file

  const TensorInfo* find(std::string_view name) const noexcept;
};

// `file` is the whole file (usually a read-only mapping); `origin` names it
// in messages. Errors carry `status` (Status::InvalidJob when a job reads
// the file, say).
Result<Header> parse(std::span<const std::byte> file, std::string_view origin,
                     Status status = Status::InvalidArgument);

// "[2, 3]" — shapes as messages show them.
std::string shape_text(const std::vector<std::uint64_t>& shape);

}  // namespace uvcl::safetensors
