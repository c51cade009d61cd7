// CommitStore (src/transport/commit_store.h) in a directory of its own: what a restarted
// elastic job reads back on a node is the newest whole commit, never a torn or foreign file.
#include "transport/commit_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace chorus {
namespace {

class CommitStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/chorus-commit-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The stored file of commit `number`.
  std::string file(uint64_t number) const {
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (name ==
          "commit-" + std::string(20 - std::to_string(number).size(), '0') + std::to_string(number))
        return e.path().string();
    }
    return "";
  }
  int files() const {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) n += e.is_regular_file();
    return n;
  }

  std::string dir_;
};

uint64_t newest_number(const CommitStore& store) {
  StatusOr<std::optional<Commit>> c = store.newest();
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() && *c ? (*c)->number : 0;
}

TEST_F(CommitStoreTest, AMissingOrEmptyDirectoryHoldsNone) {
  CommitStore missing(dir_ + "/not-yet");
  StatusOr<std::optional<Commit>> c = missing.newest();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->has_value());
  CommitStore empty(dir_);
  c = empty.newest();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->has_value());
}

TEST_F(CommitStoreTest, TheNewestCommitComesBackWholeAndTwoAreKept) {
  CommitStore store(dir_ + "/job");
  const std::string binary("state\0with\nnul and newline\xff", 28);
  for (uint64_t n : {3, 7, 8}) {
    ASSERT_TRUE(store.write(n, binary + std::to_string(n)).ok()) << n;
  }
  StatusOr<std::optional<Commit>> c = store.newest();
  ASSERT_TRUE(c.ok() && *c) << c.status().to_string();
  EXPECT_EQ((*c)->number, 8u);
  EXPECT_EQ((*c)->bytes, binary + "8");
  EXPECT_EQ(files(), 0) << "the store's files are in its own directory";
  CommitStore job(dir_ + "/job");
  int kept = 0;
  for (const auto& e : std::filesystem::directory_iterator(job.dir())) kept += e.is_regular_file();
  EXPECT_EQ(kept, 2) << "commits 7 and 8 only";
}

TEST_F(CommitStoreTest, KeepsAsManyAsAskedAndRemovesAllWhenDone) {
  CommitStore store(dir_ + "/job", 3);
  for (uint64_t n = 1; n <= 5; ++n) ASSERT_TRUE(store.write(n, std::to_string(n)).ok()) << n;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(store.dir())) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names.front(), "commit-00000000000000000003") << "the oldest kept is commit 3";
  EXPECT_EQ(newest_number(store), 5u);
  ASSERT_TRUE(store.drop_after(4).ok());
  EXPECT_EQ(newest_number(store), 4u) << "commit 5 is gone, 3 and 4 stand";
  ASSERT_TRUE(store.write(5, "again").ok()) << "a resumed job writes its commit 5 again";
  ASSERT_TRUE(store.remove_all().ok());
  EXPECT_FALSE(std::filesystem::exists(store.dir()));
  EXPECT_TRUE(store.remove_all().ok()) << "nothing left to remove is not an error";
}

TEST_F(CommitStoreTest, AnOlderNumberIsRefusedNamingBoth) {
  CommitStore store(dir_);
  ASSERT_TRUE(store.write(5, "five").ok());
  Status s = store.write(5, "again");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("commit 5 is not newer than commit 5"), std::string::npos)
      << s.message();
  EXPECT_FALSE(store.write(4, "four").ok());
  EXPECT_EQ(newest_number(store), 5u);
}

TEST_F(CommitStoreTest, ATornOrAlteredCommitGivesWayToThePreviousOne) {
  CommitStore store(dir_);
  ASSERT_TRUE(store.write(1, std::string(1000, 'a')).ok());
  ASSERT_TRUE(store.write(2, std::string(1000, 'b')).ok());
  ASSERT_EQ(newest_number(store), 2u);
  // One byte changed: the checksum no longer matches.
  {
    std::fstream f(file(2), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('c');
  }
  EXPECT_EQ(newest_number(store), 1u);
  // Cut short, as by a writer that wrote in place and was killed.
  std::filesystem::resize_file(file(1), 500);
  StatusOr<std::optional<Commit>> c = store.newest();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->has_value()) << "neither file is a whole commit";
}

TEST_F(CommitStoreTest, FilesThatAreNotCommitsAreIgnored) {
  CommitStore store(dir_);
  ASSERT_TRUE(store.write(2, "two").ok());
  for (const char* stray : {"commit-abc", "commit-00000000000000000009.tmp", "notes",
                            "commit-0000000000000000000000009"}) {
    std::ofstream(dir_ + "/" + stray) << "chorus-commit 9 3 0000000000000000\nnine";
  }
  EXPECT_EQ(newest_number(store), 2u);
  ASSERT_TRUE(store.write(3, "three").ok()) << "stray files do not count as newer commits";
  EXPECT_EQ(newest_number(store), 3u);
}

}  // namespace
}  // namespace chorus
