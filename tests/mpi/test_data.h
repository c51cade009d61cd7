#pragma once
// Helpers shared by the multi-rank tests: typed storage for every dtype and exact-valued
// test data, so expected results are computed independently of the library's arithmetic.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "chorus/types.h"
#include "kernels/reduce_kernels.h"

namespace chorus::testing {

inline const std::vector<DataType>& all_dtypes() {
  static const std::vector<DataType> kAll = {
      DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
      DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
      DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};
  return kAll;
}

inline bool is_float(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

/// Writes v (already representable, or rounded to nearest for floats; wrapped for ints).
inline void store(DataType t, void* base, int64_t i, double v) {
  switch (t) {
    case DataType::kUInt8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(static_cast<int64_t>(v));
      break;
    case DataType::kInt8:
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(static_cast<int64_t>(v));
      break;
    case DataType::kInt16:
      static_cast<int16_t*>(base)[i] = static_cast<int16_t>(static_cast<int64_t>(v));
      break;
    case DataType::kInt32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(static_cast<int64_t>(v));
      break;
    case DataType::kInt64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DataType::kFloat16:
      static_cast<uint16_t*>(base)[i] = kernels::float_to_half(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = kernels::float_to_bfloat16(static_cast<float>(v));
      break;
    case DataType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(base)[i] = v; break;
  }
}

inline double load(DataType t, const void* base, int64_t i) {
  switch (t) {
    case DataType::kUInt8: return static_cast<const uint8_t*>(base)[i];
    case DataType::kInt8: return static_cast<const int8_t*>(base)[i];
    case DataType::kInt16: return static_cast<const int16_t*>(base)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(base)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kFloat16: return kernels::half_to_float(static_cast<const uint16_t*>(base)[i]);
    case DataType::kBFloat16:
      return kernels::bfloat16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DataType::kFloat32: return static_cast<const float*>(base)[i];
    case DataType::kFloat64: return static_cast<const double*>(base)[i];
  }
  return 0;
}

/// A tensor with its own storage.
struct Buffer {
  DataType dtype;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;

  Buffer(DataType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    bytes.assign(static_cast<std::size_t>(n) * dtype_size(t) + 1, 0);  // +1: never null
  }
  int64_t count() const { return static_cast<int64_t>((bytes.size() - 1) / dtype_size(dtype)); }
  TensorRef ref() { return TensorRef{bytes.data(), dtype, shape, Device::cpu()}; }
  double at(int64_t i) const { return load(dtype, bytes.data(), i); }
  void set(int64_t i, double v) { store(dtype, bytes.data(), i, v); }
};

/// Small integers, exact in every dtype, different per rank and element. Non-negative for
/// uint8.
inline double value(DataType t, int rank, int64_t i) {
  int64_t v = (i * 7 + rank * 3 + 1) % 11;
  return t == DataType::kUInt8 ? static_cast<double>(v) : static_cast<double>(v - 5);
}

inline double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kProduct: return a * b;
    default: return a + b;
  }
}

// The value every rank should hold at element i after an allreduce of value(t, r, i).
inline double expected(DataType t, ReduceOp op, int n, int64_t i, double postscale = 1.0) {
  double acc = value(t, 0, i);
  for (int r = 1; r < n; ++r) acc = combine(op, acc, value(t, r, i));
  const int divisor = op == ReduceOp::kAverage ? n : 1;
  Buffer one(t, {1});
  if (!is_float(t)) {
    int64_t x = static_cast<int64_t>(acc);
    one.set(0, static_cast<double>(x));  // wrap into the type first
    x = static_cast<int64_t>(one.at(0));
    x = postscale == 1.0
            ? x / divisor
            : static_cast<int64_t>(std::trunc(static_cast<double>(x) * postscale / divisor));
    one.set(0, static_cast<double>(x));
  } else if (t == DataType::kFloat64) {
    one.set(0, divisor == 1 && postscale == 1.0 ? acc : acc * (postscale / divisor));
  } else {
    float f = static_cast<float>(acc);
    if (divisor != 1 || postscale != 1.0) f *= static_cast<float>(postscale / divisor);
    one.set(0, f);
  }
  return one.at(0);
}

inline std::string label(DataType t, ReduceOp op, int64_t count) {
  return std::string(dtype_name(t)) + " " + reduce_op_name(op) + " x" + std::to_string(count);
}

}  // namespace chorus::testing
