// Process sets under mpirun with 1 to 4 ranks: collectives inside a subset, unnamed names
// counted per set, overlapping sets busy at once, and sets that their members alone create
// (add_process_set_of_members, as torch.distributed's new_group asks for them) while the
// other ranks go on with their own collectives.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "chorus/chorus.h"
#include "test_data.h"

namespace chorus::testing {
namespace {

TEST(ProcessSets, CollectivesWithinASubset) {
  // Even ranks, plus a set of every rank but 0 (when there are at least two ranks).
  std::vector<int> evens;
  for (int r = 0; r < size(); r += 2) evens.push_back(r);
  StatusOr<ProcessSet> ps = add_process_set(evens);
  ASSERT_TRUE(ps.ok()) << ps.status().to_string();
  EXPECT_EQ(process_set_size(*ps), static_cast<int>(evens.size()));
  if (rank() % 2 == 0) {
    EXPECT_EQ(process_set_rank(*ps), rank() / 2);
    Buffer b(DataType::kInt64, {5});
    for (int64_t i = 0; i < 5; ++i) b.set(i, rank() + i);
    AllreduceOptions o;
    o.op = ReduceOp::kSum;
    o.process_set = *ps;
    ASSERT_TRUE(allreduce("ps.sum", b.ref(), b.ref(), o).wait().ok());
    const int64_t rank_sum = std::accumulate(evens.begin(), evens.end(), int64_t{0});
    for (int64_t i = 0; i < 5; ++i)
      EXPECT_EQ(b.at(i), rank_sum + i * static_cast<int64_t>(evens.size()));
    Buffer g(DataType::kInt32, {1});
    g.set(0, rank());
    AllgatherOptions go;
    go.process_set = *ps;
    Handle h = allgather("ps.gather", g.ref(), go);
    ASSERT_TRUE(h.wait().ok());
    for (std::size_t k = 0; k < evens.size(); ++k)
      EXPECT_EQ(load(DataType::kInt32, h.output().data, k), evens[k]);
  } else {
    EXPECT_EQ(process_set_rank(*ps), -1);
    Buffer b(DataType::kInt64, {5});
    AllreduceOptions o;
    o.process_set = *ps;
    Status s = allreduce("ps.outsider", b.ref(), b.ref(), o).wait();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  }
  ASSERT_TRUE(barrier().wait().ok());
  ASSERT_TRUE(remove_process_set(*ps).ok());
  EXPECT_EQ(process_set_size(*ps), -1);
}

TEST(ProcessSets, UnnamedCollectivesAreCountedPerSet) {
  // Only the set's members issue unnamed allreduces in it; an unnamed global allreduce that
  // follows must still get the same generated name on every rank.
  if (size() < 2) GTEST_SKIP() << "needs two ranks for a set smaller than the world";
  std::vector<int> all_but_last;
  for (int r = 0; r + 1 < size(); ++r) all_but_last.push_back(r);
  StatusOr<ProcessSet> set = add_process_set(all_but_last);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  AllreduceOptions in_set, global;
  in_set.op = global.op = ReduceOp::kSum;
  in_set.process_set = *set;
  Buffer x(DataType::kInt32, {1});
  if (process_set_rank(*set) >= 0) {
    for (int i = 0; i < 2; ++i) {
      x.set(0, 1);
      ASSERT_TRUE(allreduce("", x.ref(), x.ref(), in_set).wait().ok());
      EXPECT_EQ(x.at(0), static_cast<double>(all_but_last.size()));
    }
  }
  x.set(0, 1);
  Status s = allreduce("", x.ref(), x.ref(), global).wait(std::chrono::seconds(60));
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(x.at(0), static_cast<double>(size()));
  ASSERT_TRUE(remove_process_set(*set).ok());
}

TEST(ProcessSets, OverlappingSetsBusyAtOnce) {
  // Ranks in two sets negotiate both in every cycle; their rounds must finish in one order
  // on every rank, or two ranks could each wait for the other in a different set.
  if (size() < 3) GTEST_SKIP() << "needs three ranks for two overlapping sets";
  std::vector<int> low, high;
  for (int r = 0; r < size(); ++r) (r < size() - 1 ? low : high).push_back(r);
  high.insert(high.begin(), 0);  // {0, last}: overlaps `low` in rank 0
  StatusOr<ProcessSet> a = add_process_set(low);
  StatusOr<ProcessSet> b = add_process_set(high);
  ASSERT_TRUE(a.ok() && b.ok());
  AllreduceOptions oa, ob, og;
  oa.op = ob.op = og.op = ReduceOp::kSum;
  oa.process_set = *a;
  ob.process_set = *b;
  for (int step = 0; step < 40; ++step) {
    Buffer x(DataType::kInt32, {3}), y(DataType::kInt32, {3}), z(DataType::kInt32, {3});
    for (int i = 0; i < 3; ++i) x.set(i, 1), y.set(i, 1), z.set(i, 1);
    std::vector<Handle> hs;
    const std::string tag = std::to_string(step);
    if (process_set_rank(*b) >= 0) hs.push_back(allreduce("ov.b" + tag, y.ref(), y.ref(), ob));
    if (process_set_rank(*a) >= 0) hs.push_back(allreduce("ov.a" + tag, x.ref(), x.ref(), oa));
    hs.push_back(allreduce("ov.g" + tag, z.ref(), z.ref(), og));
    for (Handle& h : hs) ASSERT_TRUE(h.wait(std::chrono::seconds(60)).ok()) << "step " << step;
    if (process_set_rank(*a) >= 0) ASSERT_EQ(x.at(0), static_cast<double>(low.size()));
    if (process_set_rank(*b) >= 0) ASSERT_EQ(y.at(0), 2.0);
    ASSERT_EQ(z.at(0), static_cast<double>(size()));
  }
  ASSERT_TRUE(remove_process_set(*a).ok());
  ASSERT_TRUE(remove_process_set(*b).ok());
}

// The set's members ask for it; the others never call anything about it and keep making
// their own global collectives, which must not be held up by it.
TEST(ProcessSets, MembersAloneCreateASet) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks for a set smaller than the world";
  const std::vector<int> members = {1, size() - 1 == 1 ? 0 : size() - 1};
  std::vector<int> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  const bool member = std::find(sorted.begin(), sorted.end(), rank()) != sorted.end();
  AllreduceOptions sum;
  sum.op = ReduceOp::kSum;
  if (member) {
    StatusOr<ProcessSet> set = add_process_set_of_members(members);
    ASSERT_TRUE(set.ok()) << set.status().to_string();
    EXPECT_EQ(process_set_size(*set), 2);
    EXPECT_EQ(process_set_rank(*set), rank() == sorted[0] ? 0 : 1);
    AllreduceOptions in_set = sum;
    in_set.process_set = *set;
    Buffer x(DataType::kInt32, {3});
    for (int i = 0; i < 3; ++i) x.set(i, rank());
    ASSERT_TRUE(allreduce("", x.ref(), x.ref(), in_set).wait().ok());
    EXPECT_EQ(x.at(0), static_cast<double>(sorted[0] + sorted[1]));
  } else {
    // A rank outside the set is refused at the call, which reaches nobody.
    EXPECT_EQ(add_process_set_of_members(members).status().code(), StatusCode::kInvalidArgument);
  }
  Buffer z(DataType::kInt32, {1});
  z.set(0, 1);
  Status s = allreduce("members.after", z.ref(), z.ref(), sum).wait(std::chrono::seconds(60));
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(z.at(0), static_cast<double>(size()));
}

// Two disjoint sets, each created by its own members at the same time (new_group called for
// the evens and for the odds): each gets its own set, made on every rank in one order.
TEST(ProcessSets, DisjointSetsOfMembersAtOnce) {
  if (size() < 4) GTEST_SKIP() << "needs four ranks for two sets of two";
  std::vector<int> mine;
  for (int r = rank() % 2; r < size(); r += 2) mine.push_back(r);
  StatusOr<ProcessSet> set = add_process_set_of_members(mine);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ(process_set_rank(*set), rank() / 2);
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  o.process_set = *set;
  Buffer x(DataType::kInt64, {2});
  for (int i = 0; i < 2; ++i) x.set(i, rank());
  ASSERT_TRUE(allreduce("", x.ref(), x.ref(), o).wait().ok());
  EXPECT_EQ(x.at(1), static_cast<double>(std::accumulate(mine.begin(), mine.end(), 0)));
}

// Each rank first asks for the pair with its next rank, then for the pair with its previous
// one, without blocking (a ring of sends, each rank's first message to its next): with a
// blocking call each rank would wait for its next rank, which waits for its own.
TEST(ProcessSets, PairsOfARingMadeWithoutBlocking) {
  if (size() < 3) GTEST_SKIP() << "needs three ranks for a ring of distinct pairs";
  const int next = (rank() + 1) % size();
  const int prev = (rank() + size() - 1) % size();
  Handle to_next = add_process_set_of_members_async({rank(), next}, "ring");
  Handle to_prev = add_process_set_of_members_async({prev, rank()}, "ring");
  ASSERT_FALSE(to_next.refused()) << to_next.status().to_string();
  // One sum in each pair, both submitted before either is waited for (each rank's pairs are
  // its next's and its previous's).
  std::vector<Buffer> sums;
  sums.reserve(2);
  std::vector<Handle> running;
  for (Handle* made : {&to_next, &to_prev}) {
    Status s = made->wait(std::chrono::seconds(60));
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(process_set_size(made->process_set()), 2);
    sums.emplace_back(DataType::kInt32, std::vector<int64_t>{1});
    sums.back().set(0, rank());
  }
  for (int i = 0; i < 2; ++i) {
    AllreduceOptions o;
    o.op = ReduceOp::kSum;
    o.process_set = (i == 0 ? to_next : to_prev).process_set();
    running.push_back(allreduce("ring.sum", sums[i].ref(), sums[i].ref(), o));
  }
  for (int i = 0; i < 2; ++i) {
    Status s = running[i].wait(std::chrono::seconds(60));
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(sums[i].at(0), static_cast<double>(rank() + (i == 0 ? next : prev)));
  }
}

// Two sets of the same two ranks for different purposes, asked for in opposite orders on the
// two members: each purpose's set is the same set on both.
TEST(ProcessSets, SetsOfOneListForTwoPurposesDoNotCross) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  // Ranks 0 and 1 alone make the sets; the others take part on their background threads only,
  // then meet them in the barrier at the end.
  if (rank() <= 1) {
    std::vector<std::string> order = {"a", "b"};
    if (rank() == 1) std::swap(order[0], order[1]);
    std::map<std::string, Handle> made;
    for (const std::string& purpose : order)
      made[purpose] = add_process_set_of_members_async({0, 1}, purpose);
    ProcessSet a = {};
    ProcessSet b = {};
    for (auto [purpose, set] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
      Status s = made[purpose].wait(std::chrono::seconds(60));
      ASSERT_TRUE(s.ok()) << s.to_string();
      *set = made[purpose].process_set();
    }
    ASSERT_NE(a.id, b.id);
    // Each member's id of set "a", summed over set "a" itself: twice its own where both hold
    // it.
    AllreduceOptions o;
    o.op = ReduceOp::kSum;
    o.process_set = a;
    Buffer ids(DataType::kInt32, {1});
    ids.set(0, a.id);
    Status s = allreduce("purpose.a", ids.ref(), ids.ref(), o).wait(std::chrono::seconds(60));
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(ids.at(0), 2.0 * a.id);
  }
  ASSERT_TRUE(barrier().wait(std::chrono::seconds(60)).ok());
}

}  // namespace
}  // namespace chorus::testing
