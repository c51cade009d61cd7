// Unit tests of the rank mapper (src/topology/rank_map.h): local and cross ranks from host
// names, for the layouts launchers produce (block, round-robin, uneven).
#include "topology/rank_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace chorus {
namespace {

using Names = std::vector<std::string>;
using Hosts = std::vector<std::vector<int>>;

// Every rank must compute the same host table; returns rank 0's.
RankMap check_same_tables(const Names& names) {
  RankMap first = compute_rank_map(names, 0);
  for (int r = 1; r < static_cast<int>(names.size()); ++r) {
    RankMap m = compute_rank_map(names, r);
    EXPECT_EQ(m.hosts, first.hosts) << "rank " << r;
    EXPECT_EQ(m.host_names, first.host_names) << "rank " << r;
    EXPECT_EQ(m.cross_size, first.cross_size) << "rank " << r;
  }
  return first;
}

void expect_rank(const Names& names, int rank, int local_rank, int local_size, int cross_rank,
                 int cross_size) {
  RankMap m = compute_rank_map(names, rank);
  EXPECT_EQ(m.local_rank, local_rank) << "rank " << rank;
  EXPECT_EQ(m.local_size, local_size) << "rank " << rank;
  EXPECT_EQ(m.cross_rank, cross_rank) << "rank " << rank;
  EXPECT_EQ(m.cross_size, cross_size) << "rank " << rank;
}

TEST(RankMapTest, SingleRank) {
  expect_rank({"solo"}, 0, 0, 1, 0, 1);
  RankMap m = compute_rank_map({"solo"}, 0);
  EXPECT_EQ(m.hosts, (Hosts{{0}}));
  EXPECT_EQ(m.host_names, (Names{"solo"}));
}

TEST(RankMapTest, SingleHost) {
  Names names(4, "node0");
  for (int r = 0; r < 4; ++r) expect_rank(names, r, r, 4, 0, 1);
  RankMap m = check_same_tables(names);
  EXPECT_EQ(m.hosts, (Hosts{{0, 1, 2, 3}}));
  EXPECT_EQ(m.host_names, (Names{"node0"}));
}

TEST(RankMapTest, TwoHostsTwoRanksBlockLayout) {
  // mpirun -map-by ppr:2:node: ranks 0,1 on the first node, 2,3 on the second.
  Names names = {"a001", "a001", "a002", "a002"};
  expect_rank(names, 0, 0, 2, 0, 2);
  expect_rank(names, 1, 1, 2, 0, 2);
  expect_rank(names, 2, 0, 2, 1, 2);
  expect_rank(names, 3, 1, 2, 1, 2);
  RankMap m = check_same_tables(names);
  EXPECT_EQ(m.hosts, (Hosts{{0, 1}, {2, 3}}));
  EXPECT_EQ(m.host_names, (Names{"a001", "a002"}));
}

TEST(RankMapTest, RoundRobinLayout) {
  // Hosts interleaved: rank r on host r % 3.
  Names names = {"h0", "h1", "h2", "h0", "h1", "h2"};
  for (int r = 0; r < 6; ++r) expect_rank(names, r, r / 3, 2, r % 3, 3);
  RankMap m = check_same_tables(names);
  EXPECT_EQ(m.hosts, (Hosts{{0, 3}, {1, 4}, {2, 5}}));
}

TEST(RankMapTest, UnevenHosts) {
  Names names = {"big", "big", "big", "small", "mid", "mid"};
  expect_rank(names, 0, 0, 3, 0, 3);
  expect_rank(names, 2, 2, 3, 0, 3);
  expect_rank(names, 3, 0, 1, 1, 3);
  expect_rank(names, 4, 0, 2, 2, 3);
  expect_rank(names, 5, 1, 2, 2, 3);
  RankMap m = check_same_tables(names);
  EXPECT_EQ(m.hosts, (Hosts{{0, 1, 2}, {3}, {4, 5}}));
}

TEST(RankMapTest, HostOrderByLowestRankNotByName) {
  // Alphabetical order would put "alpha" first; rank 0 is on "zeta".
  Names names = {"zeta", "alpha", "mu", "alpha", "zeta", "mu"};
  RankMap m = check_same_tables(names);
  EXPECT_EQ(m.host_names, (Names{"zeta", "alpha", "mu"}));
  EXPECT_EQ(m.hosts, (Hosts{{0, 4}, {1, 3}, {2, 5}}));
  expect_rank(names, 1, 0, 2, 1, 3);
  expect_rank(names, 3, 1, 2, 1, 3);
  expect_rank(names, 4, 1, 2, 0, 3);
  expect_rank(names, 5, 1, 2, 2, 3);
}

TEST(RankMapTest, LocalRanksFollowGlobalOrderOnEveryHost) {
  Names names = {"b", "a", "a", "b", "c", "a", "b"};
  for (int r = 0; r < static_cast<int>(names.size()); ++r) {
    RankMap m = compute_rank_map(names, r);
    const std::vector<int>& mine = m.hosts.at(m.cross_rank);
    ASSERT_LT(m.local_rank, static_cast<int>(mine.size()));
    EXPECT_EQ(mine[m.local_rank], r);
    EXPECT_EQ(m.host_names.at(m.cross_rank), names[r]);
    int below = 0;
    for (int q = 0; q < r; ++q) below += names[q] == names[r];
    EXPECT_EQ(m.local_rank, below) << "rank " << r;
  }
}

TEST(RankMapTest, CrossSetsHoldOneRankPerHostInHostOrder) {
  Names names = {"b", "a", "a", "b", "c", "a", "b"};
  RankMap m = check_same_tables(names);
  // Hosts by lowest rank: b={0,3,6}, a={1,2,5}, c={4}.
  EXPECT_EQ(m.cross_sets, (Hosts{{0, 1, 4}, {3, 2}, {6, 5}}));
  for (int r = 0; r < static_cast<int>(names.size()); ++r) {
    RankMap mine = compute_rank_map(names, r);
    EXPECT_EQ(mine.local_set(), mine.hosts[mine.cross_rank]) << "rank " << r;
    const std::vector<int>& cross = mine.cross_set();
    EXPECT_NE(std::find(cross.begin(), cross.end(), r), cross.end()) << "rank " << r;
    for (int q : cross) EXPECT_EQ(compute_rank_map(names, q).local_rank, mine.local_rank);
  }
}

TEST(RankMapTest, LocalAndCrossSetsOfAUniformLayoutPartitionTheRanks) {
  Names names = {"n1", "n1", "n1", "n2", "n2", "n2"};
  RankMap m = check_same_tables(names);
  EXPECT_EQ(m.cross_sets, (Hosts{{0, 3}, {1, 4}, {2, 5}}));
  RankMap r4 = compute_rank_map(names, 4);
  EXPECT_EQ(r4.local_set(), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(r4.cross_set(), (std::vector<int>{1, 4}));
}

TEST(RankMapTest, LayoutPprBlock) {
  RankMap m = compute_rank_map({"a", "a", "b", "b", "c", "c"}, 0);
  EXPECT_TRUE(m.uniform);
  EXPECT_TRUE(m.ppr_block);
  EXPECT_EQ(m.ranks_per_host, 2);
  EXPECT_EQ(m.layout(), "ppr:2:node");
  EXPECT_EQ(compute_rank_map({"solo"}, 0).layout(), "ppr:1:node");
  EXPECT_EQ(compute_rank_map({"x", "x", "x", "x"}, 2).layout(), "ppr:4:node");
}

TEST(RankMapTest, LayoutRoundRobinIsUniformButNotBlock) {
  RankMap m = compute_rank_map({"a", "b", "a", "b"}, 0);
  EXPECT_TRUE(m.uniform);
  EXPECT_FALSE(m.ppr_block);
  EXPECT_EQ(m.ranks_per_host, 2);
  EXPECT_EQ(m.layout(), "2 ranks per host, not in consecutive blocks");
}

TEST(RankMapTest, LayoutNonUniform) {
  RankMap m = compute_rank_map({"big", "big", "big", "small", "mid", "mid"}, 0);
  EXPECT_FALSE(m.uniform);
  EXPECT_FALSE(m.ppr_block);
  EXPECT_EQ(m.ranks_per_host, 0);
  EXPECT_EQ(m.layout(), "non-uniform: 3, 1, 2 ranks per host");
}

TEST(RankMapTest, FormatRanksCollapsesRuns) {
  EXPECT_EQ(format_ranks({}), "");
  EXPECT_EQ(format_ranks({7}), "7");
  EXPECT_EQ(format_ranks({3, 0, 1, 2, 8, 10, 11}), "0-3,8,10-11");
}

TEST(RankMapTest, DescribeRankAndHostTable) {
  Names names = {"a001", "a001", "a002", "a002"};
  EXPECT_EQ(describe_rank(compute_rank_map(names, 3), 3, 4),
            "rank 3/4 on host 'a002': local_rank 1/2, cross_rank 1/2");
  EXPECT_EQ(format_host_table(compute_rank_map(names, 0), 4),
            "rank map: 4 ranks on 2 hosts, layout ppr:2:node\n"
            "  host 0 'a001': ranks 0-1\n"
            "  host 1 'a002': ranks 2-3");
}

}  // namespace
}  // namespace chorus
