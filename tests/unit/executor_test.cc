// The executor alone, over a recording fake backend (tests/common/recording_backend.h): rank
// 0 of 3, whose peers send what it sends. Checks what the executor asks of the backend (one
// call per fused batch, the sizes) and what it gives each entry (results, scaling, a
// joined rank's zeros, outputs it allocates, failures), without MPI or other processes.

#include "core/executor.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/recording_backend.h"

namespace chorus {
namespace {

using testing::RecordingBackend;

constexpr int kRanks = 3;

// This rank's tensors and entries, by name, and the responses the ranks agreed on.
struct Round {
  std::map<std::string, std::vector<float>> data;
  EntryTable entries;
  std::vector<std::shared_ptr<const Response>> responses;
  std::map<std::string, Status> finished;

  // An allreduce of `values`; `mine` false: this rank has no tensor (it joined).
  Response& allreduce(const std::string& name, std::vector<float> values, bool mine = true) {
    auto r = std::make_shared<Response>();
    r->op = OpType::kAllreduce;
    r->name = name;
    r->dtype = DataType::kFloat32;
    r->reduce_op = ReduceOp::kSum;
    r->shape = {static_cast<int64_t>(values.size())};
    if (mine) {
      std::vector<float>& d = data[name] = std::move(values);
      Entry e;
      e.request.op = OpType::kAllreduce;
      e.request.name = name;
      e.input.data = e.output.data = d.data();
      e.handle = std::make_shared<detail::HandleState>(1);
      entries.insert(e);
    }
    responses.push_back(r);
    return *r;
  }

  Status run(Executor& ex) {
    return ex.execute(responses, entries, Executor::Clock::now(), [&](Entry& e, const Status& s) {
      EXPECT_EQ(finished.count(e.request.name), 0u) << e.request.name;
      finished[e.request.name] = s;
    });
  }
};

TEST(ExecutorTest, FusesAllreducesIntoOneBackendCall) {
  RecordingBackend be(0, kRanks);
  Executor ex(BackendChoice("test", &be, "the test's backend"), 1 << 20, nullptr);
  Round round;
  round.allreduce("a", {1, 2, 3, 4});
  round.allreduce("b", {0.5f, -1});
  round.allreduce("c", {7, 8, 9});
  ASSERT_TRUE(round.run(ex).ok());
  ASSERT_EQ(be.calls().size(), 1u) << "one fused batch, one call";
  EXPECT_EQ(be.calls()[0].op, "allreduce");
  EXPECT_EQ(be.calls()[0].count, 9);
  EXPECT_EQ(round.data["a"], (std::vector<float>{3, 6, 9, 12}));
  EXPECT_EQ(round.data["b"], (std::vector<float>{1.5f, -3}));
  EXPECT_EQ(round.data["c"], (std::vector<float>{21, 24, 27}));
  ASSERT_EQ(round.finished.size(), 3u);
  for (auto& [name, s] : round.finished) EXPECT_TRUE(s.ok()) << name << ": " << s.to_string();
}

TEST(ExecutorTest, WithoutFusionEachTensorIsOneCall) {
  RecordingBackend be(0, kRanks);
  Executor ex(BackendChoice("test", &be, "the test's backend"), 0, nullptr);
  Round round;
  round.allreduce("a", {1, 2});
  round.allreduce("b", {3});
  ASSERT_TRUE(round.run(ex).ok());
  ASSERT_EQ(be.calls().size(), 2u);
  EXPECT_EQ(be.calls()[0].count, 2);
  EXPECT_EQ(be.calls()[1].count, 1);
  EXPECT_EQ(round.data["b"], (std::vector<float>{9}));
}

TEST(ExecutorTest, DifferentScalingIsNotFused) {
  RecordingBackend be(0, kRanks);
  Executor ex(BackendChoice("test", &be, "the test's backend"), 1 << 20, nullptr);
  Round round;
  round.allreduce("plain", {1, 2});
  Response& avg = round.allreduce("scaled", {3, 6});
  avg.reduce_op = ReduceOp::kAverage;
  avg.prescale = 2;
  avg.postscale = 0.5;
  ASSERT_TRUE(round.run(ex).ok());
  EXPECT_EQ(be.calls().size(), 2u);
  EXPECT_EQ(round.data["plain"], (std::vector<float>{3, 6}));
  // Average of three equal contributions, times 2, then times 0.5: the input back.
  EXPECT_EQ(round.data["scaled"], (std::vector<float>{3, 6}));
}

TEST(ExecutorTest, AJoinedRankContributesZerosAndFinishesNothing) {
  RecordingBackend be(0, kRanks);
  Executor ex(BackendChoice("test", &be, "the test's backend"), 1 << 20, nullptr);
  Round round;
  round.allreduce("mine", {1, 1});
  round.allreduce("theirs", {5, 5, 5}, /*mine=*/false);
  ASSERT_TRUE(round.run(ex).ok());
  ASSERT_EQ(be.calls().size(), 1u);
  EXPECT_EQ(be.calls()[0].count, 5) << "the joined tensor's elements still go to the peers";
  EXPECT_EQ(round.data["mine"], (std::vector<float>{3, 3}));
  EXPECT_EQ(round.finished.count("theirs"), 0u);
}

TEST(ExecutorTest, ABackendFailureFailsTheBatchAndIsReturned) {
  RecordingBackend be(0, kRanks);
  Executor ex(BackendChoice("test", &be, "the test's backend"), 1 << 20, nullptr);
  be.fail_next(Status(StatusCode::kInternal, "the wire broke"));
  Round round;
  round.allreduce("a", {1});
  round.allreduce("b", {2});
  const Status s = round.run(ex);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  ASSERT_EQ(round.finished.size(), 2u);
  for (auto& [name, st] : round.finished) {
    EXPECT_NE(st.message().find("the wire broke"), std::string::npos) << name;
  }
}

TEST(ExecutorTest, AllgatherAllocatesTheOutputAndPlacesThisRanksRows) {
  RecordingBackend be(0, kRanks);
  Executor ex(BackendChoice("test", &be, "the test's backend"), 1 << 20, nullptr);
  Round round;
  std::vector<float> rows = {1, 2};  // one row of two floats
  auto r = std::make_shared<Response>();
  r->op = OpType::kAllgather;
  r->name = "g";
  r->dtype = DataType::kFloat32;
  r->shape = {1, 2};
  r->first_dims = {1, 2, 3};
  Entry e;
  e.request.op = OpType::kAllgather;
  e.request.name = "g";
  e.input.data = rows.data();
  e.handle = std::make_shared<detail::HandleState>(1);
  Entry* in_table = round.entries.insert(e);
  std::shared_ptr<detail::HandleState> handle = in_table->handle;
  round.responses.push_back(r);
  ASSERT_TRUE(round.run(ex).ok());
  ASSERT_EQ(be.calls().size(), 1u);
  EXPECT_EQ(be.calls()[0].op, "allgatherv");
  EXPECT_EQ(be.calls()[0].sizes, (std::vector<int64_t>{8, 16, 24}));
  ASSERT_EQ(handle->outputs.size(), 1u);
  const TensorRef& out = handle->outputs[0];
  EXPECT_EQ(out.shape, (std::vector<int64_t>{6, 2}));
  const auto* got = static_cast<const float*>(out.data);
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 2);
  EXPECT_TRUE(round.finished["g"].ok());
}

}  // namespace
}  // namespace chorus
