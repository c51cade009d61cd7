// agree_on_success over the recording backend (common/recording_backend.h), whose allgather
// gives the other ranks' bytes from a fixed table: the local rank's result decides its own
// Status, the others' bytes decide whether it fails too, and a failed exchange is passed on.

#include "collectives/gpu_agree.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/recording_backend.h"

namespace chorus {
namespace {

using testing::RecordingBackend;

// Rank `rank` of a set whose other ranks report `others[r]` (1: succeeded) in the exchange.
struct FakeHost {
  FakeHost(int rank, std::vector<char> others) : backend(rank, static_cast<int>(others.size())) {
    backend.set_peer([others](int r, void* block, int64_t bytes) {
      EXPECT_EQ(bytes, 1);
      *static_cast<char*>(block) = others[static_cast<std::size_t>(r)];
    });
  }
  // The exchanges so far, each with one byte per rank.
  int calls() const {
    for (const RecordingBackend::Call& c : backend.calls()) {
      EXPECT_EQ(c.op, "allgatherv");
      EXPECT_EQ(c.sizes, std::vector<int64_t>(c.sizes.size(), 1));
    }
    return static_cast<int>(backend.calls().size());
  }
  RecordingBackend backend;
};

TEST(AgreeOnSuccess, OkWhenEveryRankSucceeded) {
  FakeHost host(1, {1, 1, 1});
  EXPECT_TRUE(agree_on_success(host.backend, Status(), "step").ok());
  EXPECT_EQ(host.calls(), 1);
}

TEST(AgreeOnSuccess, EveryRankFailsWhenOneDid) {
  FakeHost host(0, {1, 0, 1, 0});
  Status s = agree_on_success(host.backend, Status(), "ncclCommInitRank");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ncclCommInitRank"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank(s) 1, 3"), std::string::npos) << s.message();
}

TEST(AgreeOnSuccess, TheFailedRankKeepsItsOwnStatusButStillExchanges) {
  FakeHost host(2, {1, 1, 1});
  Status s = agree_on_success(host.backend, invalid_argument("cudaSetDevice failed"), "step");
  EXPECT_EQ(host.calls(), 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "cudaSetDevice failed");
}

TEST(AgreeOnSuccess, AFailedExchangeIsReturned) {
  FakeHost host(0, {1, 1});
  host.backend.fail_next(internal_error("MPI_Allgatherv failed"));
  Status s = agree_on_success(host.backend, Status(), "step");
  EXPECT_NE(s.message().find("MPI_Allgatherv"), std::string::npos);
}

}  // namespace
}  // namespace chorus
