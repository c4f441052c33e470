#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <type_traits>

#include "uvcl/types.hpp"

namespace types_test {

using uvcl::ScalarType;

constexpr ScalarType kAll[] = {ScalarType::Char,  ScalarType::UChar, ScalarType::Short, ScalarType::UShort,
                               ScalarType::Int,   ScalarType::UInt,  ScalarType::Long,  ScalarType::ULong,
                               ScalarType::Half,  ScalarType::Float, ScalarType::Double};

float bits_to_float(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

std::uint32_t float_to_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// binary16 decoded from its definition, independently of the code under test.
double half_value(std::uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  if (exp == 0x1f) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

bool half_is_nan(std::uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

// Round-to-nearest-even by search: positive half encodings 0x0000..0x7c00
// increase with their value, so the neighbours of |f| are found by bisection.
// 0x7c00 stands for 2^16 here: the overflow threshold is the midpoint of
// 65504 and 2^16, and rounding up to it yields inf.
std::uint16_t reference_half(float f) {
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  auto value = [](std::uint16_t h) { return h == 0x7c00 ? 65536.0 : half_value(h); };
  if (a >= 65536.0) return sign | 0x7c00;
  std::uint16_t lo = 0, hi = 0x7c00;  // value(lo) <= a < value(hi)
  while (hi - lo > 1) {
    const auto mid = static_cast<std::uint16_t>((lo + hi) / 2);
    (value(mid) <= a ? lo : hi) = mid;
  }
  const double below = a - value(lo), above = value(hi) - a;
  std::uint16_t pick = lo;
  if (above < below || (above == below && (hi & 1) == 0)) pick = hi;
  return sign | pick;
}

template <class T>
void expect_type_matches() {
  const ScalarType t = uvcl::Scalar::type_of<T>();
  SCOPED_TRACE(std::string(uvcl::scalar_type_name(t)));
  EXPECT_EQ(uvcl::scalar_size(t), sizeof(T));
  EXPECT_EQ(uvcl::scalar_is_float(t), std::is_floating_point_v<T>);
  EXPECT_EQ(uvcl::scalar_is_signed(t), std::is_signed_v<T> && std::is_integral_v<T>);
}

TEST(Types, SizesAndKindsMatchTheCppTypes) {
  expect_type_matches<std::int8_t>();
  expect_type_matches<std::uint8_t>();
  expect_type_matches<std::int16_t>();
  expect_type_matches<std::uint16_t>();
  expect_type_matches<std::int32_t>();
  expect_type_matches<std::uint32_t>();
  expect_type_matches<std::int64_t>();
  expect_type_matches<std::uint64_t>();
  expect_type_matches<float>();
  expect_type_matches<double>();
  EXPECT_EQ(uvcl::scalar_size(ScalarType::Half), 2u);
  EXPECT_TRUE(uvcl::scalar_is_float(ScalarType::Half));
  EXPECT_FALSE(uvcl::scalar_is_signed(ScalarType::Half));
}

TEST(Types, NamesRoundTripAndAreDistinct) {
  std::set<std::string_view> names;
  for (ScalarType t : kAll) {
    const std::string_view name = uvcl::scalar_type_name(t);
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(uvcl::scalar_type_from_name(name), t) << name;
  }
  EXPECT_EQ(names.size(), std::size(kAll));
}

TEST(Types, NamesAreTheOpenCLSpellings) {
  EXPECT_EQ(uvcl::scalar_type_from_name("uchar"), ScalarType::UChar);
  EXPECT_EQ(uvcl::scalar_type_from_name("ulong"), ScalarType::ULong);
  EXPECT_EQ(uvcl::scalar_type_from_name("half"), ScalarType::Half);
  for (std::string_view bad : {"", "Float", "float32", "unsigned int", "int "})
    EXPECT_FALSE(uvcl::scalar_type_from_name(bad).has_value()) << '"' << bad << '"';
}

TEST(Types, ScalarHalfBitsCarriesTheEncoding) {
  const uvcl::Scalar s = uvcl::Scalar::half_bits(uvcl::float_to_half(1.5f));
  EXPECT_EQ(s.type, ScalarType::Half);
  EXPECT_EQ(s.size(), 2u);
  std::uint16_t bits;
  std::memcpy(&bits, s.bytes.data(), 2);
  EXPECT_EQ(uvcl::half_to_float(bits), 1.5f);
}

TEST(Half, DecodesEveryEncodingByDefinition) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto b = static_cast<std::uint16_t>(h);
    const float f = uvcl::half_to_float(b);
    if (half_is_nan(b)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), half_value(b)) << std::hex << h;
      ASSERT_EQ(std::signbit(f), (b & 0x8000) != 0) << std::hex << h;  // -0 stays -0
    }
  }
}

TEST(Half, EveryEncodingRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto b = static_cast<std::uint16_t>(h);
    const std::uint16_t back = uvcl::float_to_half(uvcl::half_to_float(b));
    if (half_is_nan(b)) {
      EXPECT_TRUE(half_is_nan(back)) << std::hex << h;
      EXPECT_EQ(back & 0x8000, b & 0x8000) << std::hex << h;
    } else {
      ASSERT_EQ(back, b) << std::hex << h;
    }
  }
}

TEST(Half, RoundsToNearestEvenAtEveryMidpoint) {
  // Midpoints between neighbouring halves (exact in float: 12 bits) and the
  // floats either side of them, which must round down and up respectively.
  for (std::uint16_t h = 0; h < 0x7c00; ++h) {
    const double next = h == 0x7bff ? 65536.0 : half_value(static_cast<std::uint16_t>(h + 1));
    const auto mid = static_cast<float>((half_value(h) + next) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      ASSERT_EQ(uvcl::float_to_half(f), reference_half(f)) << f;
      ASSERT_EQ(uvcl::float_to_half(-f), reference_half(-f)) << -f;
    }
  }
}

TEST(Half, MatchesTheReferenceAcrossTheFloatRange) {
  // A stride coprime to 2^32 visits every exponent and many mantissas.
  for (std::uint64_t i = 0; i < (std::uint64_t{1} << 32); i += 4099) {
    const float f = bits_to_float(static_cast<std::uint32_t>(i));
    if (std::isnan(f)) continue;
    ASSERT_EQ(uvcl::float_to_half(f), reference_half(f)) << std::hex << i;
  }
}

TEST(Half, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(uvcl::float_to_half(inf), 0x7c00);
  EXPECT_EQ(uvcl::float_to_half(-inf), 0xfc00);
  EXPECT_EQ(uvcl::float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(uvcl::float_to_half(65504.0f), 0x7bff);  // the largest half
  EXPECT_EQ(uvcl::float_to_half(65520.0f), 0x7c00);  // the overflow tie goes to inf
  EXPECT_EQ(uvcl::float_to_half(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(uvcl::float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(uvcl::float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // its half: a tie to zero
  EXPECT_EQ(uvcl::float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(uvcl::float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  // The largest subnormal rounding up becomes the smallest normal.
  EXPECT_EQ(uvcl::float_to_half(static_cast<float>(std::ldexp(1.0, -14) - std::ldexp(1.0, -26))), 0x0400);
}

TEST(Half, NaNStaysNaN) {
  // Payload bits only below the half's mantissa: truncation would give inf.
  for (std::uint32_t bits : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    const std::uint16_t h = uvcl::float_to_half(bits_to_float(bits));
    EXPECT_TRUE(half_is_nan(h)) << std::hex << bits;
    EXPECT_EQ((h & 0x8000) != 0, (bits & 0x80000000u) != 0) << std::hex << bits;
  }
  EXPECT_TRUE(std::isnan(uvcl::half_to_float(0x7e00)));
  EXPECT_EQ(float_to_bits(uvcl::half_to_float(0x7c00)), float_to_bits(std::numeric_limits<float>::infinity()));
}

}  // namespace types_test
