#pragma once
// CPU reduction kernels used by the MPI backend and the fusion pack/unpack. Every kernel is
// a pure function of its arguments, safe to call from any thread.
//
// Determinism: reduce_ordered combines the sources strictly left to right (rank order), so
// a given element gets the same bits whatever buffer it travels in (fused or alone) and on
// every rank.
//
// Precision: float16 and bfloat16 accumulate in float32 across all sources and are rounded
// once, to nearest-even, when stored. float32 accumulates in float32, float64 in float64.
// Integers wrap around on overflow (two's complement), as MPI does.

#include <cstdint>

#include "chorus/types.h"

namespace chorus::kernels {

/// Applied to a reduction's result: first divide by `divisor` (kAverage passes the set
/// size), then multiply by `factor` (postscale).
/// Floating types: x * (factor / divisor), the product taken in the accumulation type.
/// Integer types, as Horovod on the CPU: with factor 1, x / divisor truncating toward zero;
/// otherwise x * (factor / divisor) in float64, truncated toward zero (integer_product).
struct Scale {
  int64_t divisor = 1;
  double factor = 1.0;
  bool is_identity() const { return divisor == 1 && factor == 1.0; }
};

/// dst[i] = scale(srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i]), evaluated left to right.
/// `op` is kSum, kMin, kMax or kProduct (callers turn kAverage into kSum plus a divisor).
/// dst may alias any source. nsrcs >= 1.
void reduce_ordered(void* dst, const void* const* srcs, int nsrcs, int64_t count, DataType dtype,
                    ReduceOp op, Scale scale);

/// dst[i] = src[i] * factor (integer types: integer_product). dst may equal src. With
/// factor == 1 this is a plain copy (memmove when dst != src).
void scale_copy(void* dst, const void* src, int64_t count, DataType dtype, double factor);

/// An integer scaled by a float64 factor: the product truncated toward zero, then wrapped to
/// the element type. A product outside int64's range (Horovod leaves it undefined) gives
/// INT64_MIN, as x86's conversion does, so every build gives the same bits.
#ifdef __CUDACC__
#define CHORUS_HOST_DEVICE __host__ __device__
#else
#define CHORUS_HOST_DEVICE
#endif
CHORUS_HOST_DEVICE inline int64_t integer_product(int64_t x, double factor) {
  const double v = static_cast<double>(x) * factor;
  return v >= -0x1p63 && v < 0x1p63 ? static_cast<int64_t>(v) : INT64_MIN;
}

/// IEEE binary16 and bfloat16 conversions, round to nearest-even, NaN stays NaN.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

}  // namespace chorus::kernels
