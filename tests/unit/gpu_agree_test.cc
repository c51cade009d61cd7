// agree_on_success over a fake host backend whose allgather returns a fixed table of the
// other ranks' bytes: the local rank's result decides its own Status, the others' bytes
// decide whether it fails too, and a failed exchange is passed on.

#include "collectives/gpu_agree.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace chorus {
namespace {

class FakeHost final : public Backend {
 public:
  FakeHost(int rank, std::vector<char> others) : rank_(rank), table_(std::move(others)) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(table_.size()); }
  Status allreduce(const void*, void*, int64_t, DataType, ReduceOp, kernels::Scale) override {
    return internal_error("unused");
  }
  Status reducescatter(const void*, void*, const std::vector<int64_t>&, DataType, ReduceOp,
                       kernels::Scale) override {
    return internal_error("unused");
  }
  Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) override {
    ++calls;
    if (fail) return internal_error("MPI_Allgatherv failed");
    EXPECT_EQ(bytes, std::vector<int64_t>(table_.size(), 1));
    std::vector<char> t = table_;
    t[static_cast<std::size_t>(rank_)] = *static_cast<const char*>(send);
    std::memcpy(recv, t.data(), t.size());
    return {};
  }
  Status broadcast(void*, int64_t, int) override { return internal_error("unused"); }
  Status alltoallv(const void*, const std::vector<int64_t>&, void*,
                   const std::vector<int64_t>&) override {
    return internal_error("unused");
  }
  Status barrier() override { return {}; }

  int calls = 0;
  bool fail = false;

 private:
  int rank_;
  std::vector<char> table_;
};

TEST(AgreeOnSuccess, OkWhenEveryRankSucceeded) {
  FakeHost host(1, {1, 1, 1});
  EXPECT_TRUE(agree_on_success(host, Status(), "step").ok());
  EXPECT_EQ(host.calls, 1);
}

TEST(AgreeOnSuccess, EveryRankFailsWhenOneDid) {
  FakeHost host(0, {1, 0, 1, 0});
  Status s = agree_on_success(host, Status(), "ncclCommInitRank");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ncclCommInitRank"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank(s) 1, 3"), std::string::npos) << s.message();
}

TEST(AgreeOnSuccess, TheFailedRankKeepsItsOwnStatusButStillExchanges) {
  FakeHost host(2, {1, 1, 1});
  Status s = agree_on_success(host, invalid_argument("cudaSetDevice failed"), "step");
  EXPECT_EQ(host.calls, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "cudaSetDevice failed");
}

TEST(AgreeOnSuccess, AFailedExchangeIsReturned) {
  FakeHost host(0, {1, 1});
  host.fail = true;
  Status s = agree_on_success(host, Status(), "step");
  EXPECT_NE(s.message().find("MPI_Allgatherv"), std::string::npos);
}

}  // namespace
}  // namespace chorus
