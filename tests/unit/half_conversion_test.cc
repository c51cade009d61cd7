// Unit tests for the 16-bit float conversions of the CPU kernels: float16 and bfloat16
// round trips, rounding to nearest even, NaN, and the software conversions against F16C,
// bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/reduce_kernels.h"
#include "kernels/reduce_kernels_internal.h"
#include "unit/float_bits.h"

namespace chorus::kernels {
namespace {

using chorus::testing::bits_of;
using chorus::testing::float_of;

constexpr uint64_t kSeed = 0x5eed'c0de'2024ull;

// ---- float16 conversions. -------------------------------------------------------------------

TEST(HalfConversionTest, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    const bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
    EXPECT_EQ(std::isnan(f), is_nan) << std::hex << h;
    if (is_nan) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << std::hex << h;
    } else {
      EXPECT_EQ(float_to_half(f), h) << std::hex << h;
    }
  }
}

TEST(HalfConversionTest, KnownValues) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits_of(half_to_float(0x8000)), 0x80000000u);
}

TEST(HalfConversionTest, RoundsToNearestEven) {
  const float ulp = std::ldexp(1.0f, -10);               // half ulp spacing at 1.0
  EXPECT_EQ(float_to_half(1.0f + ulp / 2), 0x3c00);      // tie, 0x3c00 even: down
  EXPECT_EQ(float_to_half(1.0f + 3 * ulp / 2), 0x3c02);  // tie, 0x3c01 odd: up
  EXPECT_EQ(float_to_half(std::nextafter(1.0f + ulp / 2, 2.0f)), 0x3c01);
  EXPECT_EQ(float_to_half(std::nextafter(1.0f + ulp / 2, 0.0f)), 0x3c00);
  EXPECT_EQ(float_to_half(-(1.0f + 3 * ulp / 2)), 0xbc02);
  // Overflow: 65520 is the tie between 65504 (odd) and 2^16, so it and above become inf.
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  // Subnormals, in units of 2^-24.
  const float unit = std::ldexp(1.0f, -24);
  EXPECT_EQ(float_to_half(unit), 0x0001);
  EXPECT_EQ(float_to_half(unit / 2), 0x0000);  // tie to even (0)
  EXPECT_EQ(float_to_half(std::nextafter(unit / 2, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half(-unit / 2), 0x8000);       // sign kept
  EXPECT_EQ(float_to_half(1.5f * unit), 0x0002);     // tie, 1 odd: up
  EXPECT_EQ(float_to_half(2.5f * unit), 0x0002);     // tie, 2 even: down
  EXPECT_EQ(float_to_half(1023.5f * unit), 0x0400);  // carries into the smallest normal
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  // NaN stays NaN (quiet), whatever its payload.
  for (uint32_t nan_bits : {0x7f800001u, 0x7fc00000u, 0xffffffffu, 0x7f802000u}) {
    const uint16_t h = float_to_half(float_of(nan_bits));
    EXPECT_EQ(h & 0x7e00, 0x7e00) << std::hex << nan_bits;
  }
}

class F16cTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!internal::cpu_has_avx2_f16c()) GTEST_SKIP() << "CPU lacks AVX2/F16C";
  }
};

TEST_F(F16cTest, HalfToFloatAgreesOnEveryInput) {
  std::vector<uint16_t> halves(65536);
  for (uint32_t h = 0; h <= 0xffff; ++h) halves[h] = static_cast<uint16_t>(h);
  // Odd lengths and offsets exercise the vector tail.
  for (int64_t len : {int64_t{65536}, int64_t{65531}, int64_t{5}}) {
    std::vector<float> hw(static_cast<size_t>(len));
    internal::half_to_float_hw(halves.data() + (65536 - len), hw.data(), len);
    for (int64_t i = 0; i < len; ++i) {
      const uint16_t h = halves[static_cast<size_t>(65536 - len + i)];
      ASSERT_EQ(bits_of(hw[i]), bits_of(internal::half_to_float_soft(h)))
          << std::hex << "half 0x" << h;
    }
  }
}

void expect_float_to_half_agrees(const std::vector<float>& floats) {
  std::vector<uint16_t> hw(floats.size());
  internal::float_to_half_hw(floats.data(), hw.data(), static_cast<int64_t>(floats.size()));
  for (size_t i = 0; i < floats.size(); ++i) {
    ASSERT_EQ(hw[i], internal::float_to_half_soft(floats[i]))
        << std::hex << "float bits 0x" << bits_of(floats[i]);
  }
}

TEST_F(F16cTest, FloatToHalfAgreesOnEveryHalfAndItsNeighbours) {
  std::vector<float> floats;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint32_t b = bits_of(internal::half_to_float_soft(static_cast<uint16_t>(h)));
    // The value, the ties either side (13 dropped bits: 0x1000), and their neighbours.
    for (uint32_t d : {0u, 1u, 0xfffu, 0x1000u, 0x1001u}) {
      floats.push_back(float_of(b + d));
      floats.push_back(float_of(b - d));
    }
  }
  floats.push_back(1.0f);  // odd length: exercises the tail
  expect_float_to_half_agrees(floats);
}

TEST_F(F16cTest, FloatToHalfAgreesOnMillionsOfRandomFloats) {
  std::mt19937_64 rng(kSeed);
  std::vector<float> floats;
  constexpr int kEach = 2'000'000;
  // Arbitrary bit patterns (all NaN payloads, huge and tiny values) ...
  for (int i = 0; i < kEach; ++i) floats.push_back(float_of(static_cast<uint32_t>(rng())));
  // ... and floats with exponents around float16's range, where the rounding happens.
  std::uniform_int_distribution<uint32_t> exponent(127 - 27, 127 + 17);
  for (int i = 0; i < kEach; ++i) {
    const uint32_t r = static_cast<uint32_t>(rng());
    floats.push_back(float_of((r & 0x807fffffu) | (exponent(rng) << 23)));
  }
  floats.push_back(3.0f);
  expect_float_to_half_agrees(floats);
}

// ---- bfloat16 conversions. ------------------------------------------------------------------

TEST(BFloat16ConversionTest, EveryBFloat16RoundTripsExactly) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = bfloat16_to_float(static_cast<uint16_t>(b));
    EXPECT_EQ(bits_of(f), b << 16);
    if (!std::isnan(f)) {
      EXPECT_EQ(float_to_bfloat16(f), b) << std::hex << b;
    }
  }
}

TEST(BFloat16ConversionTest, RoundsToNearestEven) {
  const float ulp = std::ldexp(1.0f, -7);  // bfloat16 spacing at 1.0
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(1.0f + ulp / 2), 0x3f80);      // tie, even: down
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * ulp / 2), 0x3f82);  // tie, odd: up
  EXPECT_EQ(float_to_bfloat16(std::nextafter(1.0f + ulp / 2, 2.0f)), 0x3f81);
  EXPECT_EQ(float_to_bfloat16(-(1.0f + 3 * ulp / 2)), 0xbf82);
  EXPECT_EQ(float_to_bfloat16(float_of(0x3fffffffu)), 0x4000);  // carry into the exponent
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7f80);  // to inf
  EXPECT_EQ(float_to_bfloat16(float_of(0x7f7f7fffu)), 0x7f7f);  // just below: stays finite
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bfloat16(float_of(0x00008000u)), 0x0000);  // subnormal tie: even
  EXPECT_EQ(float_to_bfloat16(float_of(0x00018000u)), 0x0002);  // subnormal tie: odd, up
}

TEST(BFloat16ConversionTest, NaNStaysQuietNaN) {
  // Payloads that rounding would carry into infinity or the sign stay NaN, quiet bit set.
  for (uint32_t nan_bits : {0x7f800001u, 0x7fffffffu, 0xffffffffu, 0x7f810000u, 0xff80ffffu}) {
    const uint16_t b = float_to_bfloat16(float_of(nan_bits));
    EXPECT_TRUE(std::isnan(bfloat16_to_float(b))) << std::hex << nan_bits;
    EXPECT_EQ(b & 0x0040, 0x0040) << std::hex << nan_bits;
    EXPECT_EQ(b & 0x8000, (nan_bits >> 16) & 0x8000) << std::hex << nan_bits;
  }
}

}  // namespace
}  // namespace chorus::kernels
