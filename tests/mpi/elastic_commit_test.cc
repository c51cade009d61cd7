// The elastic calls of include/chorus/elastic.h under mpirun with 1 to 4 ranks on one host:
// no commit anywhere is none on every rank; the node's first local rank alone stores; the
// newest whole commit comes back with the same bytes on every rank; a commit altered in the
// store gives way to the one before. Across hosts, where only some nodes hold the newest:
// the cluster tests (docs/elastic.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "chorus/chorus.h"
#include "chorus/elastic.h"

namespace chorus::testing {
namespace {

// A directory of this job's own, named after rank 0's pid, which every rank learns.
std::string job_dir(const std::string& what) {
  int64_t pid = rank() == 0 ? getpid() : 0;
  EXPECT_TRUE(broadcast("dir." + what, TensorRef{&pid, DataType::kInt64, {1}, {}}, 0).wait().ok());
  return "/tmp/chorus-elastic-test-" + std::to_string(pid) + "-" + what;
}

// 3 MB of bytes that differ with the commit, NULs included.
std::string state(uint64_t number) {
  std::string s(3 << 20, '\0');
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 131 + number) % 251);
  return s;
}

void cleanup(const std::string& dir) {
  ASSERT_TRUE(barrier().wait().ok());
  if (rank() == 0) std::filesystem::remove_all(dir);
}

TEST(ElasticCommit, NoCommitAnywhereIsNoneOnEveryRank) {
  const std::string dir = job_dir("none");
  StatusOr<std::optional<elastic::CommittedState>> got = elastic::newest_commit(dir);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_FALSE(got->has_value()) << "rank " << rank();
  cleanup(dir);
}

TEST(ElasticCommit, TheNewestCommitReachesEveryRankWhole) {
  const std::string dir = job_dir("newest");
  for (uint64_t n : {4, 9}) ASSERT_TRUE(elastic::store_commit(dir, n, state(n)).ok()) << n;
  // One copy per node: only the first local rank wrote (every rank here shares one host).
  ASSERT_TRUE(barrier().wait().ok());
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2) << "commits 4 and 9, written once on this host";
  StatusOr<std::optional<elastic::CommittedState>> got = elastic::newest_commit(dir);
  ASSERT_TRUE(got.ok() && *got) << got.status().to_string();
  EXPECT_EQ((*got)->number, 9u) << "rank " << rank();
  EXPECT_TRUE((*got)->bytes == state(9)) << "rank " << rank() << ": the bytes differ";
  const Status again = elastic::store_commit(dir, 9, "old");
  if (local_rank() == 0) {
    EXPECT_EQ(again.code(), StatusCode::kInvalidArgument) << "commit 9 again: " << again.message();
  } else {
    EXPECT_TRUE(again.ok()) << "a rank that stores nothing refuses nothing";
  }
  cleanup(dir);
}

TEST(ElasticCommit, AnAlteredCommitGivesWayToTheOneBefore) {
  const std::string dir = job_dir("altered");
  for (uint64_t n : {1, 2}) ASSERT_TRUE(elastic::store_commit(dir, n, state(n)).ok()) << n;
  ASSERT_TRUE(barrier().wait().ok());
  if (rank() == 0) {
    std::fstream f(dir + "/commit-00000000000000000002", std::ios::in | std::ios::out);
    ASSERT_TRUE(f.is_open());
    f.seekp(-1, std::ios::end);
    f.put('x');
  }
  ASSERT_TRUE(barrier().wait().ok());
  StatusOr<std::optional<elastic::CommittedState>> got = elastic::newest_commit(dir);
  ASSERT_TRUE(got.ok() && *got) << got.status().to_string();
  EXPECT_EQ((*got)->number, 1u) << "rank " << rank();
  EXPECT_TRUE((*got)->bytes == state(1)) << "rank " << rank();
  cleanup(dir);
}

}  // namespace
}  // namespace chorus::testing
