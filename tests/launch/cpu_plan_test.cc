// Unit tests of the CPU plan (src/topology/cpu_plan.h) on described hosts: disjoint blocks of
// cores per local rank, spread over NUMA nodes or next to each rank's GPU, CUDA_VISIBLE_DEVICES,
// and the errors for impossible layouts.
#include "topology/cpu_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
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
  EXPECT_EQ(*kBindWords.parse("", "CHORUS_BIND"), BindMode::kNone);
  EXPECT_EQ(*kBindWords.parse("none", "CHORUS_BIND"), BindMode::kNone);
  EXPECT_EQ(*kBindWords.parse("core", "CHORUS_BIND"), BindMode::kCore);
  EXPECT_EQ(*kBindWords.parse("numa", "CHORUS_BIND"), BindMode::kNuma);
  StatusOr<BindMode> bad = kBindWords.parse("socket", "CHORUS_BIND");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "CHORUS_BIND='socket' is invalid: expected none, core or numa");
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

// A GPU at PCI `bus` near the cores of NUMA nodes `numa` of `l`, appended to l.gpus (which
// therefore lists GPUs in the order the test adds them: PCI bus order).
void add_gpu(CpuLayout& l, const std::string& bus, const std::vector<int>& numa) {
  GpuLocality g;
  g.index = static_cast<int>(l.gpus.size());
  g.pci_bus_id = bus;
  g.numa = numa;
  for (int c = 0; c < static_cast<int>(l.cores.size()); ++c) {
    if (std::count(numa.begin(), numa.end(), l.cores[c].numa)) g.cores.push_back(c);
  }
  l.gpus.push_back(g);
}

// The NUMA nodes a plan's describe names ("... NUMA 1)").
std::string numa_of(const CpuPlan& p) {
  const std::size_t at = p.describe.find("NUMA ");
  return p.describe.substr(at + 5, p.describe.size() - at - 6);
}

TEST(CpuPlanGpuTest, TwoPackagesTwoGpusEachFourRanks) {
  // PCI order alternates packages (0000:07 and 0000:3b on package 0, 0000:86 and 0000:af on
  // 1 would be the usual; here GPU 1 is on package 1), so following core order alone would
  // put rank 1 on package 0, away from its GPU.
  CpuLayout l = host(2, 4, 1);
  add_gpu(l, "0000:07:00.0", {0});
  add_gpu(l, "0000:3b:00.0", {1});
  add_gpu(l, "0000:86:00.0", {0});
  add_gpu(l, "0000:af:00.0", {1});
  for (BindMode mode : {BindMode::kCore, BindMode::kNuma}) {
    EXPECT_EQ(pus_of(l, mode, 0, 4), (std::vector<int>{0, 1}));
    EXPECT_EQ(pus_of(l, mode, 1, 4), (std::vector<int>{4, 5}));
    EXPECT_EQ(pus_of(l, mode, 2, 4), (std::vector<int>{2, 3}));
    EXPECT_EQ(pus_of(l, mode, 3, 4), (std::vector<int>{6, 7}));
    expect_disjoint(l, mode, 4);
  }
  StatusOr<CpuPlan> p = plan_cpus(l, BindMode::kCore, 1, 4);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->gpu, 1);
  EXPECT_EQ(p->describe, "cores 4-5 (PUs 4-5, NUMA 1)");
  EXPECT_EQ(p->thread_pus, (std::vector<int>{5}));
  EXPECT_EQ(describe_gpu(l, p->gpu), "cuda:1 (PCI 0000:3b:00.0, NUMA 1)");
}

TEST(CpuPlanGpuTest, EightGpusEightRanks) {
  CpuLayout l = host(2, 8, 2);  // 16 cores, 32 PUs
  for (int g = 0; g < 8; ++g) add_gpu(l, "0000:0" + std::to_string(g) + ":00.0", {g / 4});
  for (int r = 0; r < 8; ++r) {
    StatusOr<CpuPlan> p = plan_cpus(l, BindMode::kCore, r, 8);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->gpu, r);
    EXPECT_EQ(p->pus, (std::vector<int>{2 * r, 2 * r + 1, 2 * r + 16, 2 * r + 17}));
    EXPECT_EQ(numa_of(*p), std::to_string(r / 4)) << p->describe;
  }
  expect_disjoint(l, BindMode::kCore, 8);
  expect_disjoint(l, BindMode::kNuma, 8);
}

TEST(CpuPlanGpuTest, FewerGpusThanRanksShareTheirNode) {
  CpuLayout l = host(2, 4, 1);
  add_gpu(l, "0000:07:00.0", {0});
  add_gpu(l, "0000:86:00.0", {1});
  // Ranks 0 and 2 on cuda:0 (node 0), ranks 1 and 3 on cuda:1 (node 1).
  EXPECT_EQ(pus_of(l, BindMode::kCore, 0, 4), (std::vector<int>{0, 1}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 1, 4), (std::vector<int>{4, 5}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 2, 4), (std::vector<int>{2, 3}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 3, 4), (std::vector<int>{6, 7}));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(plan_cpus(l, BindMode::kCore, r, 4)->gpu, r % 2);
  // Three ranks: two on node 0 (cut 2 + 2), one with node 1 to itself.
  EXPECT_EQ(pus_of(l, BindMode::kCore, 1, 3), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 2, 3), (std::vector<int>{2, 3}));
  for (int k = 1; k <= 8; ++k) expect_disjoint(l, BindMode::kCore, k);
}

TEST(CpuPlanGpuTest, GpusAllOnOneNodeKeepTheRanksThere) {
  CpuLayout l = host(2, 4, 1);
  add_gpu(l, "0000:07:00.0", {0});
  add_gpu(l, "0000:08:00.0", {0});
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 0, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(pus_of(l, BindMode::kNuma, 1, 2), (std::vector<int>{2, 3}));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(pus_of(l, BindMode::kCore, r, 4), (std::vector<int>{r}));
  expect_disjoint(l, BindMode::kCore, 4);
  // Five ranks on the four cores near the GPUs: node 1 is free, but far from every GPU.
  StatusOr<CpuPlan> p = plan_cpus(l, BindMode::kCore, 0, 5);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.status().message(),
            "CHORUS_BIND=core: 5 ranks on GPU cuda:0-1 but only 4 cores near it; each rank needs "
            "a core of its own");
}

TEST(CpuPlanGpuTest, OverlappingLocalitiesArePooled) {
  // cuda:0 near a package of two nodes, cuda:1 near one of them, cuda:2 near node 2: ranks
  // 0 and 1 share nodes 0-1, so no core of theirs can go to anyone else.
  CpuLayout l = host(4, 4, 1);
  add_gpu(l, "0000:07:00.0", {0, 1});
  add_gpu(l, "0000:08:00.0", {0});
  add_gpu(l, "0000:86:00.0", {2});
  EXPECT_EQ(pus_of(l, BindMode::kCore, 0, 3), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 1, 3), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(pus_of(l, BindMode::kCore, 2, 3), (std::vector<int>{8, 9, 10, 11}));
  for (int k = 1; k <= 12; ++k) expect_disjoint(l, BindMode::kCore, k);
}

TEST(CpuPlanGpuTest, GpusWithoutLocalityKeepTheCoreOrderPlan) {
  CpuLayout plain = host(2, 4, 1);
  CpuLayout everywhere = plain, nowhere = plain;
  add_gpu(everywhere, "0000:07:00.0", {0, 1});  // hangs off the machine: every core
  add_gpu(nowhere, "0000:07:00.0", {});
  for (int k : {1, 2, 3, 4}) {
    for (int r = 0; r < k; ++r) {
      EXPECT_EQ(pus_of(everywhere, BindMode::kCore, r, k), pus_of(plain, BindMode::kCore, r, k));
      EXPECT_EQ(pus_of(nowhere, BindMode::kNuma, r, k), pus_of(plain, BindMode::kNuma, r, k));
      EXPECT_EQ(plan_cpus(nowhere, BindMode::kNuma, r, k)->gpu, 0);
      EXPECT_EQ(plan_cpus(plain, BindMode::kNuma, r, k)->gpu, -1);
    }
  }
}

TEST(CpuPlanGpuTest, NoneStillNamesTheGpu) {
  CpuLayout l = host(1, 4, 1);
  add_gpu(l, "0000:07:00.0", {0});
  add_gpu(l, "0000:08:00.0", {0});
  StatusOr<CpuPlan> p = plan_cpus(l, BindMode::kNone, 3, 4);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->pus.empty());
  EXPECT_EQ(p->gpu, 1);
}

TEST(CpuPlanGpuTest, CudaVisibleDevices) {
  EXPECT_EQ(visible_gpus(std::nullopt, 4).order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(visible_gpus(std::nullopt, 0).order, (std::vector<int>{}));
  VisibleGpus two = visible_gpus(std::string(" 3, 1"), 4);
  EXPECT_EQ(two.order, (std::vector<int>{3, 1}));
  EXPECT_EQ(two.note, "");
  VisibleGpus empty = visible_gpus(std::string(""), 4);
  EXPECT_TRUE(empty.order.empty());
  EXPECT_EQ(empty.note, "");
  VisibleGpus bad = visible_gpus(std::string("0,7,1"), 4);
  EXPECT_EQ(bad.order, (std::vector<int>{0}));
  EXPECT_EQ(bad.note,
            "CUDA_VISIBLE_DEVICES='0,7,1': '7' is not an unused GPU index of this host (4 GPUs); "
            "as CUDA does, only the GPUs listed before it are visible");
  EXPECT_EQ(visible_gpus(std::string("1,1"), 4).order, (std::vector<int>{1}));
  EXPECT_EQ(visible_gpus(std::string("-1"), 4).order, (std::vector<int>{}));
  VisibleGpus uuid = visible_gpus(std::string("GPU-8c3f2b1e-0000-1111-2222-333344445555"), 2);
  EXPECT_EQ(uuid.order, (std::vector<int>{0, 1}));
  EXPECT_EQ(uuid.note,
            "CUDA_VISIBLE_DEVICES='GPU-8c3f2b1e-0000-1111-2222-333344445555' names GPUs by UUID, "
            "which Chorus cannot match without CUDA; ranks are placed on the GPUs in PCI bus "
            "order");
  EXPECT_EQ(visible_gpus(std::string("0,MIG-abc"), 2).order, (std::vector<int>{0, 1}));
}

TEST(CpuPlanGpuTest, VisibleGpusDecideWhereRanksRun) {
  CpuLayout l = host(2, 4, 1);
  add_gpu(l, "0000:07:00.0", {0});
  add_gpu(l, "0000:3b:00.0", {0});
  add_gpu(l, "0000:86:00.0", {1});
  add_gpu(l, "0000:af:00.0", {1});
  // CUDA_VISIBLE_DEVICES=3,2: both ranks run on node 1, cuda:0 being the PCI-last GPU.
  const CpuLayout seen = select_gpus(l, visible_gpus(std::string("3,2"), 4).order);
  ASSERT_EQ(seen.gpus.size(), 2u);
  EXPECT_EQ(seen.gpus[0].index, 3);
  EXPECT_EQ(pus_of(seen, BindMode::kCore, 0, 2), (std::vector<int>{4, 5}));
  EXPECT_EQ(pus_of(seen, BindMode::kCore, 1, 2), (std::vector<int>{6, 7}));
  EXPECT_EQ(describe_gpu(seen, 0), "cuda:0 (PCI 0000:af:00.0, NUMA 1)");
  // Every GPU hidden: the plan without GPUs.
  const CpuLayout hidden = select_gpus(l, visible_gpus(std::string(""), 4).order);
  EXPECT_TRUE(hidden.gpus.empty());
  EXPECT_EQ(pus_of(hidden, BindMode::kCore, 1, 2), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(plan_cpus(hidden, BindMode::kCore, 1, 2)->gpu, -1);
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
