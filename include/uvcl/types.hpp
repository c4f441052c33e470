// uvcl/types.hpp — OpenCL C scalar types as values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>

#include "uvcl/export.h"

namespace uvcl {

// Every OpenCL C scalar type a kernel argument or buffer element can have.
enum class ScalarType : std::uint8_t { Char, UChar, Short, UShort, Int, UInt, Long, ULong, Half, Float, Double };

UVCL_EXPORT std::size_t scalar_size(ScalarType t) noexcept;                          // bytes: 1, 2, 4 or 8
UVCL_EXPORT std::string_view scalar_type_name(ScalarType t) noexcept;                // "uint", "half", ...
UVCL_EXPORT std::optional<ScalarType> scalar_type_from_name(std::string_view name) noexcept;
UVCL_EXPORT bool scalar_is_float(ScalarType t) noexcept;                             // half, float, double
UVCL_EXPORT bool scalar_is_signed(ScalarType t) noexcept;                            // char..long (not floats)

// A scalar kernel argument: its type and little-endian bytes. Half values are
// carried as IEEE binary16 bits (use Scalar::half_bits).
struct Scalar {
  ScalarType type = ScalarType::Int;
  std::array<std::byte, 8> bytes{};

  std::size_t size() const noexcept { return scalar_size(type); }

  template <class T>
  static Scalar of(T v) noexcept {
    static_assert(std::is_arithmetic_v<T> && sizeof(T) <= 8);
    Scalar s;
    s.type = type_of<T>();
    std::memcpy(s.bytes.data(), &v, sizeof(T));
    return s;
  }
  static Scalar half_bits(std::uint16_t bits) noexcept {
    Scalar s;
    s.type = ScalarType::Half;
    std::memcpy(s.bytes.data(), &bits, 2);
    return s;
  }

  template <class T>
  static constexpr ScalarType type_of() noexcept {
    if constexpr (std::is_same_v<T, float>) return ScalarType::Float;
    else if constexpr (std::is_same_v<T, double>) return ScalarType::Double;
    else if constexpr (std::is_signed_v<T> && sizeof(T) == 1) return ScalarType::Char;
    else if constexpr (sizeof(T) == 1) return ScalarType::UChar;
    else if constexpr (std::is_signed_v<T> && sizeof(T) == 2) return ScalarType::Short;
    else if constexpr (sizeof(T) == 2) return ScalarType::UShort;
    else if constexpr (std::is_signed_v<T> && sizeof(T) == 4) return ScalarType::Int;
    else if constexpr (sizeof(T) == 4) return ScalarType::UInt;
    else if constexpr (std::is_signed_v<T>) return ScalarType::Long;
    else return ScalarType::ULong;
  }
};

// IEEE binary16 <-> binary32, round to nearest even.
UVCL_EXPORT std::uint16_t float_to_half(float f) noexcept;
UVCL_EXPORT float half_to_float(std::uint16_t h) noexcept;

}  // namespace uvcl
