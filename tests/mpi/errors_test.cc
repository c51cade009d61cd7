// Ranks that disagree fail on every rank, with a message naming the ranks and the values;
// nothing hangs, and the runtime keeps working afterwards. Needs two ranks or more to
// disagree; on one rank the tests report themselves skipped.
#include <gtest/gtest.h>

#include "chorus/chorus.h"
#include "test_data.h"

namespace chorus::testing {
namespace {

#define NEEDS_TWO_RANKS() \
  if (size() < 2) GTEST_SKIP() << "a mismatch needs at least two ranks"

// Every rank must see the failure, with each fragment in the message.
void expect_failure(Handle h, StatusCode code, const std::vector<std::string>& fragments) {
  Status s = h.wait(std::chrono::seconds(60));
  ASSERT_NE(s.code(), StatusCode::kTimedOut) << "hung instead of failing";
  EXPECT_EQ(s.code(), code) << s.to_string();
  for (const std::string& f : fragments) {
    EXPECT_NE(s.message().find(f), std::string::npos) << "'" << f << "' not in: " << s.message();
  }
}

void expect_healthy() {
  Buffer b(DataType::kInt32, {3});
  for (int i = 0; i < 3; ++i) b.set(i, 1);
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  ASSERT_TRUE(allreduce("", b.ref(), b.ref(), o).wait().ok());
  EXPECT_EQ(b.at(2), size());
}

TEST(Mismatch, Dtype) {
  NEEDS_TWO_RANKS();
  Buffer b(rank() == 0 ? DataType::kFloat32 : DataType::kFloat64, {8});
  expect_failure(allreduce("m.dtype", b.ref(), b.ref()), StatusCode::kMismatch,
                 {"m.dtype", "dtype", "float32 on ranks [0]", "float64 on ranks [1"});
  expect_healthy();
}

TEST(Mismatch, Shape) {
  NEEDS_TWO_RANKS();
  Buffer b(DataType::kFloat32, {rank() == 1 ? 5 : 4});
  expect_failure(allreduce("m.shape", b.ref(), b.ref()), StatusCode::kMismatch,
                 {"shape", "[5] on ranks [1]", "[4] on ranks [0"});
  expect_healthy();
}

TEST(Mismatch, ReduceOp) {
  NEEDS_TWO_RANKS();
  Buffer b(DataType::kFloat32, {4});
  AllreduceOptions o;
  o.op = rank() == size() - 1 ? ReduceOp::kMax : ReduceOp::kSum;
  expect_failure(allreduce("m.op", b.ref(), b.ref(), o), StatusCode::kMismatch,
                 {"reduce op", "max on ranks [" + std::to_string(size() - 1) + "]", "sum"});
  expect_healthy();
}

TEST(Mismatch, ScaleFactors) {
  NEEDS_TWO_RANKS();
  Buffer b(DataType::kFloat32, {4});
  AllreduceOptions pre;
  pre.prescale = rank() == 0 ? 0.5 : 1.0;
  expect_failure(allreduce("m.prescale", b.ref(), b.ref(), pre), StatusCode::kMismatch,
                 {"prescale", "0.5 on ranks [0]"});
  AllreduceOptions post;
  post.postscale = rank() == 1 ? 3.0 : 1.0;
  expect_failure(allreduce("m.postscale", b.ref(), b.ref(), post), StatusCode::kMismatch,
                 {"postscale", "3 on ranks [1]"});
  expect_healthy();
}

TEST(Mismatch, OperationUnderOneName) {
  NEEDS_TWO_RANKS();
  Buffer b(DataType::kFloat32, {4});
  Handle h = rank() == 0 ? broadcast("m.kind", b.ref(), 0) : allreduce("m.kind", b.ref(), b.ref());
  expect_failure(h, StatusCode::kMismatch, {"operation", "broadcast on ranks [0]", "allreduce"});
  expect_healthy();
}

TEST(Mismatch, BroadcastRoot) {
  NEEDS_TWO_RANKS();
  Buffer b(DataType::kInt64, {2});
  expect_failure(broadcast("m.root", b.ref(), rank() == 0 ? 1 : 0), StatusCode::kMismatch,
                 {"root rank", "1 on ranks [0]"});
  // A root outside the set fails everywhere too, even when only one rank gives it.
  expect_failure(broadcast("m.root.range", b.ref(), rank() == 0 ? size() + 3 : 0),
                 StatusCode::kMismatch, {"root rank"});
  expect_healthy();
}

TEST(Mismatch, ReduceRootAndReduction) {
  NEEDS_TWO_RANKS();
  Buffer b(DataType::kFloat32, {6});
  expect_failure(reduce("m.reduce.root", b.ref(), b.ref(), rank() == 1 ? 0 : 1),
                 StatusCode::kMismatch, {"reduce 'm.reduce.root'", "root rank", "0 on ranks [1]"});
  ReduceOptions o;
  o.op = rank() == 0 ? ReduceOp::kMin : ReduceOp::kSum;
  expect_failure(reduce("m.reduce.op", b.ref(), b.ref(), 0, o), StatusCode::kMismatch,
                 {"reduce op", "min on ranks [0]"});
  expect_failure(reduce("m.reduce.range", b.ref(), b.ref(), -1), StatusCode::kMismatch,
                 {"root rank -1 is outside the set of " + std::to_string(size()) + " ranks"});
  expect_healthy();
}

TEST(Mismatch, AllgatherTrailingDims) {
  NEEDS_TWO_RANKS();
  Buffer b(DataType::kFloat32, {2, rank() == 0 ? 3 : 4});
  expect_failure(allgather("m.gather", b.ref()), StatusCode::kMismatch,
                 {"beyond the first dimension", "trailing dims [3] on ranks [0]"});
  expect_healthy();
}

TEST(Mismatch, AlltoallSplits) {
  NEEDS_TWO_RANKS();
  Buffer b(DataType::kFloat32, {4, 2});
  std::vector<int64_t> splits(size(), 0);
  splits[0] = rank() == 1 ? 3 : 4;  // rank 1's splits do not cover its 4 rows
  expect_failure(alltoall("m.splits", b.ref(), splits), StatusCode::kMismatch,
                 {"rank 1's splits add up to 3", "first dimension is 4"});
  std::vector<int64_t> wrong_count(rank() == 0 ? size() + 1 : size(), 0);
  wrong_count[0] = 4;
  expect_failure(alltoall("m.splits.count", b.ref(), wrong_count), StatusCode::kMismatch,
                 {"rank 0 gave " + std::to_string(size() + 1) + " splits"});
  expect_healthy();
}

TEST(Mismatch, ReducescatterShape) {
  NEEDS_TWO_RANKS();
  Buffer b(DataType::kFloat32, {rank() == 0 ? 6 : 7});
  expect_failure(reducescatter("m.rs", b.ref()), StatusCode::kMismatch,
                 {"shape", "[6] on ranks [0]"});
  expect_healthy();
}

TEST(Mismatch, GroupedMemberFailsTheWholeGroup) {
  NEEDS_TWO_RANKS();
  Buffer a(DataType::kFloat32, {4}), b(DataType::kFloat32, {rank() == 0 ? 2 : 3});
  Handle h = grouped_allreduce({"g.ok", "g.bad"}, {a.ref(), b.ref()}, {a.ref(), b.ref()});
  expect_failure(h, StatusCode::kMismatch, {"g.bad", "shape"});
  expect_healthy();
}

TEST(Mismatch, ShapeChangeOnOneRankAfterCaching) {
  NEEDS_TWO_RANKS();
  Buffer same(DataType::kFloat32, {4});
  for (int k = 0; k < 3; ++k)
    ASSERT_TRUE(allreduce("m.cached", same.ref(), same.ref()).wait().ok());
  Buffer b(DataType::kFloat32, {rank() == 0 ? 4 : 9});
  expect_failure(allreduce("m.cached", b.ref(), b.ref()), StatusCode::kMismatch,
                 {"shape", "[9] on ranks [1"});
  expect_healthy();
}

TEST(LocalErrors, NameTheTensorAndValue) {
  TensorRef bad{nullptr, DataType::kFloat32, {3}, Device::cpu()};
  Status s = allreduce("local.null", bad, bad).wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("local.null"), std::string::npos) << s.message();
  Buffer in(DataType::kFloat32, {3}), out(DataType::kFloat32, {4});
  s = allreduce("local.shape", in.ref(), out.ref()).wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("float32[4]"), std::string::npos) << s.message();
  s = reduce("local.reduce", in.ref(), out.ref(), 0).wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      s.message().find("reduce 'local.reduce': output float32[4] on cpu does not match input"),
      std::string::npos)
      << s.message();
  TensorRef gpu = in.ref();
  gpu.device = Device::cuda(0);
  s = allreduce("local.gpu", gpu, gpu).wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cuda:0"), std::string::npos) << s.message();
  expect_healthy();
}

}  // namespace
}  // namespace chorus::testing
