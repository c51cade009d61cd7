#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace chorus::random_rounds {

bool is_float(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

uint16_t half_from_double(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return sign | 0x7e00;
  const double a = std::fabs(v);
  if (a >= 65520.0) return sign | 0x7c00;  // 65520 lies halfway above 65504: ties to infinity
  int e = 0;
  std::frexp(a, &e);                    // a in [2^(e-1), 2^e)
  int exponent = std::max(e - 1, -14);  // below 2^-14 the quantum stays 2^-24 (subnormals)
  // a / quantum is exact (a power-of-two scaling); nearbyint rounds to nearest even.
  double m = std::nearbyint(std::ldexp(a, 10 - exponent));
  if (m >= 2048) {  // rounded up into the next binade
    m /= 2;
    ++exponent;
  }
  if (m < 1024) return sign | static_cast<uint16_t>(m);  // subnormal or zero
  return sign | static_cast<uint16_t>(((exponent + 15) << 10) | (static_cast<int>(m) - 1024));
}

double half_to_double(uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0x1f) return mantissa ? std::nan("") : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

uint16_t bfloat16_from_float(float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  // Adding 0x7fff, plus one when the kept part is odd, carries exactly when the dropped
  // half-word is above half, or at half with an odd kept part: round to nearest even.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float bfloat16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

void encode(DataType t, void* base, int64_t i, double v) {
  switch (t) {
    case DataType::kUInt8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case DataType::kInt8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case DataType::kInt16: static_cast<int16_t*>(base)[i] = static_cast<int16_t>(v); break;
    case DataType::kInt32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DataType::kInt64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DataType::kFloat16:
      static_cast<uint16_t*>(base)[i] = half_from_double(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = bfloat16_from_float(static_cast<float>(v));
      break;
    case DataType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(base)[i] = v; break;
  }
}

double decode(DataType t, const void* base, int64_t i) {
  switch (t) {
    case DataType::kUInt8: return static_cast<const uint8_t*>(base)[i];
    case DataType::kInt8: return static_cast<const int8_t*>(base)[i];
    case DataType::kInt16: return static_cast<const int16_t*>(base)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(base)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kFloat16: return half_to_double(static_cast<const uint16_t*>(base)[i]);
    case DataType::kBFloat16: return bfloat16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DataType::kFloat32: return static_cast<const float*>(base)[i];
    case DataType::kFloat64: return static_cast<const double*>(base)[i];
  }
  return 0;
}

double stored(DataType t, double v) {
  unsigned char one[8];
  encode(t, one, 0, v);
  return decode(t, one, 0);
}

namespace {

template <class Acc>
Acc combine(ReduceOp op, Acc a, Acc b) {
  switch (op) {
    case ReduceOp::kMin: return b < a ? b : a;
    case ReduceOp::kMax: return a < b ? b : a;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return a + b;
  }
  return a;
}

template <class Acc>
Acc fold(ReduceOp op, const double* xs, int n) {
  Acc acc = static_cast<Acc>(xs[0]);
  for (int r = 1; r < n; ++r) acc = combine(op, acc, static_cast<Acc>(xs[r]));
  return acc;
}

// Floats: one multiplication by (postscale / divisor), computed in double and rounded to
// the accumulation type; none at all when both are 1.
template <class Acc>
double scaled_float(ReduceOp op, double postscale, const double* xs, int n) {
  Acc acc = fold<Acc>(op, xs, n);
  const int divisor = op == ReduceOp::kAverage ? n : 1;
  if (divisor != 1 || postscale != 1.0) acc *= static_cast<Acc>(postscale / divisor);
  return static_cast<double>(acc);
}

}  // namespace

double prescaled(DataType t, double x, double prescale) {
  if (prescale == 1.0) return x;
  switch (t) {
    case DataType::kFloat64: return x * prescale;
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat32: return stored(t, static_cast<float>(x) * static_cast<float>(prescale));
    default: return stored(t, std::trunc(x * prescale));
  }
}

double reduce(DataType t, ReduceOp op, double postscale, const double* xs, int n) {
  if (t == DataType::kFloat64) return scaled_float<double>(op, postscale, xs, n);
  if (is_float(t)) return stored(t, scaled_float<float>(op, postscale, xs, n));
  int64_t acc = fold<int64_t>(op, xs, n);
  const int divisor = op == ReduceOp::kAverage ? n : 1;
  if (postscale == 1.0) {
    acc /= divisor;  // truncates toward zero
  } else {
    acc = static_cast<int64_t>(std::trunc(static_cast<double>(acc) * (postscale / divisor)));
  }
  return stored(t, static_cast<double>(acc));
}

}  // namespace chorus::random_rounds
