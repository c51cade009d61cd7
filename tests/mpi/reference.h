#pragma once
// What a reduction must produce, computed from the documented semantics (docs/runtime.md,
// "Precision") without any of Chorus's code, so that the randomized tests compare two
// independent computations:
//  - float16 and bfloat16 are combined in float32 and rounded to nearest even once, when
//    stored; float32 in float32; float64 in float64; integers in their own type;
//  - prescale multiplies each input before the reduction, in the same accumulation type
//    (integers: in float64, truncated toward zero), and the prescaled value is stored in the
//    tensor's dtype;
//  - average and postscale: floats multiply by (postscale / size) in the accumulation type;
//    integers without a postscale divide by the size truncating toward zero, and with one
//    multiply by (postscale / size) in float64, truncated toward zero;
//  - elements are combined in set-rank order ((x0 op x1) op x2) ... (docs/runtime.md,
//    "Reductions"), which makes the result of arbitrary float inputs exact here as well.
// Values travel as doubles: every value of every dtype that these tests use is exact in a
// double (integers stay within 2^53).
#include <cstdint>

#include "chorus/types.h"

namespace chorus::random_rounds {

bool is_float(DataType t);

/// IEEE binary16 and bfloat16, rounded to nearest even; NaN stays NaN.
uint16_t half_from_double(double v);
double half_to_double(uint16_t h);
uint16_t bfloat16_from_float(float f);
float bfloat16_to_float(uint16_t b);

/// Stores v as element i of a `t` array. Floats round to nearest even (16-bit types through
/// float32); integers must be in the type's range.
void encode(DataType t, void* base, int64_t i, double v);
double decode(DataType t, const void* base, int64_t i);
/// v as stored in t and read back.
double stored(DataType t, double v);

/// One rank's input after the prescale, as it enters the reduction.
double prescaled(DataType t, double x, double prescale);

/// The reduction of xs[0..n) (already prescaled, in set-rank order) with op, then the
/// average's division and the postscale, as stored in t.
double reduce(DataType t, ReduceOp op, double postscale, const double* xs, int n);

}  // namespace chorus::random_rounds
