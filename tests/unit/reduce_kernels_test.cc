// Unit tests for the CPU reduction kernels: every dtype x op against a scalar reference that
// restates the contract of reduce_kernels.h, aliasing, scaling, wraparound, and the F16C path
// of a whole float16 reduction against the software path. The 16-bit conversions themselves
// are in half_conversion_test.cc.
#include "kernels/reduce_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/reduce_kernels_internal.h"

namespace chorus::kernels {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr DataType kAllDataTypes[] = {
    DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
    DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
    DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64,
};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};
constexpr uint64_t kSeed = 0x5eed'c0de'2024ull;

// ---- Implementations under test, all with reduce_ordered's signature. ------------------------

using ReduceFn = void (*)(void*, const void* const*, int, int64_t, DataType, ReduceOp, Scale);

struct Impl {
  const char* name;
  ReduceFn fn;
};

std::vector<Impl> implementations() {
  std::vector<Impl> impls = {{"dispatch", &reduce_ordered},
                             {"portable", &internal::reduce_ordered_portable}};
  if (internal::cpu_has_avx2_f16c()) impls.push_back({"avx2", &internal::reduce_ordered_avx2});
  return impls;
}

// ---- Reference: one element at a time, left to right, straight from the header's contract. ---

template <class A>
A reference_op(ReduceOp op, A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    switch (op) {
      case ReduceOp::kSum: return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
      case ReduceOp::kProduct:  // in uint64_t: narrower unsigned types would promote to int
        return static_cast<A>(static_cast<uint64_t>(static_cast<U>(a)) * static_cast<U>(b));
      case ReduceOp::kMin: return std::min(a, b);
      case ReduceOp::kMax: return std::max(a, b);
      default: break;
    }
  } else {
    // Min and max propagate NaN (the kernels' documented choice).
    switch (op) {
      case ReduceOp::kSum: return a + b;
      case ReduceOp::kProduct: return a * b;
      case ReduceOp::kMin: return std::isnan(b) ? b : (b < a ? b : a);
      case ReduceOp::kMax: return std::isnan(b) ? b : (a < b ? b : a);
      default: break;
    }
  }
  ADD_FAILURE() << "unexpected op";
  return a;
}

template <class A>
A reference_scale(A x, Scale scale) {
  if constexpr (std::is_integral_v<A>) {
    if (scale.factor == 1.0) return static_cast<A>(x / scale.divisor);
    // The float64 product truncated toward zero; outside int64's range, INT64_MIN.
    const double v =
        std::trunc(static_cast<double>(x) * (scale.factor / static_cast<double>(scale.divisor)));
    const bool in_range = v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    return static_cast<A>(in_range ? static_cast<int64_t>(v) : INT64_MIN);
  } else {
    if (scale.is_identity()) return x;
    return x * static_cast<A>(scale.factor / static_cast<double>(scale.divisor));
  }
}

template <class S, class A, class Load, class Store>
Bytes reference_reduce_typed(const std::vector<Bytes>& srcs, int64_t count, ReduceOp op,
                             Scale scale, Load load, Store store) {
  Bytes out(static_cast<size_t>(count) * sizeof(S));
  for (int64_t i = 0; i < count; ++i) {
    auto element = [&](const Bytes& buf) {
      S s;
      std::memcpy(&s, buf.data() + i * sizeof(S), sizeof(S));
      return static_cast<A>(load(s));
    };
    A acc = element(srcs[0]);
    for (size_t k = 1; k < srcs.size(); ++k) acc = reference_op<A>(op, acc, element(srcs[k]));
    const S result = store(reference_scale(acc, scale));
    std::memcpy(out.data() + i * sizeof(S), &result, sizeof(S));
  }
  return out;
}

Bytes reference_reduce(const std::vector<Bytes>& srcs, int64_t count, DataType dtype, ReduceOp op,
                       Scale scale) {
  auto same = [](auto x) { return x; };
  switch (dtype) {
    case DataType::kUInt8:
      return reference_reduce_typed<uint8_t, uint8_t>(srcs, count, op, scale, same, same);
    case DataType::kInt8:
      return reference_reduce_typed<int8_t, int8_t>(srcs, count, op, scale, same, same);
    case DataType::kInt16:
      return reference_reduce_typed<int16_t, int16_t>(srcs, count, op, scale, same, same);
    case DataType::kInt32:
      return reference_reduce_typed<int32_t, int32_t>(srcs, count, op, scale, same, same);
    case DataType::kInt64:
      return reference_reduce_typed<int64_t, int64_t>(srcs, count, op, scale, same, same);
    case DataType::kFloat16:
      return reference_reduce_typed<uint16_t, float>(srcs, count, op, scale, &half_to_float,
                                                     &float_to_half);
    case DataType::kBFloat16:
      return reference_reduce_typed<uint16_t, float>(srcs, count, op, scale, &bfloat16_to_float,
                                                     &float_to_bfloat16);
    case DataType::kFloat32:
      return reference_reduce_typed<float, float>(srcs, count, op, scale, same, same);
    case DataType::kFloat64:
      return reference_reduce_typed<double, double>(srcs, count, op, scale, same, same);
  }
  return {};
}

// ---- Data. --------------------------------------------------------------------------------

// Integers: uniform random bytes (so sums and products overflow). Floats: uniform in [-4, 4],
// rounded to the storage type, so five-way products stay finite.
Bytes random_buffer(DataType dtype, int64_t count, std::mt19937_64& rng) {
  Bytes out(static_cast<size_t>(count) * dtype_size(dtype));
  std::uniform_real_distribution<double> real(-4.0, 4.0);
  for (int64_t i = 0; i < count; ++i) {
    uint8_t* p = out.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DataType::kUInt8:
      case DataType::kInt8:
      case DataType::kInt16:
      case DataType::kInt32:
      case DataType::kInt64: {
        const uint64_t r = rng();
        std::memcpy(p, &r, dtype_size(dtype));
        break;
      }
      case DataType::kFloat16: {
        const uint16_t h = float_to_half(static_cast<float>(real(rng)));
        std::memcpy(p, &h, 2);
        break;
      }
      case DataType::kBFloat16: {
        const uint16_t b = float_to_bfloat16(static_cast<float>(real(rng)));
        std::memcpy(p, &b, 2);
        break;
      }
      case DataType::kFloat32: {
        const float f = static_cast<float>(real(rng));
        std::memcpy(p, &f, 4);
        break;
      }
      case DataType::kFloat64: {
        const double d = real(rng);
        std::memcpy(p, &d, 8);
        break;
      }
    }
  }
  return out;
}

std::vector<Bytes> random_sources(DataType dtype, int nsrcs, int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Bytes> srcs;
  for (int k = 0; k < nsrcs; ++k) srcs.push_back(random_buffer(dtype, count, rng));
  return srcs;
}

std::vector<const void*> pointers(const std::vector<Bytes>& bufs) {
  std::vector<const void*> ptrs;
  for (const Bytes& b : bufs) ptrs.push_back(b.data());
  return ptrs;
}

// Empty on success, else a description of the first differing element.
std::string first_difference(const Bytes& got, const Bytes& want, DataType dtype) {
  if (got.size() != want.size()) return "size differs";
  const size_t width = dtype_size(dtype);
  for (size_t off = 0; off < got.size(); off += width) {
    if (std::memcmp(got.data() + off, want.data() + off, width) == 0) continue;
    uint64_t g = 0, w = 0;
    std::memcpy(&g, got.data() + off, width);
    std::memcpy(&w, want.data() + off, width);
    std::ostringstream os;
    os << "element " << off / width << std::hex << ": got bits 0x" << g << " want 0x" << w;
    return os.str();
  }
  return "";
}

std::string describe_case(const char* impl, DataType dtype, ReduceOp op, int nsrcs, int64_t count) {
  return std::string(impl) + " " + dtype_name(dtype) + " " + reduce_op_name(op) +
         " nsrcs=" + std::to_string(nsrcs) + " count=" + std::to_string(count);
}

// ---- reduce_ordered. ------------------------------------------------------------------------

TEST(ReduceOrderedTest, MatchesReferenceForEveryDtypeOpAndSize) {
  uint64_t seed = kSeed;
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllOps) {
      for (int nsrcs : {1, 2, 3, 5}) {
        for (int64_t count : {0, 1, 7, 1000, 4099}) {
          const std::vector<Bytes> srcs = random_sources(dtype, nsrcs, count, ++seed);
          const std::vector<const void*> ptrs = pointers(srcs);
          const Bytes want = reference_reduce(srcs, count, dtype, op, Scale{});
          for (const Impl& impl : implementations()) {
            Bytes got(want.size() + 1, 0xab);  // one guard byte past the end
            impl.fn(got.data(), ptrs.data(), nsrcs, count, dtype, op, Scale{});
            EXPECT_EQ(got.back(), 0xab) << describe_case(impl.name, dtype, op, nsrcs, count);
            got.pop_back();
            EXPECT_EQ(first_difference(got, want, dtype), "")
                << describe_case(impl.name, dtype, op, nsrcs, count);
          }
        }
      }
    }
  }
}

TEST(ReduceOrderedTest, DestinationMayAliasFirstOrLastSource) {
  constexpr int kSources = 3;
  constexpr int64_t kCount = 4099;  // several blocks and a tail
  uint64_t seed = kSeed + 1000;
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllOps) {
      const std::vector<Bytes> original = random_sources(dtype, kSources, kCount, ++seed);
      const Bytes want = reference_reduce(original, kCount, dtype, op, Scale{});
      for (const Impl& impl : implementations()) {
        for (int aliased : {0, kSources - 1}) {
          std::vector<Bytes> srcs = original;
          const std::vector<const void*> ptrs = pointers(srcs);
          impl.fn(srcs[aliased].data(), ptrs.data(), kSources, kCount, dtype, op, Scale{});
          EXPECT_EQ(first_difference(srcs[aliased], want, dtype), "")
              << describe_case(impl.name, dtype, op, kSources, kCount) << " dst=srcs[" << aliased
              << "]";
        }
      }
    }
  }
}

TEST(ReduceOrderedTest, ScaleMatchesReference) {
  const Scale scales[] = {{3, 1.0}, {1, 0.25}, {4, 2.5}, {7, -1.5}};
  uint64_t seed = kSeed + 2000;
  for (DataType dtype : kAllDataTypes) {
    for (const Scale& scale : scales) {
      for (int nsrcs : {1, 2, 5}) {
        const int64_t count = 4099;
        const std::vector<Bytes> srcs = random_sources(dtype, nsrcs, count, ++seed);
        const std::vector<const void*> ptrs = pointers(srcs);
        const Bytes want = reference_reduce(srcs, count, dtype, ReduceOp::kSum, scale);
        for (const Impl& impl : implementations()) {
          Bytes got(want.size());
          impl.fn(got.data(), ptrs.data(), nsrcs, count, dtype, ReduceOp::kSum, scale);
          EXPECT_EQ(first_difference(got, want, dtype), "")
              << describe_case(impl.name, dtype, ReduceOp::kSum, nsrcs, count)
              << " divisor=" << scale.divisor << " factor=" << scale.factor;
        }
      }
    }
  }
}

TEST(ReduceOrderedTest, IntegerScaleTruncatesTowardZero) {
  const int32_t a[] = {7, -7, 5, -5, 100};
  const int32_t b[] = {0, 0, 0, 0, 1};
  const void* srcs[] = {a, b};
  int32_t out[5];
  // Average of two: 7/2 = 3, -7/2 = -3 (toward zero), 101/2 = 50.
  reduce_ordered(out, srcs, 2, 5, DataType::kInt32, ReduceOp::kSum, Scale{2, 1.0});
  EXPECT_EQ(std::vector<int32_t>(out, out + 5), (std::vector<int32_t>{3, -3, 2, -2, 50}));
  // With a factor, the sum times (1.5 / 2) in float64, truncated: 7 * 0.75 = 5.25 -> 5,
  // 5 * 0.75 = 3.75 -> 3, 101 * 0.75 = 75.75 -> 75 (not the average 3 times 1.5).
  reduce_ordered(out, srcs, 2, 5, DataType::kInt32, ReduceOp::kSum, Scale{2, 1.5});
  EXPECT_EQ(std::vector<int32_t>(out, out + 5), (std::vector<int32_t>{5, -5, 3, -3, 75}));
}

TEST(ReduceOrderedTest, IntegerPrescaleTruncatesEachInput) {
  // A prescale of 1.5 on 9 gives 13 (13.5 truncated) on each rank, so two ranks sum to 26.
  const int16_t in[] = {9, -9, 3};
  int16_t scaled[3];
  scale_copy(scaled, in, 3, DataType::kInt16, 1.5);
  EXPECT_EQ(std::vector<int16_t>(scaled, scaled + 3), (std::vector<int16_t>{13, -13, 4}));
  const void* srcs[] = {scaled, scaled};
  int16_t out[3];
  reduce_ordered(out, srcs, 2, 3, DataType::kInt16, ReduceOp::kSum, Scale{});
  EXPECT_EQ(std::vector<int16_t>(out, out + 3), (std::vector<int16_t>{26, -26, 8}));
}

TEST(ReduceOrderedTest, IntegerProductOutsideInt64IsInt64MinWrapped) {
  const int64_t in[] = {int64_t{1} << 62, 5};
  int64_t out[2];
  scale_copy(out, in, 2, DataType::kInt64, 4.0);
  EXPECT_EQ(out[0], INT64_MIN);
  EXPECT_EQ(out[1], 20);
  EXPECT_EQ(integer_product(int64_t{1} << 62, -2.0), INT64_MIN);  // exactly -2^63: in range
}

TEST(ReduceOrderedTest, Int16WrapsLikeItsType) {
  const int16_t a[] = {32767, -32768, 300};
  const int16_t b[] = {1, -1, 300};
  const void* srcs[] = {a, b};
  int16_t out[3];
  reduce_ordered(out, srcs, 2, 3, DataType::kInt16, ReduceOp::kSum, Scale{});
  EXPECT_EQ(std::vector<int16_t>(out, out + 3), (std::vector<int16_t>{-32768, 32767, 600}));
  reduce_ordered(out, srcs, 2, 3, DataType::kInt16, ReduceOp::kProduct, Scale{});
  // 300 * 300 = 90000 = 65536 + 24464: the product wraps, never overflows a signed int.
  EXPECT_EQ(std::vector<int16_t>(out, out + 3), (std::vector<int16_t>{32767, -32768, 24464}));
}

TEST(ReduceOrderedTest, FloatScaleMultipliesByFactorOverDivisor) {
  const float a[] = {3.0f, 1.0f};
  const float b[] = {3.0f, 2.0f};
  const void* srcs[] = {a, b};
  float out[2];
  reduce_ordered(out, srcs, 2, 2, DataType::kFloat32, ReduceOp::kSum, Scale{2, 0.5});
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], 0.75f);
}

TEST(ReduceOrderedTest, IntegerOverflowWraps) {
  {
    const int8_t a[] = {127, -128, 100};
    const int8_t b[] = {1, -1, 100};
    const void* srcs[] = {a, b};
    int8_t out[3];
    reduce_ordered(out, srcs, 2, 3, DataType::kInt8, ReduceOp::kSum, Scale{});
    EXPECT_EQ(std::vector<int8_t>(out, out + 3), (std::vector<int8_t>{-128, 127, -56}));
    reduce_ordered(out, srcs, 2, 3, DataType::kInt8, ReduceOp::kProduct, Scale{});
    // 127, 128 -> -128, 10000 mod 256 = 16
    EXPECT_EQ(std::vector<int8_t>(out, out + 3), (std::vector<int8_t>{127, -128, 16}));
  }
  {
    const uint8_t a[] = {255, 16};
    const uint8_t b[] = {1, 16};
    const void* srcs[] = {a, b};
    uint8_t out[2];
    reduce_ordered(out, srcs, 2, 2, DataType::kUInt8, ReduceOp::kSum, Scale{});
    EXPECT_EQ(out[0], 0);
    EXPECT_EQ(out[1], 32);
    reduce_ordered(out, srcs, 2, 2, DataType::kUInt8, ReduceOp::kProduct, Scale{});
    EXPECT_EQ(out[0], 255);
    EXPECT_EQ(out[1], 0);
  }
  {
    const int32_t max = std::numeric_limits<int32_t>::max();
    const int32_t a[] = {max, max};
    const int32_t b[] = {1, 2};
    const void* srcs[] = {a, b};
    int32_t out[2];
    reduce_ordered(out, srcs, 2, 2, DataType::kInt32, ReduceOp::kSum, Scale{});
    EXPECT_EQ(out[0], std::numeric_limits<int32_t>::min());
    reduce_ordered(out, srcs, 2, 2, DataType::kInt32, ReduceOp::kProduct, Scale{});
    EXPECT_EQ(out[1], -2);  // 2^32 - 2 wraps to -2
  }
  {
    const int64_t max = std::numeric_limits<int64_t>::max();
    const int64_t a[] = {max, int64_t{1} << 62};
    const int64_t b[] = {1, 4};
    const void* srcs[] = {a, b};
    int64_t out[2];
    reduce_ordered(out, srcs, 2, 2, DataType::kInt64, ReduceOp::kSum, Scale{});
    EXPECT_EQ(out[0], std::numeric_limits<int64_t>::min());
    reduce_ordered(out, srcs, 2, 2, DataType::kInt64, ReduceOp::kProduct, Scale{});
    EXPECT_EQ(out[1], 0);  // 2^64 wraps to 0
  }
}

TEST(ReduceOrderedTest, FloatMinMaxPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float a[] = {nan, 1.0f, 1.0f};
  const float b[] = {1.0f, nan, 2.0f};
  const void* srcs[] = {a, b};
  for (const Impl& impl : implementations()) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      float out[3];
      impl.fn(out, srcs, 2, 3, DataType::kFloat32, op, Scale{});
      EXPECT_TRUE(std::isnan(out[0])) << impl.name << " " << reduce_op_name(op);
      EXPECT_TRUE(std::isnan(out[1])) << impl.name << " " << reduce_op_name(op);
      EXPECT_EQ(out[2], op == ReduceOp::kMin ? 1.0f : 2.0f) << impl.name;
    }
  }
}

TEST(ReduceOrderedTest, HalfPrecisionRoundsOnceAfterFloatAccumulation) {
  // 2048 + 1 + 1 in float16: rounding after each add would give 2048 twice (ties to even);
  // accumulating in float gives 2050, which is representable.
  const uint16_t a[] = {float_to_half(2048.0f)};
  const uint16_t b[] = {float_to_half(1.0f)};
  const void* srcs[] = {a, b, b};
  for (const Impl& impl : implementations()) {
    uint16_t out[1];
    impl.fn(out, srcs, 3, 1, DataType::kFloat16, ReduceOp::kSum, Scale{});
    EXPECT_EQ(half_to_float(out[0]), 2050.0f) << impl.name;
  }
}

// ---- scale_copy. ----------------------------------------------------------------------------

TEST(ScaleCopyTest, MatchesReferenceInAndOutOfPlace) {
  uint64_t seed = kSeed + 3000;
  for (DataType dtype : kAllDataTypes) {
    for (double factor : {1.0, 0.5, -3.25}) {
      for (int64_t count : {0, 1, 7, 4099}) {
        const std::vector<Bytes> src = random_sources(dtype, 1, count, ++seed);
        const Bytes want =
            factor == 1.0 ? src[0]
                          : reference_reduce(src, count, dtype, ReduceOp::kSum, Scale{1, factor});
        Bytes out(src[0].size());
        scale_copy(out.data(), src[0].data(), count, dtype, factor);
        EXPECT_EQ(first_difference(out, want, dtype), "")
            << dtype_name(dtype) << " factor=" << factor << " count=" << count;
        Bytes in_place = src[0];
        scale_copy(in_place.data(), in_place.data(), count, dtype, factor);
        EXPECT_EQ(first_difference(in_place, want, dtype), "")
            << "in place " << dtype_name(dtype) << " factor=" << factor << " count=" << count;
      }
    }
  }
}

TEST(ScaleCopyTest, IntegersTruncateTowardZero) {
  const int32_t src[] = {3, -3, 4, 1};
  int32_t out[4];
  scale_copy(out, src, 4, DataType::kInt32, 0.5);  // 1.5 -> 1, -1.5 -> -1, 2, 0.5 -> 0
  EXPECT_EQ(std::vector<int32_t>(out, out + 4), (std::vector<int32_t>{1, -1, 2, 0}));
}

// ---- The F16C path of a whole reduction. ---------------------------------------------------

class F16cTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!internal::cpu_has_avx2_f16c()) GTEST_SKIP() << "CPU lacks AVX2/F16C";
  }
};

TEST_F(F16cTest, DispatchedFloat16ReductionUsesIdenticalBits) {
  // The F16C path and the software path of a whole reduction agree, including scale.
  const int64_t count = 100'003;
  const std::vector<Bytes> srcs = random_sources(DataType::kFloat16, 4, count, kSeed + 4000);
  const std::vector<const void*> ptrs = pointers(srcs);
  for (ReduceOp op : kAllOps) {
    Bytes hw(static_cast<size_t>(count) * 2), soft(hw.size());
    internal::reduce_ordered_avx2(hw.data(), ptrs.data(), 4, count, DataType::kFloat16, op,
                                  Scale{3, 0.7});
    internal::reduce_ordered_portable(soft.data(), ptrs.data(), 4, count, DataType::kFloat16, op,
                                      Scale{3, 0.7});
    EXPECT_EQ(first_difference(hw, soft, DataType::kFloat16), "") << reduce_op_name(op);
  }
}

}  // namespace
}  // namespace chorus::kernels
