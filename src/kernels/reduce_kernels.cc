// CPU reduction kernels. One generic blocked loop, parameterized by a codec (how an element is
// stored and what it accumulates in) and an op, is compiled twice: for the baseline ISA and,
// on x86, for AVX2 + F16C, chosen once at run time. Both builds give identical bits: they
// perform the same IEEE operations in the same order, only wider.
//
// Needs IEEE semantics: -ffast-math / -ffinite-math-only would fold the `x != x` NaN tests.
#include "kernels/reduce_kernels.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define CHORUS_KERNELS_X86 1
#endif

#include "kernels/reduce_kernels_internal.h"

// The generic templates must be inlined into their ISA-specific entry point, or their loops
// would be compiled for the baseline ISA only.
#define CHORUS_KERNEL_INLINE inline __attribute__((always_inline))
#define CHORUS_TARGET_AVX2 __attribute__((target("avx2,f16c,fma")))

namespace chorus::kernels {
namespace {

// Elements per block. Every source block streams once through an accumulator that stays in
// L1 (4 KiB of float, 8 KiB of double), and a constant trip count lets GCC vectorize the
// inner loops even under -O2's very-cheap cost model.
constexpr int64_t kBlock = 1024;

inline uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

inline float bits_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// ---- Scalar conversions. Branch-free where the vectorizer needs to see through them. -------

inline float bfloat16_to_float_impl(uint16_t b) { return bits_float(uint32_t{b} << 16); }

inline uint16_t float_to_bfloat16_impl(float f) {
  const uint32_t b = float_bits(f);
  // Round to nearest-even on the 16 dropped bits; a carry into the exponent is correct
  // (it rounds up to the next binade or to infinity). NaN payloads could carry into the
  // sign, so NaN takes the truncated bits with the quiet bit set instead.
  const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (b >> 16) | 0x0040u;
  const bool is_nan = f != f;  // a float compare vectorizes to one instruction
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

// Matches VCVTPH2PS exactly, including NaN: payload kept, quiet bit set.
inline float half_to_float_impl(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {
    const uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return bits_float(sign | 0x7f800000u | quiet | (mantissa << 13));
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float (and a normal float, so FTZ/DAZ
    // modes cannot touch it).
    return bits_float(sign | float_bits(static_cast<float>(mantissa) * 0x1p-24f));
  }
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// Matches VCVTPS2PH with round-to-nearest-even, including NaN: payload truncated, quiet bit
// set. Integer arithmetic only, so the FP environment (rounding mode, FTZ) does not matter.
inline uint16_t float_to_half_impl(float f) {
  const uint32_t b = float_bits(f);
  const uint32_t sign = (b >> 16) & 0x8000u;
  const uint32_t abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  // 65520 is halfway between the largest half (65504, odd mantissa) and 2^16: it and
  // everything above round to infinity.
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs >= 0x38800000u) {
    // Normal half: rebias the exponent (127 -> 15) and round off 13 bits to nearest-even;
    // a mantissa carry correctly bumps the exponent.
    const uint32_t rebiased = abs - (112u << 23);
    return static_cast<uint16_t>(sign | ((rebiased + 0xfffu + ((abs >> 13) & 1u)) >> 13));
  }
  // Half subnormal or zero: the value is m * 2^(e - 150), in units of 2^-24 that is
  // m >> (126 - e). Below 2^-25 (e < 102) everything rounds to zero, float subnormals
  // included.
  const uint32_t e = abs >> 23;
  if (e < 102) return static_cast<uint16_t>(sign);
  const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u) != 0)) ++q;  // may carry into the min normal
  return static_cast<uint16_t>(sign | q);
}

// ---- Ops. Integers wrap in the unsigned type of the same width, so overflow is defined. -----

template <class T>
using WrapType = std::make_unsigned_t<T>;
// Products of 8- and 16-bit operands are taken in unsigned int: their unsigned types would
// promote to (signed) int, where 65535 * 65535 overflows.
template <class T>
using ProductType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, WrapType<T>>;

struct SumOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct ProductOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<ProductType<T>>(a) * static_cast<ProductType<T>>(b));
    } else {
      return a * b;
    }
  }
};

// Floating min/max propagate NaN: a NaN gradient on any rank must not vanish in the result.
// (`b != b` is the NaN test; the `|` keeps the select branch-free for the vectorizer.)
struct MinOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      return ((b < a) | (b != b)) ? b : a;
    }
  }
};

struct MaxOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      return ((a < b) | (b != b)) ? b : a;
    }
  }
};

// ---- Scale, applied to the accumulator block before it is stored. ---------------------------

template <class Acc, bool kFloating = std::is_floating_point_v<Acc>>
class Scaler;

template <class Acc>
class Scaler<Acc, true> {
 public:
  explicit Scaler(Scale scale)
      : active_(!scale.is_identity()),
        multiplier_(static_cast<Acc>(scale.factor / static_cast<double>(scale.divisor))) {}

  CHORUS_KERNEL_INLINE void apply(Acc* acc, int64_t n) const {
    if (!active_) return;
    for (int64_t i = 0; i < n; ++i) acc[i] *= multiplier_;
  }

 private:
  bool active_;
  Acc multiplier_;
};

template <class Acc>
class Scaler<Acc, false> {
 public:
  explicit Scaler(Scale scale)
      : divisor_(scale.divisor),
        multiplier_(scale.factor / static_cast<double>(scale.divisor)),
        exact_(scale.factor == 1.0) {}

  CHORUS_KERNEL_INLINE void apply(Acc* acc, int64_t n) const {
    if (exact_) {
      if (divisor_ > 1) {
        for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<Acc>(acc[i] / divisor_);
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<Acc>(integer_product(acc[i], multiplier_));
  }

 private:
  int64_t divisor_;
  double multiplier_;
  bool exact_;  // factor 1: a plain truncating division by divisor_
};

// ---- Codecs: move a block between storage and the accumulator. -----------------------------

template <class T>
struct PlainTraits {
  using Storage = T;
  using Acc = T;
  static T to_acc(T x) { return x; }
  static T from_acc(T x) { return x; }
};

struct BFloat16Traits {
  using Storage = uint16_t;
  using Acc = float;
  static float to_acc(uint16_t x) { return bfloat16_to_float_impl(x); }
  static uint16_t from_acc(float x) { return float_to_bfloat16_impl(x); }
};

struct HalfSoftTraits {
  using Storage = uint16_t;
  using Acc = float;
  static float to_acc(uint16_t x) { return half_to_float_impl(x); }
  static uint16_t from_acc(float x) { return float_to_half_impl(x); }
};

// Converts one element at a time through inline functions, fused into the combine loop.
template <class Traits>
struct ElementCodec {
  using Storage = typename Traits::Storage;
  using Acc = typename Traits::Acc;

  static CHORUS_KERNEL_INLINE void load(const Storage* src, Acc* acc, int64_t n) {
    for (int64_t i = 0; i < n; ++i) acc[i] = Traits::to_acc(src[i]);
  }
  template <class Op>
  static CHORUS_KERNEL_INLINE void load_pair(const Storage* a, const Storage* b, Acc* acc,
                                             int64_t n) {
    for (int64_t i = 0; i < n; ++i) acc[i] = Op::apply(Traits::to_acc(a[i]), Traits::to_acc(b[i]));
  }
  template <class Op>
  static CHORUS_KERNEL_INLINE void combine(const Storage* src, Acc* acc, int64_t n) {
    for (int64_t i = 0; i < n; ++i) acc[i] = Op::apply(acc[i], Traits::to_acc(src[i]));
  }
  static CHORUS_KERNEL_INLINE void store(const Acc* acc, Storage* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = Traits::from_acc(acc[i]);
  }
};

#ifdef CHORUS_KERNELS_X86
// float16 through F16C: sources are converted a block at a time into a staging array that
// the (vectorized) combine loop then reads. Only instantiated in the AVX2 build.
struct HalfF16cCodec {
  using Storage = uint16_t;
  using Acc = float;

  static CHORUS_KERNEL_INLINE void load(const uint16_t* src, float* acc, int64_t n) {
    internal::half_to_float_hw(src, acc, n);
  }
  template <class Op>
  static CHORUS_KERNEL_INLINE void load_pair(const uint16_t* a, const uint16_t* b, float* acc,
                                             int64_t n) {
    load(a, acc, n);
    combine<Op>(b, acc, n);
  }
  template <class Op>
  static CHORUS_KERNEL_INLINE void combine(const uint16_t* src, float* acc, int64_t n) {
    alignas(64) float staged[kBlock];
    internal::half_to_float_hw(src, staged, n);
    for (int64_t i = 0; i < n; ++i) acc[i] = Op::apply(acc[i], staged[i]);
  }
  static CHORUS_KERNEL_INLINE void store(const float* acc, uint16_t* dst, int64_t n) {
    internal::float_to_half_hw(acc, dst, n);
  }
};
#endif

// ---- The generic loop. --------------------------------------------------------------------

// Reduces elements [begin, begin + n) with n <= kBlock. Every source block is read before
// dst's block is written, which is what lets dst be any source. (A dst that overlaps a source
// at a different offset is not supported: a later block would read what this one wrote.)
template <class Codec, class Op>
CHORUS_KERNEL_INLINE void reduce_block(void* dst, const void* const* srcs, int nsrcs, int64_t begin,
                                       int64_t n, const Scaler<typename Codec::Acc>& scaler) {
  using Storage = typename Codec::Storage;
  auto src = [&](int k) { return static_cast<const Storage*>(srcs[k]) + begin; };
  alignas(64) typename Codec::Acc acc[kBlock];
  // The first two sources in one pass (one fewer trip through acc in the common 2-way case).
  int k = 1;
  if (nsrcs >= 2) {
    Codec::template load_pair<Op>(src(0), src(1), acc, n);
    k = 2;
  } else {
    Codec::load(src(0), acc, n);
  }
  for (; k < nsrcs; ++k) {
    Codec::template combine<Op>(src(k), acc, n);
  }
  scaler.apply(acc, n);
  Codec::store(acc, static_cast<Storage*>(dst) + begin, n);
}

template <class Codec, class Op>
CHORUS_KERNEL_INLINE void reduce_with(void* dst, const void* const* srcs, int nsrcs, int64_t count,
                                      Scale scale) {
  const Scaler<typename Codec::Acc> scaler(scale);
  int64_t begin = 0;
  // Full blocks get the constant trip count; the tail is one shorter block.
  for (; begin + kBlock <= count; begin += kBlock) {
    reduce_block<Codec, Op>(dst, srcs, nsrcs, begin, kBlock, scaler);
  }
  if (begin < count) reduce_block<Codec, Op>(dst, srcs, nsrcs, begin, count - begin, scaler);
}

template <class Codec>
CHORUS_KERNEL_INLINE void reduce_codec(void* dst, const void* const* srcs, int nsrcs, int64_t count,
                                       ReduceOp op, Scale scale) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:  // Precondition violation; the caller owns the divisor.
      assert(op == ReduceOp::kSum && "kAverage must arrive as kSum plus Scale::divisor");
      reduce_with<Codec, SumOp>(dst, srcs, nsrcs, count, scale);
      return;
    case ReduceOp::kMin: reduce_with<Codec, MinOp>(dst, srcs, nsrcs, count, scale); return;
    case ReduceOp::kMax: reduce_with<Codec, MaxOp>(dst, srcs, nsrcs, count, scale); return;
    case ReduceOp::kProduct: reduce_with<Codec, ProductOp>(dst, srcs, nsrcs, count, scale); return;
    case ReduceOp::kAdasum:  // Precondition violation: Adasum runs in collectives/adasum.h.
      assert(false && "Adasum is not an elementwise reduction");
      return;
  }
}

template <bool kAvx2>
CHORUS_KERNEL_INLINE void reduce_dtype(void* dst, const void* const* srcs, int nsrcs, int64_t count,
                                       DataType dtype, ReduceOp op, Scale scale) {
  switch (dtype) {
    case DataType::kUInt8:
      return reduce_codec<ElementCodec<PlainTraits<uint8_t>>>(dst, srcs, nsrcs, count, op, scale);
    case DataType::kInt8:
      return reduce_codec<ElementCodec<PlainTraits<int8_t>>>(dst, srcs, nsrcs, count, op, scale);
    case DataType::kInt16:
      return reduce_codec<ElementCodec<PlainTraits<int16_t>>>(dst, srcs, nsrcs, count, op, scale);
    case DataType::kInt32:
      return reduce_codec<ElementCodec<PlainTraits<int32_t>>>(dst, srcs, nsrcs, count, op, scale);
    case DataType::kInt64:
      return reduce_codec<ElementCodec<PlainTraits<int64_t>>>(dst, srcs, nsrcs, count, op, scale);
    case DataType::kFloat16:
#ifdef CHORUS_KERNELS_X86
      if constexpr (kAvx2) {
        return reduce_codec<HalfF16cCodec>(dst, srcs, nsrcs, count, op, scale);
      }
#endif
      return reduce_codec<ElementCodec<HalfSoftTraits>>(dst, srcs, nsrcs, count, op, scale);
    case DataType::kBFloat16:
      return reduce_codec<ElementCodec<BFloat16Traits>>(dst, srcs, nsrcs, count, op, scale);
    case DataType::kFloat32:
      return reduce_codec<ElementCodec<PlainTraits<float>>>(dst, srcs, nsrcs, count, op, scale);
    case DataType::kFloat64:
      return reduce_codec<ElementCodec<PlainTraits<double>>>(dst, srcs, nsrcs, count, op, scale);
  }
}

bool use_avx2() {
  // Computed once (thread-safe static init); the CPU does not change under us.
  static const bool kHasAvx2 = internal::cpu_has_avx2_f16c();
  return kHasAvx2;
}

}  // namespace

namespace internal {

bool cpu_has_avx2_f16c() {
#ifdef CHORUS_KERNELS_X86
  // The runtime's avx2 check includes the OS (XCR0) enabling the YMM state. F16C is read
  // from CPUID directly because clang before 16 does not know __builtin_cpu_supports("f16c").
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool has_f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  return has_f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

float half_to_float_soft(uint16_t h) { return half_to_float_impl(h); }
uint16_t float_to_half_soft(float f) { return float_to_half_impl(f); }

#ifdef CHORUS_KERNELS_X86
CHORUS_TARGET_AVX2 void half_to_float_hw(const uint16_t* src, float* dst, int64_t count) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  if (i < count) {
    // Tail of 1..7 elements through a zero-padded vector, so there is one conversion path.
    const size_t rest = static_cast<size_t>(count - i);
    alignas(16) uint16_t in[8] = {};
    alignas(32) float out[8];
    std::memcpy(in, src + i, rest * sizeof(uint16_t));
    _mm256_store_ps(out, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(in))));
    std::memcpy(dst + i, out, rest * sizeof(float));
  }
}

CHORUS_TARGET_AVX2 void float_to_half_hw(const float* src, uint16_t* dst, int64_t count) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  if (i < count) {
    const size_t rest = static_cast<size_t>(count - i);
    alignas(32) float in[8] = {};
    alignas(16) uint16_t out[8];
    std::memcpy(in, src + i, rest * sizeof(float));
    const __m128i h = _mm256_cvtps_ph(_mm256_load_ps(in), _MM_FROUND_TO_NEAREST_INT);
    _mm_store_si128(reinterpret_cast<__m128i*>(out), h);
    std::memcpy(dst + i, out, rest * sizeof(uint16_t));
  }
}

CHORUS_TARGET_AVX2 void reduce_ordered_avx2(void* dst, const void* const* srcs, int nsrcs,
                                            int64_t count, DataType dtype, ReduceOp op,
                                            Scale scale) {
  reduce_dtype<true>(dst, srcs, nsrcs, count, dtype, op, scale);
}
#else
// Never called: cpu_has_avx2_f16c() is false off x86. Defined so tests link everywhere.
void half_to_float_hw(const uint16_t* src, float* dst, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dst[i] = half_to_float_impl(src[i]);
}
void float_to_half_hw(const float* src, uint16_t* dst, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dst[i] = float_to_half_impl(src[i]);
}
void reduce_ordered_avx2(void* dst, const void* const* srcs, int nsrcs, int64_t count,
                         DataType dtype, ReduceOp op, Scale scale) {
  reduce_dtype<false>(dst, srcs, nsrcs, count, dtype, op, scale);
}
#endif

void reduce_ordered_portable(void* dst, const void* const* srcs, int nsrcs, int64_t count,
                             DataType dtype, ReduceOp op, Scale scale) {
  reduce_dtype<false>(dst, srcs, nsrcs, count, dtype, op, scale);
}

}  // namespace internal

void reduce_ordered(void* dst, const void* const* srcs, int nsrcs, int64_t count, DataType dtype,
                    ReduceOp op, Scale scale) {
  assert(nsrcs >= 1);
  if (count <= 0 || nsrcs < 1) return;
  if (nsrcs == 1 && scale.is_identity()) {
    // A one-source reduction is a copy; memmove also keeps NaN payloads bit for bit.
    if (dst != srcs[0]) {
      std::memmove(dst, srcs[0], static_cast<size_t>(count) * dtype_size(dtype));
    }
    return;
  }
  if (use_avx2()) {
    internal::reduce_ordered_avx2(dst, srcs, nsrcs, count, dtype, op, scale);
  } else {
    internal::reduce_ordered_portable(dst, srcs, nsrcs, count, dtype, op, scale);
  }
}

void scale_copy(void* dst, const void* src, int64_t count, DataType dtype, double factor) {
  if (count <= 0) return;
  if (factor == 1.0) {
    if (dst != src) std::memmove(dst, src, static_cast<size_t>(count) * dtype_size(dtype));
    return;
  }
  const void* srcs[1] = {src};
  reduce_ordered(dst, srcs, 1, count, dtype, ReduceOp::kSum, Scale{1, factor});
}

float half_to_float(uint16_t h) { return half_to_float_impl(h); }
uint16_t float_to_half(float f) { return float_to_half_impl(f); }
float bfloat16_to_float(uint16_t b) { return bfloat16_to_float_impl(b); }
uint16_t float_to_bfloat16(float f) { return float_to_bfloat16_impl(f); }

}  // namespace chorus::kernels
