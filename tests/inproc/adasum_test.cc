// Adasum through whole runtimes (ranks as threads, runtime_job.h), at every size from 1 to 5
// ranks, on one host and on several, for each floating dtype: the result against the
// definition written out here from the paper's formula, the same bits on every rank, fused
// or alone; orthogonal gradients add and parallel ones average, exactly; and the requests
// the core refuses.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "in_memory_world.h"
#include "kernels/reduce_kernels.h"
#include "runtime_job.h"

namespace chorus::testing {
namespace {

struct Layout {
  const char* name;
  std::vector<std::string> hosts;
};

const std::vector<Layout> kLayouts = {{"np1", {"a"}},
                                      {"np2", {"a", "a"}},
                                      {"np3", {"a", "a", "a"}},
                                      {"np4_two_hosts", {"a", "a", "b", "b"}},
                                      {"np5_two_hosts", {"a", "a", "a", "b", "b"}}};
const std::vector<DataType> kFloats = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                       DataType::kFloat64};

// A tensor of `dtype` as bytes, read and written as doubles.
struct Values {
  DataType dtype;
  std::vector<char> bytes;

  Values(DataType d, std::size_t n) : dtype(d), bytes(n * dtype_size(d)) {}
  std::size_t size() const { return bytes.size() / dtype_size(dtype); }
  double get(std::size_t i) const {
    const char* p = bytes.data() + i * dtype_size(dtype);
    uint16_t h;
    float f;
    double d;
    switch (dtype) {
      case DataType::kFloat16: std::memcpy(&h, p, 2); return kernels::half_to_float(h);
      case DataType::kBFloat16: std::memcpy(&h, p, 2); return kernels::bfloat16_to_float(h);
      case DataType::kFloat32: std::memcpy(&f, p, 4); return f;
      default: std::memcpy(&d, p, 8); return d;
    }
  }
  void set(std::size_t i, double v) {
    char* p = bytes.data() + i * dtype_size(dtype);
    uint16_t h;
    float f = static_cast<float>(v);
    switch (dtype) {
      case DataType::kFloat16:
        h = kernels::float_to_half(f);
        std::memcpy(p, &h, 2);
        return;
      case DataType::kBFloat16:
        h = kernels::float_to_bfloat16(f);
        std::memcpy(p, &h, 2);
        return;
      case DataType::kFloat32: std::memcpy(p, &f, 4); return;
      default: std::memcpy(p, &v, 8); return;
    }
  }
  TensorRef ref() { return host_tensor(bytes.data(), dtype, {static_cast<int64_t>(size())}); }
  std::vector<double> doubles() const {
    std::vector<double> out(size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = get(i);
    return out;
  }
};

// The paper's combination of two vectors, each side's dot product weighed by the share `wa`
// or `wb` of the ranks it covers (1/2 each in the paper), and the tree Chorus documents
// (collectives/adasum.h): ranks [lo, hi) split into the first ceil(n/2) and the rest.
std::vector<double> combine(const std::vector<double>& a, const std::vector<double>& b, double wa,
                            double wb) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa == 0 ? 1 : 1 - wa * ab / aa;
  const double cb = bb == 0 ? 1 : 1 - wb * ab / bb;
  std::vector<double> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

std::vector<double> adasum(const std::vector<std::vector<double>>& by_rank, int lo, int hi) {
  if (hi - lo == 1) return by_rank[lo];
  const int mid = lo + (hi - lo + 1) / 2;
  const double n = hi - lo;
  return combine(adasum(by_rank, lo, mid), adasum(by_rank, mid, hi), (mid - lo) / n,
                 (hi - mid) / n);
}

// Rank r's tensor t: values in [-1, 1) rounded to the dtype, some of them pointing the same
// way on every rank (a shared component), so that the coefficients are far from 1.
Values input(DataType dtype, int rank, int t, std::size_t n) {
  std::mt19937 shared(1000 + t), own(rank * 100 + t);
  std::uniform_real_distribution<double> u(-1, 1);
  Values v(dtype, n);
  for (std::size_t i = 0; i < n; ++i) v.set(i, 0.5 * u(shared) + 0.5 * u(own));
  return v;
}

double tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return 2e-3;
    case DataType::kBFloat16: return 1.6e-2;
    case DataType::kFloat32: return 2e-6;
    default: return 1e-13;
  }
}

AllreduceOptions adasum_options(double postscale = 1.0) {
  AllreduceOptions o;
  o.op = ReduceOp::kAdasum;
  o.postscale = postscale;
  return o;
}

class AdasumTest : public ::testing::TestWithParam<Layout> {
 protected:
  int n() const { return static_cast<int>(GetParam().hosts.size()); }
  InMemoryJob job_{GetParam().hosts};
};

// Three tensors per dtype (one element, an odd count, more elements than ranks can split
// evenly), each rank's its own: reduced as one fused group and one by one, with a postscale
// of 2 (exact), against the definition.
TEST_P(AdasumTest, MatchesTheDefinitionFusedOrAlone) {
  const int n = this->n();
  const std::vector<std::size_t> sizes = {1, 37, 1001};
  std::vector<std::vector<std::vector<char>>> fused_bits(n), alone_bits(n);
  run_job(job_, [&](int rank) {
    for (DataType dtype : kFloats) {
      const std::string d = dtype_name(dtype);
      std::vector<Values> fused, alone;
      std::vector<TensorRef> refs;
      std::vector<std::string> names;
      for (std::size_t t = 0; t < sizes.size(); ++t) {
        fused.push_back(input(dtype, rank, int(t), sizes[t]));
        alone.push_back(fused.back());
        refs.push_back(fused.back().ref());
        names.push_back("fused." + d + "." + std::to_string(t));
      }
      Status s = grouped_allreduce(names, refs, refs, adasum_options(2.0)).wait();
      ASSERT_TRUE(s.ok()) << "rank " << rank << " " << d << ": " << s.to_string();
      for (std::size_t t = 0; t < sizes.size(); ++t) {
        TensorRef r = alone[t].ref();
        s = allreduce("alone." + d + "." + std::to_string(t), r, r, adasum_options(2.0)).wait();
        ASSERT_TRUE(s.ok()) << "rank " << rank << " " << d << ": " << s.to_string();
        EXPECT_EQ(fused[t].bytes, alone[t].bytes)
            << "rank " << rank << " " << d << " tensor " << t << ": fusion changed the bits";
        fused_bits[rank].push_back(fused[t].bytes);
        alone_bits[rank].push_back(alone[t].bytes);
        std::vector<std::vector<double>> by_rank;
        for (int q = 0; q < n; ++q) by_rank.push_back(input(dtype, q, int(t), sizes[t]).doubles());
        const std::vector<double> want = adasum(by_rank, 0, n);
        double scale = 0;
        for (double w : want) scale = std::max(scale, std::fabs(2 * w));
        for (std::size_t i = 0; i < sizes[t]; ++i) {
          ASSERT_NEAR(fused[t].get(i), 2 * want[i], tolerance(dtype) * scale)
              << "rank " << rank << " " << d << " tensor " << t << " element " << i;
        }
      }
    }
  });
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(fused_bits[r], fused_bits[0]) << "rank " << r << " differs from rank 0";
    EXPECT_EQ(alone_bits[r], alone_bits[0]) << "rank " << r << " differs from rank 0";
  }
}

// The two cases the paper builds Adasum from: gradients with no component in common add,
// and equal gradients average (to themselves), to the bit in every dtype (float64 within
// its rounding where the tree's halves are uneven).
TEST_P(AdasumTest, OrthogonalGradientsAddParallelOnesAverage) {
  const int n = this->n();
  run_job(job_, [&](int rank) {
    for (DataType dtype : kFloats) {
      const std::string d = dtype_name(dtype);
      const std::size_t count = 4 * n + 3;
      Values orthogonal(dtype, count), parallel = input(dtype, 0, 7, count);
      const Values given = parallel;
      for (std::size_t i = 0; i < count; ++i) {
        orthogonal.set(i, int(i) % n == rank ? 1.0 + double(i) : 0.0);
      }
      TensorRef o = orthogonal.ref(), p = parallel.ref();
      ASSERT_TRUE(allreduce("orthogonal." + d, o, o, adasum_options()).wait().ok());
      ASSERT_TRUE(allreduce("parallel." + d, p, p, adasum_options()).wait().ok());
      for (std::size_t i = 0; i < count; ++i) {
        Values one(dtype, 1);
        one.set(0, 1.0 + double(i));
        EXPECT_EQ(orthogonal.get(i), one.get(0)) << "rank " << rank << " " << d << " " << i;
      }
      // Exact where the tree's halves are even (the coefficients are 1/2); where they are not
      // (3 and 5 ranks), float64 keeps the rounding of weights such as 2/3, which the narrower
      // dtypes round away.
      const bool even = (n & (n - 1)) == 0;
      if (even || dtype != DataType::kFloat64) {
        EXPECT_EQ(parallel.bytes, given.bytes) << "rank " << rank << " " << d;
      } else {
        for (std::size_t i = 0; i < count; ++i) {
          EXPECT_NEAR(parallel.get(i), given.get(i), 1e-15 * std::fabs(given.get(i)))
              << "rank " << rank << " " << i;
        }
      }
    }
  });
}

// Parallel gradients of different lengths (rank r's is r + 1 times one vector) average over
// every rank, also where the tree's halves are uneven (3 and 5 ranks): the weighed halves.
TEST_P(AdasumTest, ParallelGradientsOfAnyLengthAverageOverEveryRank) {
  const int n = this->n();
  run_job(job_, [&](int rank) {
    const std::size_t count = 257;
    Values shared = input(DataType::kFloat64, 0, 9, count);
    Values mine(DataType::kFloat64, count);
    for (std::size_t i = 0; i < count; ++i) mine.set(i, (rank + 1) * shared.get(i));
    TensorRef r = mine.ref();
    ASSERT_TRUE(allreduce("parallel.lengths", r, r, adasum_options()).wait().ok());
    const double mean = (n + 1) / 2.0;
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_NEAR(mine.get(i), mean * shared.get(i), 1e-12) << "rank " << rank << " " << i;
    }
  });
}

// What the core refuses, on the caller's thread: Adasum on integers, and Adasum for any
// collective but allreduce; a rank asking for Adasum where the others sum fails on every rank.
TEST_P(AdasumTest, RefusesWhatItCannotCombine) {
  const int n = this->n();
  run_job(job_, [&](int rank) {
    std::vector<int32_t> ints(4, 1);
    TensorRef i = tensor(ints, DataType::kInt32);
    Status s = allreduce("ints", i, i, adasum_options()).wait();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("int32"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("Adasum"), std::string::npos) << s.message();
    std::vector<float> rows(2 * n, 1.0f);
    ReducescatterOptions rs;
    rs.op = ReduceOp::kAdasum;
    s = reducescatter("rs", tensor(rows, DataType::kFloat32, {2 * n}), rs).wait();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("Adasum is an allreduce"), std::string::npos) << s.message();
    if (n == 1) return;
    std::vector<float> v(3, 1.0f);
    TensorRef r = tensor(v, DataType::kFloat32);
    AllreduceOptions mixed = adasum_options();
    if (rank == n - 1) mixed.op = ReduceOp::kSum;
    s = allreduce("mixed", r, r, mixed).wait();
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << "rank " << rank << ": " << s.to_string();
    EXPECT_NE(s.message().find("adasum"), std::string::npos) << s.message();
  });
}

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) { return info.param.name; }
INSTANTIATE_TEST_SUITE_P(Layouts, AdasumTest, ::testing::ValuesIn(kLayouts), layout_name);

}  // namespace
}  // namespace chorus::testing
