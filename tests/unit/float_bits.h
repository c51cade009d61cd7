#pragma once
// Bit views of a float, for the tests of the 16-bit conversions.
#include <cstdint>
#include <cstring>

namespace chorus::testing {

inline uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

inline float float_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

}  // namespace chorus::testing
