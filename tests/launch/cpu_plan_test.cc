// Unit tests of the CPU plan (src/topology/cpu_plan.h) on described hosts: disjoint blocks of
// cores per local rank, spread over NUMA nodes, and the errors for impossible layouts.
#include "topology/cpu_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace chorus {
namespace {

// `packages` NUMA nodes of `cores` cores with `smt` PUs each; PU numbering as Linux does on
// x86 (first hyperthreads of all cores, then the second ones).
CpuLayout host(int numa_nodes, int cores_per_node, int smt) {
  CpuLayout l;
  const int total = numa_nodes * cores_per_node;
  for (int c = 0; c < total; ++c) {
    CpuCore core;
    core.numa = c / cores_per_node;
    for (int t = 0; t < smt; ++t) core.pus.push_back(c + t * total);
    l.cores.push_back(core);
  }
  return l;
}

std::vector<int> pus_of(const CpuLayout& l, BindMode mode, int rank, int size) {
  StatusOr<CpuPlan> p = plan_cpus(l, mode, rank, size);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? p->pus : std::vector<int>{};
}

TEST(CpuPlanTest, ParseBindMode) {
  EXPECT_EQ(*parse_bind_mode("", "CHORUS_BIND"), BindMode::kNone);
  EXPECT_EQ(*parse_bind_mode("none", "CHORUS_BIND"), BindMode::kNone);
  EXPECT_EQ(*parse_bind_mode("core", "CHORUS_BIND"), BindMode::kCore);
  EXPECT_EQ(*parse_bind_mode("numa", "CHORUS_BIND"), BindMode::kNuma);
  StatusOr<BindMode> bad = parse_bind_mode("socket", "CHORUS_BIND");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "CHORUS_BIND='socket' is invalid; expected none, core or numa");
}

TEST(CpuPlanTest, CoreBlocksAreDisjointAndCoverEveryCore) {
  CpuLayout l = host(2, 8, 2);  // 16 cores, 32 PUs
  for (int k : {1, 2, 3, 4, 5, 16}) {
    std::set<int> seen;
    std::size_t total = 0;
    for (int r = 0; r < k; ++r) {
      std::vector<int> p = pus_of(l, BindMode::kCore, r, k);
      total += p.size();
      seen.insert(p.begin(), p.end());
    }
    EXPECT_EQ(total, 32u) << "k=" << k;
    EXPECT_EQ(seen.size(), 32u) << "k=" << k << ": cpusets overlap";
  }
}

TEST(CpuPlanTest, FourRanksOnTwoSocketsGetTwoEach) {
  CpuLayout l = host(2, 4, 1);
  EXPECT_EQ(pus_of(l, BindMode::kCore, 0, 4), (std::vector<int>{0, 1}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 1, 4), (std::vector<int>{2, 3}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 2, 4), (std::vector<int>{4, 5}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 3, 4), (std::vector<int>{6, 7}));
  StatusOr<CpuPlan> p = plan_cpus(l, BindMode::kCore, 3, 4);
  EXPECT_EQ(p->describe, "cores 6-7 (PUs 6-7, NUMA 1)");
  EXPECT_EQ(p->thread_pus, (std::vector<int>{7}));
  EXPECT_EQ(p->cores, 2);
}

TEST(CpuPlanTest, UnevenCoresGoToTheFirstRanks) {
  CpuLayout l = host(1, 5, 1);
  EXPECT_EQ(pus_of(l, BindMode::kCore, 0, 2), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 1, 2), (std::vector<int>{3, 4}));
}

TEST(CpuPlanTest, HyperthreadsStayWithTheirCore) {
  CpuLayout l = host(1, 2, 2);  // core 0: PUs 0,2; core 1: PUs 1,3
  EXPECT_EQ(pus_of(l, BindMode::kCore, 0, 2), (std::vector<int>{0, 2}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 1, 2), (std::vector<int>{1, 3}));
}

TEST(CpuPlanTest, MoreRanksThanCoresIsAFailedPrecondition) {
  StatusOr<CpuPlan> p = plan_cpus(host(1, 2, 1), BindMode::kCore, 0, 4);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.status().message(),
            "CHORUS_BIND=core: 4 ranks on this host but only 2 cores; each rank needs a core "
            "of its own");
}

TEST(CpuPlanTest, NumaGivesEachRankItsNodes) {
  CpuLayout l = host(4, 2, 1);
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 0, 2), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 1, 2), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 2, 4), (std::vector<int>{4, 5}));
}

// Every rank's plan, each checked to be disjoint from the others' in both the process's
// and the background thread's PUs, with the thread inside the process's.
void expect_disjoint(const CpuLayout& l, BindMode mode, int size) {
  std::set<int> pus, thread_pus;
  for (int r = 0; r < size; ++r) {
    StatusOr<CpuPlan> p = plan_cpus(l, mode, r, size);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_FALSE(p->pus.empty());
    ASSERT_FALSE(p->thread_pus.empty());
    for (int pu : p->pus) {
      EXPECT_TRUE(pus.insert(pu).second) << "rank " << r << "/" << size << ": PU " << pu;
    }
    for (int pu : p->thread_pus) {
      EXPECT_TRUE(thread_pus.insert(pu).second)
          << "rank " << r << "/" << size << ": thread PU " << pu;
      EXPECT_TRUE(std::count(p->pus.begin(), p->pus.end(), pu)) << "thread PU " << pu;
    }
  }
}

TEST(CpuPlanTest, NumaWithMoreRanksThanNodesSpreadsEvenly) {
  CpuLayout l = host(2, 2, 1);
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 0, 4), (std::vector<int>{0}));
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 1, 4), (std::vector<int>{1}));
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 2, 4), (std::vector<int>{2}));
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 3, 4), (std::vector<int>{3}));
  expect_disjoint(l, BindMode::kNuma, 4);
  // Two NUMA nodes of 4 cores with hyperthreads: 3 ranks put two on node 0, one on node 1.
  CpuLayout big = host(2, 4, 2);
  EXPECT_EQ(pus_of(big, BindMode::kNuma, 0, 3), (std::vector<int>{0, 1, 8, 9}));
  EXPECT_EQ(pus_of(big, BindMode::kNuma, 1, 3), (std::vector<int>{2, 3, 10, 11}));
  EXPECT_EQ(pus_of(big, BindMode::kNuma, 2, 3), (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  StatusOr<CpuPlan> p = plan_cpus(big, BindMode::kNuma, 1, 3);
  EXPECT_EQ(p->describe, "cores 2-3 (PUs 2-3,10-11, NUMA 0)");
  EXPECT_EQ(p->thread_pus, (std::vector<int>{3, 11}));
  for (int k : {1, 2, 3, 4, 5, 6, 7, 8}) expect_disjoint(big, BindMode::kNuma, k);
  for (int k : {1, 2, 3, 4, 5, 6, 7, 8}) expect_disjoint(big, BindMode::kCore, k);
}

TEST(CpuPlanTest, NumaNodeWithFewerCoresThanItsRanksIsAFailedPrecondition) {
  CpuLayout l = host(2, 3, 1);
  l.cores.resize(4);  // node 0 keeps 3 cores, node 1 one; 4 ranks put two on each
  StatusOr<CpuPlan> p = plan_cpus(l, BindMode::kNuma, 3, 4);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.status().message(),
            "CHORUS_BIND=numa: 2 ranks on NUMA node 1 but only 1 cores there; each rank needs a "
            "core of its own");
}

TEST(CpuPlanTest, CoreBlocksStayInsideANumaNodeWhenRanksDivideEvenly) {
  // 2 nodes of 5 cores, 4 ranks: consecutive blocks of 3, 3, 2, 2 would give rank 1 cores
  // 3-5 across both nodes; per node it is 3 + 2 on each.
  CpuLayout l = host(2, 5, 1);
  EXPECT_EQ(pus_of(l, BindMode::kCore, 0, 4), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 1, 4), (std::vector<int>{3, 4}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 2, 4), (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 3, 4), (std::vector<int>{8, 9}));
  for (int r = 0; r < 4; ++r) {
    StatusOr<CpuPlan> p = plan_cpus(l, BindMode::kCore, r, 4);
    ASSERT_TRUE(p.ok());
    const std::string numa = p->describe.substr(p->describe.find("NUMA "));
    EXPECT_EQ(numa.find_first_of(",-"), std::string::npos) << p->describe;
  }
  expect_disjoint(l, BindMode::kCore, 4);
  // Unequal nodes (a cpuset that leaves 3 cores on node 0 and 5 on node 1), 2 ranks: one
  // node each, not 4 + 4 across the boundary.
  CpuLayout uneven = host(2, 5, 1);
  uneven.cores.erase(uneven.cores.begin(), uneven.cores.begin() + 2);
  EXPECT_EQ(pus_of(uneven, BindMode::kCore, 0, 2), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(pus_of(uneven, BindMode::kCore, 1, 2), (std::vector<int>{5, 6, 7, 8, 9}));
  // 3 ranks on 2 nodes do not divide evenly: consecutive blocks of 4, 3, 3 over 10 cores.
  EXPECT_EQ(pus_of(l, BindMode::kCore, 1, 3), (std::vector<int>{4, 5, 6}));
}

TEST(CpuPlanTest, NoneIsEmpty) {
  StatusOr<CpuPlan> p = plan_cpus(host(1, 4, 1), BindMode::kNone, 0, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->pus.empty());
}

TEST(CpuPlanTest, BadLocalRankIsRefused) {
  EXPECT_FALSE(plan_cpus(host(1, 4, 1), BindMode::kCore, 2, 2).ok());
}

}  // namespace
}  // namespace chorus
