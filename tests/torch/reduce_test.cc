// chorus::torch::reduce under mpirun with 1 to 4 ranks: every root, in and out of place, on a
// non-contiguous view, against values computed on each rank, and bit for bit against the
// allreduce of the same tensor.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "chorus/torch.h"

namespace chorus::torch {
namespace {

using ::torch::Tensor;

// 0..count-1 times (rank + 1): small integers, exact in every dtype for up to 4 ranks.
Tensor ramp(int64_t count, ::torch::ScalarType type, int r) {
  return (::torch::arange(count, ::torch::kFloat64) * (r + 1)).to(type);
}

// The sum over every rank's ramp: the ramp times 1 + 2 + ... + size.
Tensor ramp_sum(int64_t count, ::torch::ScalarType type) {
  const int n = size();
  return (::torch::arange(count, ::torch::kFloat64) * (n * (n + 1) / 2)).to(type);
}

TEST(TorchReduce, EveryRootOutOfPlaceLeavesTheOtherRanksTheirOwn) {
  ReduceOptions sum;
  sum.op = ReduceOp::kSum;
  for (int root = 0; root < size(); ++root) {
    for (auto type : {::torch::kInt32, ::torch::kBFloat16, ::torch::kFloat64}) {
      Tensor mine = ramp(9, type, rank());
      Tensor out = reduce(mine, root, "reduce.copy." + std::to_string(root), sum);
      EXPECT_TRUE(::torch::equal(mine, ramp(9, type, rank()))) << "the input was written";
      EXPECT_TRUE(::torch::equal(out, rank() == root ? ramp_sum(9, type) : mine))
          << "root " << root << " " << type << "\n"
          << out;
    }
  }
}

TEST(TorchReduce, InPlaceOnANonContiguousViewWithAverage) {
  const int root = size() - 1;
  Tensor base = ramp(12, ::torch::kFloat32, rank()).reshape({3, 4});
  Tensor view = base.t();  // 4 x 3, not contiguous
  ASSERT_FALSE(view.is_contiguous());
  const Tensor before = view.clone();
  reduce_(view, root, "reduce.view");  // kAverage by default
  const Tensor want =
      rank() == root ? (ramp_sum(12, ::torch::kFloat32) / size()).reshape({3, 4}).t() : before;
  EXPECT_TRUE(::torch::allclose(view, want)) << view << "\nvs\n" << want;
}

// Values whose sums round: only the same combination order gives the same bits.
TEST(TorchReduce, TheRootGetsTheBitsOfAllreduce) {
  ::torch::manual_seed(17 + rank());
  Tensor x = ::torch::randn({1000, 37});
  ReduceOptions o;
  o.prescale = 0.3;
  o.postscale = 7.0;
  Tensor reduced = reduce(x, 0, "reduce.bits", o);
  Tensor all = allreduce(x, "allreduce.bits", o);
  if (rank() == 0) {
    EXPECT_TRUE(::torch::equal(reduced, all));
  } else {
    EXPECT_TRUE(::torch::equal(reduced, x));
  }
}

TEST(TorchReduce, AnAsyncHandleWaitsForTheResult) {
  ReduceOptions sum;
  sum.op = ReduceOp::kSum;
  Tensor mine = ramp(5, ::torch::kInt64, rank());
  TensorHandle h = reduce_async(mine, 0, "reduce.async", sum);
  Tensor out = h.wait();
  EXPECT_TRUE(::torch::equal(out, rank() == 0 ? ramp_sum(5, ::torch::kInt64) : mine));
}

TEST(TorchReduce, ARootOutsideTheSetThrowsOnEveryRank) {
  Tensor t = ramp(3, ::torch::kFloat32, rank());
  try {
    reduce(t, size(), "reduce.badroot");
    FAIL() << "expected an error";
  } catch (const chorus::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("root rank " + std::to_string(size()) + " is outside the set"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace chorus::torch
