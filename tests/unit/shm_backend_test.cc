// ShmBackend between two processes of this test (a fork), without MPI: the reduction's bits,
// and a peer that exits mid-reduction failing the wait instead of hanging it.
#include "collectives/shm/shm_backend.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "transport/control_transport.h"

namespace chorus {
namespace {

// The default bound, for the tests whose peers are all here.
constexpr double kLiveness = 60;

// The "host" of a segment mapped by this process alone before it forks: the child inherits
// the mapping, so both processes share it.
class LoneHost final : public ControlTransport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status start_and(std::vector<uint64_t>*) override { return {}; }
  StatusOr<bool> test_and() override { return true; }
  StatusOr<std::vector<std::string>> gather(const std::string& mine) override {
    return std::vector<std::string>{mine};
  }
  Status broadcast(std::string*) override { return {}; }
};

SharedSegment two_rank_segment() {
  LoneHost host;
  SharedSegment segment;
  std::string why;
  Status s = segment.join(
      host, "reducer-test", ShmBackend::segment_bytes(2),
      [](void* p) { ShmBackend::init_segment(p, 2); }, &why);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(segment.mapped()) << why;
  return segment;
}

// Rank r's input: element i is r * 1000 + i, as float.
std::vector<float> input(int rank, int64_t count) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<float>(rank * 1000 + i % 997);
  return v;
}

// Several chunks at two ranks (128 KiB of each block per chunk), with a remainder.
constexpr int64_t kCount = 3 * 32768 * 2 + 11;

// Runs the allreduce as `rank` and returns whether every element is the sum of both inputs.
bool allreduce_as(SharedSegment segment, int rank) {
  ShmBackend reducer(std::move(segment), rank, 2, kLiveness);
  std::vector<float> data = input(rank, kCount);
  Status s =
      reducer.allreduce(data.data(), data.data(), kCount, DataType::kFloat32, ReduceOp::kSum, {});
  if (!s.ok()) return false;
  const std::vector<float> a = input(0, kCount), b = input(1, kCount);
  for (int64_t i = 0; i < kCount; ++i) {
    if (data[i] != a[i] + b[i]) return false;
  }
  return true;
}

// A provider of the two reductions alone, on every dtype, which a trainer thread may run:
// the set's BackendChoice gives it those and leaves the data movement to MPI.
TEST(ShmBackend, ServesTheReductionsAlone) {
  ShmBackend backend(two_rank_segment(), 0, 2, kLiveness);
  for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
    EXPECT_TRUE(backend.serves(Collective::kAllreduce, t));
    EXPECT_TRUE(backend.serves(Collective::kReducescatter, t));
  }
  for (Collective c : {Collective::kAllgather, Collective::kBroadcast, Collective::kAlltoall,
                       Collective::kBarrier}) {
    EXPECT_FALSE(backend.serves(c, DataType::kUInt8)) << collective_name(c);
  }
  EXPECT_TRUE(backend.allreduce_without_mpi());
  EXPECT_EQ(std::string("shared memory"), backend.name());
}

TEST(ShmBackend, TwoProcessesAllreduceInPlace) {
  SharedSegment segment = two_rank_segment();
  ASSERT_TRUE(segment.mapped());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(allreduce_as(std::move(segment), 1) ? 0 : 1);
  EXPECT_TRUE(allreduce_as(std::move(segment), 0)) << "rank 0's result or status is wrong";
  int status = 0;
  ASSERT_EQ(child, waitpid(child, &status, 0));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank 1's result is wrong";
}

TEST(ShmBackend, APeerThatExitedFailsTheWaitNamingIt) {
  SharedSegment segment = two_rank_segment();
  ASSERT_TRUE(segment.mapped());
  // Children reaped at once: an exited peer leaves no zombie that would still look alive.
  signal(SIGCHLD, SIG_IGN);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ShmBackend joined_then_left(std::move(segment), 1, 2, kLiveness);
    _exit(0);
  }
  // A set of the job's ranks 4 and 6: the message names them as the job does.
  ShmBackend reducer(std::move(segment), 0, 2, kLiveness, {4, 6});
  std::vector<float> data(1000, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  Status s =
      reducer.allreduce(data.data(), data.data(), 1000, DataType::kFloat32, ReduceOp::kSum, {});
  const auto waited = std::chrono::steady_clock::now() - start;
  signal(SIGCHLD, SIG_DFL);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
  EXPECT_NE(s.message().find("rank 6 (pid " + std::to_string(child)), std::string::npos)
      << s.to_string();
  EXPECT_NE(s.message().find("rank 4 was waiting for it"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("exited in the middle of a reduction"), std::string::npos)
      << s.to_string();
  EXPECT_LT(waited, std::chrono::seconds(10));
}

// A peer that joined and stays alive but never arrives (stopped, or gone from the call after
// its own part failed): the wait fails after the liveness bound, naming it, instead of
// waiting for it for ever.
TEST(ShmBackend, APeerAliveButAbsentFailsTheWaitAfterTheBound) {
  SharedSegment segment = two_rank_segment();
  ASSERT_TRUE(segment.mapped());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ShmBackend joined_then_idle(std::move(segment), 1, 2, kLiveness);
    pause();  // until killed
    _exit(0);
  }
  ShmBackend reducer(std::move(segment), 0, 2, /*liveness_seconds=*/1, {4, 6});
  std::vector<float> data(1000, 1.0f);
  Status s =
      reducer.allreduce(data.data(), data.data(), 1000, DataType::kFloat32, ReduceOp::kSum, {});
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
  EXPECT_NE(s.message().find("rank 4 stopped waiting"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("CHORUS_LIVENESS_SECONDS): ranks [6] took no part"), std::string::npos)
      << s.to_string();
}

}  // namespace
}  // namespace chorus
