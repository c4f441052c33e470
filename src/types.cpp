#include "uvcl/types.hpp"

namespace uvcl {

std::size_t scalar_size(ScalarType t) noexcept {
  switch (t) {
    case ScalarType::Char:
    case ScalarType::UChar: return 1;
    case ScalarType::Short:
    case ScalarType::UShort:
    case ScalarType::Half: return 2;
    case ScalarType::Int:
    case ScalarType::UInt:
    case ScalarType::Float: return 4;
    case ScalarType::Long:
    case ScalarType::ULong:
    case ScalarType::Double: return 8;
  }
  return 0;
}

namespace {
// Indexed by the enum's value: the names are the OpenCL C spellings, which is
// what job files and messages use.
constexpr std::array<std::string_view, 11> kScalarNames = {
    "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half", "float", "double"};
}  // namespace

std::string_view scalar_type_name(ScalarType t) noexcept {
  auto i = static_cast<std::size_t>(t);
  return i < kScalarNames.size() ? kScalarNames[i] : std::string_view("?");
}

std::optional<ScalarType> scalar_type_from_name(std::string_view name) noexcept {
  for (std::size_t i = 0; i < kScalarNames.size(); ++i)
    if (kScalarNames[i] == name) return static_cast<ScalarType>(i);
  return std::nullopt;
}

bool scalar_is_float(ScalarType t) noexcept {
  return t == ScalarType::Half || t == ScalarType::Float || t == ScalarType::Double;
}

bool scalar_is_signed(ScalarType t) noexcept {
  return t == ScalarType::Char || t == ScalarType::Short || t == ScalarType::Int || t == ScalarType::Long;
}

std::uint16_t float_to_half(float f) noexcept {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, sizeof x);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t exp = (x >> 23) & 0xffu;
  const std::uint32_t mant = x & 0x7fffffu;

  if (exp == 0xff) {
    if (mant == 0) return static_cast<std::uint16_t>(sign | 0x7c00u);
    // Keep the top payload bits but force the quiet bit: truncating the
    // payload alone could leave a zero mantissa, turning a NaN into inf.
    return static_cast<std::uint16_t>(sign | 0x7e00u | (mant >> 13));
  }

  const int e = static_cast<int>(exp) - 127 + 15;  // the half's biased exponent
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    // Below 2^-25 everything rounds to zero (2^-25 itself is a tie that goes
    // to the even value, zero). Float subnormals land here too.
    if (e < -10) return sign;
    const std::uint32_t m = mant | 0x800000u;  // explicit leading one
    const auto shift = static_cast<unsigned>(14 - e);
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    // A carry out of the subnormal range yields 0x400: the smallest normal.
    return static_cast<std::uint16_t>(sign | r);
  }

  std::uint32_t h = (static_cast<std::uint32_t>(e) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  // A mantissa carry ripples into the exponent; from e = 30 it yields 0x7c00,
  // inf, which is the correct rounding of values past the largest half.
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits = 0;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      // Every half subnormal is a normal float: shift the leading one up.
      std::uint32_t e = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --e;
      }
      bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace uvcl
