#pragma once
// Test-only view into reduce_kernels.cc: the two implementations behind each dispatch point,
// so tests can check that the vector path and the portable path agree bit for bit.
// Library code calls the functions of reduce_kernels.h instead.

#include <cstdint>

#include "chorus/types.h"
#include "kernels/reduce_kernels.h"

namespace chorus::kernels::internal {

/// True when this CPU (and OS) runs the AVX2 + F16C + FMA path that reduce_ordered picks.
/// False on every non-x86 build.
bool cpu_has_avx2_f16c();

/// Portable, bit-exact software conversions (round to nearest-even; NaN is quieted the way
/// F16C quiets it). These are what half_to_float / float_to_half return.
float half_to_float_soft(uint16_t h);
uint16_t float_to_half_soft(float f);

/// Array conversions through F16C (with a scalar F16C tail). Precondition:
/// cpu_has_avx2_f16c().
void half_to_float_hw(const uint16_t* src, float* dst, int64_t count);
void float_to_half_hw(const float* src, uint16_t* dst, int64_t count);

/// reduce_ordered restricted to the baseline ISA (no AVX2, no F16C); same contract.
void reduce_ordered_portable(void* dst, const void* const* srcs, int nsrcs, int64_t count,
                             DataType dtype, ReduceOp op, Scale scale);

/// reduce_ordered through the AVX2 + F16C path. Precondition: cpu_has_avx2_f16c().
void reduce_ordered_avx2(void* dst, const void* const* srcs, int nsrcs, int64_t count,
                         DataType dtype, ReduceOp op, Scale scale);

}  // namespace chorus::kernels::internal
