// The torch::Tensor collectives under mpirun with 2 and 3 ranks: every dtype, contiguous
// and not, in and out of place, against values computed independently on each rank.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "chorus/torch.h"

namespace chorus::torch {
namespace {

using ::torch::Tensor;

const std::vector<::torch::ScalarType> kDtypes = {
    ::torch::kUInt8,   ::torch::kInt8,     ::torch::kInt16,   ::torch::kInt32,  ::torch::kInt64,
    ::torch::kFloat16, ::torch::kBFloat16, ::torch::kFloat32, ::torch::kFloat64};

int n() { return size(); }
int me() { return rank(); }

// 0..count-1 times (rank + 1): small integers, exact in every dtype for up to 4 ranks.
Tensor ramp(int64_t count, ::torch::ScalarType type, int r) {
  return (::torch::arange(count, ::torch::kFloat64) * (r + 1)).to(type);
}

::testing::AssertionResult same(const Tensor& got, const Tensor& want) {
  if (got.scalar_type() != want.scalar_type()) {
    return ::testing::AssertionFailure()
           << "dtype " << got.scalar_type() << " vs " << want.scalar_type();
  }
  if (got.sizes() != want.sizes()) {
    return ::testing::AssertionFailure() << "shape " << got.sizes() << " vs " << want.sizes();
  }
  if (!::torch::equal(got.to(::torch::kFloat64), want.to(::torch::kFloat64))) {
    return ::testing::AssertionFailure() << "values\n" << got << "\nvs\n" << want;
  }
  return ::testing::AssertionSuccess();
}

TEST(TorchAllreduce, SumOfEveryDtype) {
  const int64_t total = n() * (n() + 1) / 2;
  for (auto type : kDtypes) {
    SCOPED_TRACE(c10::toString(type));
    Tensor got = allreduce(ramp(6, type, me()), "sum.every.dtype", {ReduceOp::kSum});
    EXPECT_TRUE(same(got, (::torch::arange(6, ::torch::kFloat64) * total).to(type)));
  }
}

TEST(TorchAllreduce, AverageMinMaxWithPostscale) {
  Tensor x = ramp(5, ::torch::kFloat32, me());
  Tensor avg = allreduce(x, "avg", {ReduceOp::kAverage, 1.0, 2.0});
  EXPECT_TRUE(same(avg, ::torch::arange(5, ::torch::kFloat32) * (n() + 1)));
  EXPECT_TRUE(same(allreduce(x, "min", {ReduceOp::kMin}), ramp(5, ::torch::kFloat32, 0)));
  EXPECT_TRUE(same(allreduce(x, "max", {ReduceOp::kMax}), ramp(5, ::torch::kFloat32, n() - 1)));
  EXPECT_TRUE(same(x, ramp(5, ::torch::kFloat32, me())));  // out of place: input untouched
}

TEST(TorchAllreduce, InPlaceOnANonContiguousView) {
  Tensor base = ::torch::arange(12, ::torch::kFloat64).reshape({3, 4}) * (me() + 1);
  Tensor view = base.t();  // 4x3, not contiguous
  ASSERT_FALSE(view.is_contiguous());
  TensorHandle h = allreduce_async_(view, "noncontiguous.inplace", {ReduceOp::kSum});
  h.wait();
  const double total = n() * (n() + 1) / 2.0;
  EXPECT_TRUE(same(base, ::torch::arange(12, ::torch::kFloat64).reshape({3, 4}) * total));
  EXPECT_TRUE(same(h.wait(), base.t()));  // a second wait returns the same result
}

TEST(TorchAllreduce, OutOfPlaceFromANonContiguousView) {
  Tensor base = ::torch::arange(6, ::torch::kInt64).reshape({2, 3}) * (me() + 1);
  Tensor got = allreduce(base.t(), "noncontiguous.copy", {ReduceOp::kSum});
  EXPECT_TRUE(
      same(got, ::torch::arange(6, ::torch::kInt64).reshape({2, 3}).t() * (n() * (n() + 1) / 2)));
}

TEST(TorchGroupedAllreduce, MixedShapesInPlaceAndNot) {
  std::vector<Tensor> ts = {ramp(3, ::torch::kFloat32, me()),
                            ramp(8, ::torch::kFloat32, me()).reshape({2, 4}).t()};
  const double total = n() * (n() + 1) / 2.0;
  std::vector<Tensor> out = grouped_allreduce(ts, {"g.a", "g.b"}, {ReduceOp::kSum});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(same(out[0], ::torch::arange(3, ::torch::kFloat32) * total));
  EXPECT_TRUE(same(out[1], (::torch::arange(8, ::torch::kFloat32) * total).reshape({2, 4}).t()));
  grouped_allreduce_(ts, {}, {ReduceOp::kSum});
  EXPECT_TRUE(same(ts[0], out[0]));
  EXPECT_TRUE(same(ts[1], out[1]));
}

TEST(TorchAllgather, UnevenFirstDimensionInRankOrder) {
  for (auto type : {::torch::kBFloat16, ::torch::kInt8, ::torch::kFloat64}) {
    Tensor mine = ::torch::full({me() + 1, 3}, me(), ::torch::TensorOptions().dtype(type));
    Tensor got = allgather(mine, std::string("gather.") + c10::toString(type));
    std::vector<Tensor> blocks;
    for (int r = 0; r < n(); ++r) blocks.push_back(::torch::full({r + 1, 3}, r, got.options()));
    EXPECT_TRUE(same(got, ::torch::cat(blocks)));
  }
}

TEST(TorchBroadcast, FromTheLastRank) {
  const int root = n() - 1;
  Tensor t = ramp(7, ::torch::kFloat16, me());
  Tensor copy = broadcast(t, root, "bcast.copy");
  EXPECT_TRUE(same(copy, ramp(7, ::torch::kFloat16, root)));
  EXPECT_TRUE(same(t, ramp(7, ::torch::kFloat16, me())));
  broadcast_(t, root, "bcast.inplace");
  EXPECT_TRUE(same(t, ramp(7, ::torch::kFloat16, root)));
}

// The collectives of the C++ API are not differentiable: a result must not carry the
// input's autograd history (a gradient through it would be the identity, which is wrong).
TEST(TorchBroadcast, ResultHasNoAutogradHistory) {
  Tensor w = ::torch::ones({3}, ::torch::requires_grad());
  Tensor x = w * static_cast<double>(me() + 1);
  Tensor copy = broadcast(x, 0, "bcast.history");
  EXPECT_FALSE(copy.requires_grad());
  EXPECT_FALSE(copy.grad_fn());
  EXPECT_TRUE(same(copy.detach(), ::torch::ones({3})));
}

TEST(TorchAlltoall, SplitsAndReceivedSplits) {
  // Rank r sends i + 1 rows of value 100 r + i to rank i.
  std::vector<Tensor> blocks;
  std::vector<int64_t> splits;
  for (int i = 0; i < n(); ++i) {
    blocks.push_back(::torch::full({i + 1, 2}, 100 * me() + i, ::torch::kInt32));
    splits.push_back(i + 1);
  }
  AlltoallResult got = alltoall(::torch::cat(blocks), splits, "a2a");
  std::vector<Tensor> want;
  for (int i = 0; i < n(); ++i)
    want.push_back(::torch::full({me() + 1, 2}, 100 * i + me(), ::torch::kInt32));
  EXPECT_TRUE(same(got.output, ::torch::cat(want)));
  EXPECT_EQ(got.received_splits, std::vector<int64_t>(n(), me() + 1));
}

TEST(TorchReducescatter, BlocksOfTheSum) {
  const int64_t rows = 2 * n() + 1;  // the first rank gets one row more
  Tensor x = ::torch::ones({rows, 3}, ::torch::kFloat32) * (me() + 1);
  Tensor got = reducescatter(x, "rs", {ReduceOp::kSum});
  const int64_t mine = me() == 0 ? 3 : 2;
  EXPECT_TRUE(same(got, ::torch::full({mine, 3}, n() * (n() + 1) / 2, ::torch::kFloat32)));
}

TEST(TorchGrouped, AllgatherAndReducescatterOfMixedDtypes) {
  Tensor rows = ::torch::full({me() + 1, 2}, me(), ::torch::kInt16);
  Tensor flat = ramp(3, ::torch::kFloat64, me());
  std::vector<Tensor> got = grouped_allgather({rows, flat}, {"tg.rows", "tg.flat"});
  ASSERT_EQ(got.size(), 2u);
  std::vector<Tensor> want_rows, want_flat;
  for (int r = 0; r < n(); ++r) {
    want_rows.push_back(::torch::full({r + 1, 2}, r, ::torch::kInt16));
    want_flat.push_back(ramp(3, ::torch::kFloat64, r));
  }
  EXPECT_TRUE(same(got[0], ::torch::cat(want_rows)));
  EXPECT_TRUE(same(got[1], ::torch::cat(want_flat)));

  ReducescatterOptions sum;
  sum.op = ReduceOp::kSum;
  sum.prescale = 1.5;  // 3 * 1.5 = 4.5: truncated to 4 on every rank, as Horovod
  std::vector<Tensor> blocks = grouped_reducescatter(
      {::torch::full({n(), 2}, 3, ::torch::kInt16), ::torch::ones({2 * n()}, ::torch::kFloat32)},
      {}, sum);
  EXPECT_TRUE(same(blocks[0], ::torch::full({1, 2}, 4 * n(), ::torch::kInt16)));
  EXPECT_TRUE(same(blocks[1], ::torch::full({2}, 1.5 * n(), ::torch::kFloat32)));
}

TEST(TorchSparse, SumOverRanksWithDifferentNonZerosAndLayouts) {
  // Rank r sets row r % 4 of a 4x2 tensor to r + 1; rank 0 sends no non-zero at all, in
  // a fully sparse layout (as zero_grad() leaves a sparse gradient), the others by rows.
  Tensor dense = ::torch::zeros({4, 2}, ::torch::kFloat64);
  Tensor sparse = ::torch::zeros({4, 2}, ::torch::kFloat64).to_sparse();
  if (me() > 0) {
    dense[me() % 4] = me() + 1;
    sparse = dense.to_sparse(1);
  }
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  Tensor got = sparse_allreduce_async(sparse, "ts.sum", o).wait();
  ASSERT_TRUE(got.is_sparse());
  Tensor want = ::torch::zeros({4, 2}, ::torch::kFloat64);
  for (int r = 1; r < n(); ++r) want[r % 4] += r + 1;
  EXPECT_TRUE(same(got.to_dense(), want));
  o.op = ReduceOp::kAverage;
  Tensor average = sparse_allreduce_async(sparse, "ts.avg", o).wait();
  EXPECT_TRUE(same(average.to_dense(), want / n()));
}

TEST(TorchErrors, ANameInFlightThrowsAtTheCallOnThatRank) {
  if (n() < 2) GTEST_SKIP() << "needs two ranks to hold a collective in flight";
  Tensor x = ::torch::ones({3});
  TensorHandle first;
  if (me() == 0) {
    first = allreduce_async(x, "tn.dup", {ReduceOp::kSum});
    try {
      allreduce_async(x, "tn.dup", {ReduceOp::kSum});
      FAIL() << "the second call did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("already in flight"), std::string::npos) << e.what();
    }
  }
  ASSERT_TRUE(barrier().wait().ok());
  if (me() != 0) first = allreduce_async(x, "tn.dup", {ReduceOp::kSum});
  EXPECT_TRUE(same(first.wait(), ::torch::full({3}, n(), ::torch::kFloat32)));
}

TEST(TorchErrors, UnsupportedDtypeNamesTheTensor) {
  try {
    allreduce(::torch::ones({2}, ::torch::kBool), "flags");
    FAIL() << "bool allreduce did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'flags'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Bool"), std::string::npos) << e.what();
  }
}

TEST(TorchErrors, ShapesThatDifferAcrossRanksFailOnEveryRank) {
  try {
    allreduce(::torch::ones({me() + 2}), "uneven.shapes");
    FAIL() << "mismatched shapes did not throw on rank " << me();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kMismatch) << e.what();
    EXPECT_NE(std::string(e.what()).find("uneven.shapes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace chorus::torch
