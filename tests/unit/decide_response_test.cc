// Unit tests of decide_response (src/core/coordinator.h): the per-op agreement rules that
// turn every rank's request for one name into one response, or into an error naming the
// ranks and values that disagree. The Coordinator state machine is in coordinator_test.cc.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "common/assertions.h"
#include "common/requests.h"
#include "core/coordinator.h"
#include "protocol/message.h"

namespace chorus::testing {
namespace {

// The same request on each of n ranks (rank field set).
std::vector<std::optional<Request>> everywhere(const Request& q, int n) {
  std::vector<std::optional<Request>> v;
  for (int r = 0; r < n; ++r) {
    v.push_back(q);
    v.back()->rank = r;
  }
  return v;
}

TEST(DecideResponseTest, AgreeingAllreduceCopiesTheRequest) {
  Request q = allreduce("grad.w", {3, 5}, DataType::kBFloat16);
  q.reduce_op = ReduceOp::kAverage;
  q.prescale = 0.5;
  q.postscale = 4.0;
  q.device = Device::cuda(2);
  Response r = decide_response("grad.w", everywhere(q, 3));
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.op, OpType::kAllreduce);
  EXPECT_EQ(r.name, "grad.w");
  EXPECT_EQ(r.dtype, DataType::kBFloat16);
  EXPECT_EQ(r.reduce_op, ReduceOp::kAverage);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(r.prescale, 0.5);
  EXPECT_EQ(r.postscale, 4.0);
  EXPECT_EQ(r.device, Device::cuda(2));
}

TEST(DecideResponseTest, DtypeMismatchNamesRanksAndValues) {
  auto by_rank = everywhere(allreduce("w"), 3);
  by_rank[2]->dtype = DataType::kFloat64;
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  EXPECT_EQ(r.name, "w");
  EXPECT_EQ(r.op, OpType::kAllreduce);
  expect_message_has(r, {"'w'", "dtype", "float32", "float64", "[0, 1]", "[2]"});
}

// A rank built otherwise may send values this build does not know: the collective fails on
// every rank with a response every rank can decode, and the coordinator goes on.
TEST(DecideResponseTest, UnknownEnumFailsTheCollectiveNamingTheRank) {
  struct Case {
    void (*spoil)(Request&);
    const char* says;
  };
  const Case cases[] = {
      {[](Request& q) { q.reduce_op = static_cast<ReduceOp>(9); }, "reduce op 9"},
      {[](Request& q) { q.dtype = static_cast<DataType>(200); }, "dtype 200"},
      {[](Request& q) { q.op = static_cast<OpType>(77); }, "operation 77"},
      {[](Request& q) { q.device.kind = static_cast<Device::Kind>(5); }, "device kind 5"},
  };
  for (const Case& c : cases) {
    auto by_rank = everywhere(allreduce("w"), 3);
    c.spoil(*by_rank[1]);
    Response r = decide_response("w", by_rank);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument) << c.says;
    EXPECT_EQ(r.name, "w");
    EXPECT_EQ(r.op, OpType::kAllreduce);
    expect_message_has(r, {"rank 1", c.says, "not one this build of Chorus knows"});
  }
}

TEST(DecideResponseTest, ShapeBeyondMemoryFails) {
  auto by_rank = everywhere(allreduce("w", {int64_t{1} << 32, int64_t{1} << 32}), 2);
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  expect_message_has(r, {"rank 0", "[4294967296,4294967296]", "2^62 bytes"});
}

TEST(DecideResponseTest, DtypeMismatchOnRankZero) {
  auto by_rank = everywhere(allreduce("w"), 4);
  by_rank[0]->dtype = DataType::kInt32;
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"int32 on ranks [0]", "float32 on ranks [1, 2, 3]"});
}

TEST(DecideResponseTest, ShapeMismatch) {
  auto by_rank = everywhere(allreduce("w", {4, 3}), 3);
  by_rank[1]->shape = {4};
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"shape", "[4,3] on ranks [0, 2]", "[4] on ranks [1]"});
}

TEST(DecideResponseTest, ReduceOpMismatch) {
  auto by_rank = everywhere(allreduce("w"), 2);
  by_rank[1]->reduce_op = ReduceOp::kMax;
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"reduce op", "sum", "max", "[0]", "[1]"});
}

TEST(DecideResponseTest, PrescaleMismatch) {
  auto by_rank = everywhere(allreduce("w"), 3);
  by_rank[0]->prescale = 0.25;
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"prescale", "0.25 on ranks [0]", "1 on ranks [1, 2]"});
}

TEST(DecideResponseTest, PostscaleMismatch) {
  auto by_rank = everywhere(allreduce("w"), 3);
  by_rank[2]->postscale = 3.5;
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"postscale", "3.5 on ranks [2]", "[0, 1]"});
}

TEST(DecideResponseTest, TinyScaleDifferenceIsStillAMismatch) {
  auto by_rank = everywhere(allreduce("w"), 2);
  by_rank[1]->prescale = 1.0 + 1e-15;
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch) << "values that differ must not print alike";
}

TEST(DecideResponseTest, OperationMismatch) {
  auto by_rank = everywhere(allreduce("w"), 3);
  by_rank[1]->op = OpType::kAllgather;
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"operation", "allreduce on ranks [0, 2]", "allgather on ranks [1]"});
}

TEST(DecideResponseTest, DeviceTypeMismatch) {
  auto by_rank = everywhere(allreduce("w"), 2);
  by_rank[1]->device = Device::cuda(0);
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"cpu on ranks [0]", "cuda on ranks [1]"});
}

TEST(DecideResponseTest, GroupMismatch) {
  auto by_rank = everywhere(grouped("w", "g", 2, 0), 3);
  by_rank[1] = allreduce("w");
  by_rank[1]->rank = 1;
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"group", "g of 2 on ranks [0, 2]", "none on ranks [1]"});
}

TEST(DecideResponseTest, GroupSizeMismatch) {
  auto by_rank = everywhere(grouped("w", "g", 2, 0), 2);
  by_rank[1]->group_size = 3;
  Response r = decide_response("w", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"g of 2 on ranks [0]", "g of 3 on ranks [1]"});
}

TEST(DecideResponseTest, BroadcastRootMismatch) {
  auto by_rank = everywhere(with_op(allreduce("b"), OpType::kBroadcast), 3);
  for (auto& q : by_rank) q->root = 0;
  by_rank[2]->root = 1;
  Response r = decide_response("b", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"broadcast 'b'", "root rank", "0 on ranks [0, 1]", "1 on ranks [2]"});
}

TEST(DecideResponseTest, BroadcastRootOutOfRange) {
  for (int root : {3, -1, 100}) {
    auto by_rank = everywhere(with_op(allreduce("b"), OpType::kBroadcast), 3);
    for (auto& q : by_rank) q->root = root;
    Response r = decide_response("b", by_rank);
    EXPECT_EQ(r.status.code(), StatusCode::kMismatch) << "root " << root;
    expect_message_has(r, {"root rank " + std::to_string(root), "3 ranks"});
  }
}

TEST(DecideResponseTest, BroadcastGood) {
  auto by_rank = everywhere(with_op(allreduce("b", {2, 2}), OpType::kBroadcast), 3);
  for (auto& q : by_rank) q->root = 2;
  Response r = decide_response("b", by_rank);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.op, OpType::kBroadcast);
  EXPECT_EQ(r.root, 2);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 2}));
}

TEST(DecideResponseTest, AllgatherFirstDimsPerRank) {
  auto by_rank = everywhere(with_op(allreduce("g", {0, 3}), OpType::kAllgather), 4);
  for (int r = 0; r < 4; ++r) by_rank[r]->shape = {int64_t{10} * r + 1, 3};
  Response r = decide_response("g", by_rank);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.op, OpType::kAllgather);
  EXPECT_EQ(r.first_dims, (std::vector<int64_t>{1, 11, 21, 31}));
}

TEST(DecideResponseTest, AllgatherTrailingDimMismatch) {
  auto by_rank = everywhere(with_op(allreduce("g", {2, 3}), OpType::kAllgather), 3);
  by_rank[1]->shape = {5, 4};
  Response r = decide_response("g", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"allgather 'g'", "[3] on ranks [0, 2]", "[4] on ranks [1]"});
}

TEST(DecideResponseTest, AllgatherRankMismatch) {
  auto by_rank = everywhere(with_op(allreduce("g", {2, 3}), OpType::kAllgather), 2);
  by_rank[1]->shape = {2, 3, 1};
  Response r = decide_response("g", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"[0]", "[1]"});
}

TEST(DecideResponseTest, AllgatherOfScalarFails) {
  auto by_rank = everywhere(with_op(allreduce("g", {}), OpType::kAllgather), 2);
  Response r = decide_response("g", by_rank);
  EXPECT_FALSE(r.status.ok());
}

TEST(DecideResponseTest, AlltoallSplitMatrixRowIsSender) {
  const int n = 3;
  auto by_rank = everywhere(with_op(allreduce("a", {0, 2}), OpType::kAlltoall), n);
  // Rank r sends (r + c) rows to rank c.
  for (int r = 0; r < n; ++r) {
    by_rank[r]->splits.clear();
    int64_t rows = 0;
    for (int c = 0; c < n; ++c) {
      by_rank[r]->splits.push_back(r * 10 + c);
      rows += r * 10 + c;
    }
    by_rank[r]->shape = {rows, 2};
  }
  Response r = decide_response("a", by_rank);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_EQ(r.splits.size(), static_cast<std::size_t>(n * n));
  for (int s = 0; s < n; ++s) {
    for (int c = 0; c < n; ++c) {
      EXPECT_EQ(r.splits[s * n + c], s * 10 + c) << "sender " << s << " receiver " << c;
    }
  }
}

TEST(DecideResponseTest, AlltoallWrongSplitCount) {
  const int n = 3;
  auto by_rank = everywhere(with_op(allreduce("a", {3, 2}), OpType::kAlltoall), n);
  for (auto& q : by_rank) q->splits = {1, 1, 1};
  by_rank[1]->splits = {1, 2};
  by_rank[1]->shape = {3, 2};
  Response r = decide_response("a", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"alltoall 'a'", "rank 1", "2 splits", "3 ranks"});
}

TEST(DecideResponseTest, AlltoallTrailingDimMismatch) {
  auto by_rank = everywhere(with_op(allreduce("a", {2, 2}), OpType::kAlltoall), 2);
  for (auto& q : by_rank) q->splits = {1, 1};
  by_rank[0]->shape = {2, 5};
  Response r = decide_response("a", by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"[5] on ranks [0]", "[2] on ranks [1]"});
}

TEST(DecideResponseTest, ReducescatterShapeAndReduction) {
  auto by_rank = everywhere(with_op(allreduce("rs", {6, 2}), OpType::kReducescatter), 3);
  Response ok = decide_response("rs", by_rank);
  ASSERT_TRUE(ok.status.ok()) << ok.status.to_string();
  EXPECT_EQ(ok.op, OpType::kReducescatter);

  auto bad = by_rank;
  bad[2]->shape = {7, 2};
  EXPECT_EQ(decide_response("rs", bad).status.code(), StatusCode::kMismatch);
  bad = by_rank;
  bad[0]->reduce_op = ReduceOp::kMin;
  Response r = decide_response("rs", bad);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"min on ranks [0]"});
}

TEST(DecideResponseTest, AddProcessSetAgreesOnRanks) {
  Request q;
  q.op = OpType::kAddProcessSet;
  q.name = "chorus.add_process_set";
  q.ranks = {0, 2};
  auto by_rank = everywhere(q, 3);
  Response r = decide_response(q.name, by_rank);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.ranks, (std::vector<int32_t>{0, 2}));

  by_rank[1]->ranks = {0, 1};
  r = decide_response(q.name, by_rank);
  EXPECT_EQ(r.status.code(), StatusCode::kMismatch);
  expect_message_has(r, {"[0, 2] on ranks [0, 2]", "[0, 1] on ranks [1]"});
}

TEST(DecideResponseTest, RemoveProcessSetAgreesOnTarget) {
  Request q;
  q.op = OpType::kRemoveProcessSet;
  q.name = "chorus.remove_process_set";
  q.target_set = 4;
  auto by_rank = everywhere(q, 2);
  Response r = decide_response(q.name, by_rank);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.target_set, 4);
  EXPECT_TRUE(r.ranks.empty());
  by_rank[0]->target_set = 5;
  EXPECT_EQ(decide_response(q.name, by_rank).status.code(), StatusCode::kMismatch);
}

TEST(DecideResponseTest, AllreduceWithJoinedRanks) {
  auto by_rank = everywhere(allreduce("w"), 4);
  by_rank[1].reset();
  by_rank[3].reset();
  Response r = decide_response("w", by_rank);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
}

TEST(DecideResponseTest, NonAllreduceWithJoinedRanksFails) {
  for (OpType op : {OpType::kAllgather, OpType::kBroadcast, OpType::kReducescatter,
                    OpType::kAlltoall, OpType::kBarrier}) {
    auto by_rank = everywhere(with_op(allreduce("x", {2}), op), 3);
    for (auto& q : by_rank) {
      q->root = 0;
      q->splits = {1, 1, 0};
    }
    by_rank[2].reset();
    Response r = decide_response("x", by_rank);
    EXPECT_EQ(r.status.code(), StatusCode::kFailedPrecondition) << op_type_name(op);
    expect_message_has(r, {op_type_name(op), "[2]", "joined"});
  }
}

TEST(DecideResponseTest, NoRequestAtAll) {
  std::vector<std::optional<Request>> none(3);
  EXPECT_FALSE(decide_response("ghost", none).status.ok());
}

}  // namespace
}  // namespace chorus::testing
