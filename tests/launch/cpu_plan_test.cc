// Unit tests of the CPU plan (src/topology/cpu_plan.h) on described hosts: disjoint blocks of
// cores per local rank, spread over NUMA nodes, and the errors for impossible layouts.
#include "topology/cpu_plan.h"

#include <gtest/gtest.h>

#include <set>
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

TEST(CpuPlanTest, NumaWithMoreRanksThanNodesSpreadsEvenly) {
  CpuLayout l = host(2, 2, 1);
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 0, 4), (std::vector<int>{0, 1}));
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 1, 4), (std::vector<int>{0, 1}));
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 2, 4), (std::vector<int>{2, 3}));
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 3, 4), (std::vector<int>{2, 3}));
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
