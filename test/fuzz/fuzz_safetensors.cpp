// libFuzzer target: the safetensors header parser over a whole file image
// (8-byte length, JSON header, data section).
#include <cstddef>
#include <cstdint>
#include <span>

#include "program/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  auto result = uvcl::safetensors::parse(file, "fuzz");
  if (result) {
    // Every accepted tensor must lie inside the data section.
    for (const auto& t : result.value().tensors) {
      if (t.end < t.begin || t.end > result.value().data_size) __builtin_trap();
      (void)t.elements();
    }
  } else {
    (void)result.error().message.size();
  }
  return 0;
}
