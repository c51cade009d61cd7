// The per-op planning both executors share (src/core/op_plan.h): byte counts, output
// shapes, received splits, rows per rank and fused offsets, for one and several ranks, odd
// sizes, zero rows and uneven splits. Pure: no MPI, no GPU.

#include "core/op_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace chorus {
namespace {

using V = std::vector<int64_t>;

Response response(OpType op, V shape, DataType dtype = DataType::kFloat32) {
  Response r;
  r.op = op;
  r.name = "t";
  r.dtype = dtype;
  r.shape = std::move(shape);
  return r;
}

int64_t sum(const V& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

TEST(OpPlan, WireOpAndResultScale) {
  EXPECT_EQ(wire_op(ReduceOp::kAverage), ReduceOp::kSum);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    EXPECT_EQ(wire_op(op), op);
  }
  Response r = response(OpType::kAllreduce, {4});
  r.reduce_op = ReduceOp::kAverage;
  r.postscale = 0.5;
  kernels::Scale s = result_scale(r, 3);
  EXPECT_EQ(s.divisor, 3);
  EXPECT_EQ(s.factor, 0.5);
  r.reduce_op = ReduceOp::kSum;
  s = result_scale(r, 3);
  EXPECT_EQ(s.divisor, 1);
  EXPECT_EQ(s.factor, 0.5);
  r.postscale = 1.0;
  EXPECT_TRUE(result_scale(r, 1).is_identity());
}

TEST(OpPlan, RowElements) {
  EXPECT_EQ(row_elements({}), 1);
  EXPECT_EQ(row_elements({7}), 1);
  EXPECT_EQ(row_elements({7, 3}), 3);
  EXPECT_EQ(row_elements({0, 3, 5}), 15);
  EXPECT_EQ(row_elements({2, 0, 5}), 0);
}

TEST(OpPlan, AllgatherOneRank) {
  Response r = response(OpType::kAllgather, {5, 3});
  r.first_dims = {5};
  AllgatherPlan p = plan_allgather(r, 1);
  EXPECT_EQ(p.bytes, V({5 * 3 * 4}));
  EXPECT_EQ(p.output_shape, V({5, 3}));
  EXPECT_EQ(p.output_bytes, 60);
}

TEST(OpPlan, AllgatherUnevenRowsWithAnEmptyRank) {
  // float16, rows of 3 x 2 elements: 12 bytes a row.
  Response r = response(OpType::kAllgather, {4, 3, 2}, DataType::kFloat16);
  r.first_dims = {4, 0, 1};
  AllgatherPlan p = plan_allgather(r, 3);
  EXPECT_EQ(p.bytes, V({48, 0, 12}));
  EXPECT_EQ(p.output_shape, V({5, 3, 2}));
  EXPECT_EQ(p.output_bytes, 60);
  EXPECT_EQ(p.output_bytes, sum(p.bytes));
}

TEST(OpPlan, AllgatherOfNothing) {
  Response r = response(OpType::kAllgather, {0}, DataType::kFloat64);
  r.first_dims = {0, 0};
  AllgatherPlan p = plan_allgather(r, 2);
  EXPECT_EQ(p.bytes, V({0, 0}));
  EXPECT_EQ(p.output_shape, V({0}));
  EXPECT_EQ(p.output_bytes, 0);
}

TEST(OpPlan, AlltoallOneRankKeepsItsRows) {
  Response r = response(OpType::kAlltoall, {6, 2}, DataType::kInt32);
  r.splits = {6};
  AlltoallPlan p = plan_alltoall(r, 0, 1);
  EXPECT_EQ(p.send_bytes, V({48}));
  EXPECT_EQ(p.recv_bytes, V({48}));
  EXPECT_EQ(p.received_splits, V({6}));
  EXPECT_EQ(p.output_shape, V({6, 2}));
  EXPECT_EQ(p.output_bytes, 48);
}

TEST(OpPlan, AlltoallUnevenSplitsOverThreeRanks) {
  // Row s: what rank s sends to ranks 0, 1, 2. Rank 1 sends nothing; rank 2 gets nothing.
  Response r = response(OpType::kAlltoall, {3, 5}, DataType::kFloat32);  // 20-byte rows
  r.splits = {1, 2, 0,                                                   //
              0, 0, 0,                                                   //
              3, 4, 0};                                                  //
  const V expect_received[3] = {{1, 0, 3}, {2, 0, 4}, {0, 0, 0}};
  const V expect_send[3] = {{20, 40, 0}, {0, 0, 0}, {60, 80, 0}};
  for (int me = 0; me < 3; ++me) {
    AlltoallPlan p = plan_alltoall(r, me, 3);
    EXPECT_EQ(p.received_splits, expect_received[me]) << "rank " << me;
    EXPECT_EQ(p.send_bytes, expect_send[me]) << "rank " << me;
    V recv;
    for (int64_t rows : expect_received[me]) recv.push_back(rows * 20);
    EXPECT_EQ(p.recv_bytes, recv) << "rank " << me;
    EXPECT_EQ(p.output_shape, V({sum(expect_received[me]), 5})) << "rank " << me;
    EXPECT_EQ(p.output_bytes, sum(p.recv_bytes)) << "rank " << me;
  }
}

TEST(OpPlan, AlltoallSendsMatchReceivesOnEveryPair) {
  // Every rank's view of one exchange must line up: what s sends to d is what d expects
  // from s, for odd and even sizes.
  for (int n = 1; n <= 5; ++n) {
    Response r = response(OpType::kAlltoall, {0, 3}, DataType::kBFloat16);
    for (int s = 0; s < n; ++s) {
      for (int d = 0; d < n; ++d) r.splits.push_back((s * 7 + d * 3) % 4);
    }
    std::vector<AlltoallPlan> plans;
    for (int me = 0; me < n; ++me) plans.push_back(plan_alltoall(r, me, n));
    for (int s = 0; s < n; ++s) {
      for (int d = 0; d < n; ++d) {
        EXPECT_EQ(plans[s].send_bytes[d], plans[d].recv_bytes[s])
            << n << " ranks, " << s << "->" << d;
      }
    }
  }
}

TEST(OpPlan, ReducescatterRows) {
  // 7 rows over 3 ranks: 3, 2, 2; fewer rows than ranks: the last ranks get none.
  EXPECT_EQ(reducescatter_rows(7, 0, 3), 3);
  EXPECT_EQ(reducescatter_rows(7, 1, 3), 2);
  EXPECT_EQ(reducescatter_rows(7, 2, 3), 2);
  EXPECT_EQ(reducescatter_rows(2, 0, 3), 1);
  EXPECT_EQ(reducescatter_rows(2, 1, 3), 1);
  EXPECT_EQ(reducescatter_rows(2, 2, 3), 0);
  EXPECT_EQ(reducescatter_rows(0, 0, 4), 0);
  EXPECT_EQ(reducescatter_rows(9, 0, 1), 9);
  for (int n = 1; n <= 6; ++n) {
    for (int64_t rows = 0; rows <= 13; ++rows) {
      int64_t total = 0;
      for (int i = 0; i < n; ++i) {
        const int64_t mine = reducescatter_rows(rows, i, n);
        total += mine;
        if (i > 0) {
          // Earlier ranks get at least as many rows, and at most one more.
          EXPECT_LE(mine, reducescatter_rows(rows, i - 1, n));
          EXPECT_GE(mine + 1, reducescatter_rows(rows, 0, n));
        }
      }
      EXPECT_EQ(total, rows) << rows << " rows over " << n;
    }
  }
}

TEST(OpPlan, ReducescatterCountsAndShapes) {
  Response r = response(OpType::kReducescatter, {5, 2, 3});  // 6 elements a row
  for (int me = 0; me < 3; ++me) {
    ReducescatterPlan p = plan_reducescatter(r, me, 3);
    EXPECT_EQ(p.counts, V({12, 12, 6}));
    EXPECT_EQ(p.output_elements, p.counts[me]);
    EXPECT_EQ(p.output_shape, V({me < 2 ? 2 : 1, 2, 3}));
  }
  ReducescatterPlan one = plan_reducescatter(r, 0, 1);
  EXPECT_EQ(one.counts, V({30}));
  EXPECT_EQ(one.output_shape, V({5, 2, 3}));
}

TEST(OpPlan, ReducescatterWithFewerRowsThanRanks) {
  Response r = response(OpType::kReducescatter, {1}, DataType::kInt64);
  ReducescatterPlan last = plan_reducescatter(r, 3, 4);
  EXPECT_EQ(last.counts, V({1, 0, 0, 0}));
  EXPECT_EQ(last.output_shape, V({0}));
  EXPECT_EQ(last.output_elements, 0);
  Response empty = response(OpType::kReducescatter, {0, 4});
  ReducescatterPlan none = plan_reducescatter(empty, 1, 2);
  EXPECT_EQ(none.counts, V({0, 0}));
  EXPECT_EQ(none.output_shape, V({0, 4}));
}

std::vector<const Response*> pointers(const std::vector<Response>& rs) {
  std::vector<const Response*> out;
  for (const Response& r : rs) out.push_back(&r);
  return out;
}

TEST(OpPlan, FusedAllreducePackedOnTheHost) {
  // Three float32 tensors of 3, 0 and 5 elements, packed at element alignment.
  std::vector<Response> rs = {response(OpType::kAllreduce, {3}), response(OpType::kAllreduce, {0}),
                              response(OpType::kAllreduce, {5, 1})};
  FusionLayout l = plan_fused_allreduce(pointers(rs), 4, 1 << 20);
  EXPECT_EQ(l.offsets, (std::vector<std::size_t>{0, 12, 12}));
  EXPECT_EQ(l.bytes, 32u);
}

TEST(OpPlan, FusedAllreduceAlignedWhenThePaddingFits) {
  // float32 tensors of 3, 5 and 1 elements (12, 20, 4 bytes) on 16-byte slots.
  std::vector<Response> rs = {response(OpType::kAllreduce, {3}), response(OpType::kAllreduce, {5}),
                              response(OpType::kAllreduce, {1})};
  FusionLayout l = plan_fused_allreduce(pointers(rs), 16, 52);
  EXPECT_EQ(l.offsets, (std::vector<std::size_t>{0, 16, 48}));
  EXPECT_EQ(l.bytes, 52u);
  // One byte short of the padded size: packed instead, which still fits.
  l = plan_fused_allreduce(pointers(rs), 16, 51);
  EXPECT_EQ(l.offsets, (std::vector<std::size_t>{0, 12, 32}));
  EXPECT_EQ(l.bytes, 36u);
}

TEST(OpPlan, FusedAllreduceAlignmentNotAboveTheElementIsPacked) {
  // float64 on 8 bytes and float16 on 2: nothing to pad.
  std::vector<Response> wide = {response(OpType::kAllreduce, {3}, DataType::kFloat64),
                                response(OpType::kAllreduce, {1}, DataType::kFloat64)};
  FusionLayout l = plan_fused_allreduce(pointers(wide), 8, 1024);
  EXPECT_EQ(l.offsets, (std::vector<std::size_t>{0, 24}));
  EXPECT_EQ(l.bytes, 32u);
  std::vector<Response> half = {response(OpType::kAllreduce, {3}, DataType::kFloat16),
                                response(OpType::kAllreduce, {3}, DataType::kFloat16)};
  l = plan_fused_allreduce(pointers(half), 2, 1024);
  EXPECT_EQ(l.offsets, (std::vector<std::size_t>{0, 6}));
  EXPECT_EQ(l.bytes, 12u);
}

TEST(OpPlan, FusedAllreduceOfHalfFloatsPadsTo16Bytes) {
  // Three float16 (6 bytes) then the next slot on 16; the last slot is not padded.
  std::vector<Response> half = {response(OpType::kAllreduce, {3}, DataType::kFloat16),
                                response(OpType::kAllreduce, {3}, DataType::kFloat16)};
  FusionLayout l = plan_fused_allreduce(pointers(half), 16, 1024);
  EXPECT_EQ(l.offsets, (std::vector<std::size_t>{0, 16}));
  EXPECT_EQ(l.bytes, 22u);
}

TEST(OpPlan, FusedAllreduceOfNothing) {
  FusionLayout l = plan_fused_allreduce({}, 16, 1024);
  EXPECT_TRUE(l.offsets.empty());
  EXPECT_EQ(l.bytes, 0u);
  std::vector<Response> zero = {response(OpType::kAllreduce, {0}),
                                response(OpType::kAllreduce, {0, 7})};
  l = plan_fused_allreduce(pointers(zero), 16, 0);
  EXPECT_EQ(l.offsets, (std::vector<std::size_t>{0, 0}));
  EXPECT_EQ(l.bytes, 0u);
}

}  // namespace
}  // namespace chorus
