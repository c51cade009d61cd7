// The choice of transport for GPU tensors and of the hierarchical allreduce: pure
// functions, tested without a GPU.

#include "collectives/gpu_path.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace chorus {
namespace {

GpuPathInputs inputs(bool nccl, bool shared, bool aware, const char* requested = "") {
  GpuPathInputs in;
  in.nccl_built = nccl;
  in.gpu_shared = shared;
  in.mpi_cuda_aware = aware;
  in.requested = requested;
  return in;
}

TEST(GpuPath, NcclWhenBuiltAndEveryRankHasItsOwnGpu) {
  for (bool aware : {false, true}) {
    GpuPathChoice c = choose_gpu_path(inputs(true, false, aware));
    EXPECT_EQ(c.path, GpuPath::kNccl);
    EXPECT_NE(c.reason.find("NCCL"), std::string::npos);
  }
}

TEST(GpuPath, SharedGpuFallsBackToMpi) {
  GpuPathChoice staged = choose_gpu_path(inputs(true, true, false));
  EXPECT_EQ(staged.path, GpuPath::kMpiStaged);
  EXPECT_NE(staged.reason.find("share a GPU"), std::string::npos) << staged.reason;
  EXPECT_NE(staged.reason.find("pinned"), std::string::npos) << staged.reason;
  GpuPathChoice aware = choose_gpu_path(inputs(true, true, true));
  EXPECT_EQ(aware.path, GpuPath::kMpiCudaAware);
  EXPECT_NE(aware.reason.find("CUDA-aware"), std::string::npos) << aware.reason;
}

TEST(GpuPath, NoNcclInTheBuild) {
  EXPECT_EQ(choose_gpu_path(inputs(false, false, false)).path, GpuPath::kMpiStaged);
  EXPECT_EQ(choose_gpu_path(inputs(false, false, true)).path, GpuPath::kMpiCudaAware);
  EXPECT_NE(choose_gpu_path(inputs(false, false, false)).reason.find("no NCCL"), std::string::npos);
}

TEST(GpuPath, RequestedMpiWinsOverNccl) {
  GpuPathChoice c = choose_gpu_path(inputs(true, false, false, "mpi"));
  EXPECT_EQ(c.path, GpuPath::kMpiStaged);
  EXPECT_NE(c.reason.find("requested"), std::string::npos);
}

TEST(GpuPath, RequestedNcclThatCannotRunSaysSo) {
  GpuPathChoice c = choose_gpu_path(inputs(true, true, true, "nccl"));
  EXPECT_EQ(c.path, GpuPath::kMpiCudaAware);
  EXPECT_NE(c.reason.find("NCCL was requested"), std::string::npos) << c.reason;
  EXPECT_EQ(choose_gpu_path(inputs(true, false, false, "nccl")).path, GpuPath::kNccl);
}

TEST(GpuPath, Names) {
  EXPECT_STREQ(gpu_path_name(GpuPath::kNccl), "nccl");
  EXPECT_NE(std::string(gpu_path_name(GpuPath::kMpiStaged)).find("staged"), std::string::npos);
}

RankMap hosts_of(int hosts, int per_host, int rank) {
  std::vector<std::string> names;
  for (int h = 0; h < hosts; ++h) {
    for (int k = 0; k < per_host; ++k) names.push_back("node" + std::to_string(h));
  }
  return compute_rank_map(names, rank);
}

// CHORUS_HIERARCHICAL_ALLREDUCE as the decision sees it.
const std::optional<bool> kAuto = std::nullopt;
const std::optional<bool> kOn = true;
const std::optional<bool> kOff = false;

TEST(Hierarchical, OnForUniformMultiHostLayouts) {
  std::string why;
  for (GpuPath path : {GpuPath::kNccl, GpuPath::kMpiStaged, GpuPath::kMpiCudaAware}) {
    EXPECT_TRUE(use_hierarchical_allreduce(kOn, true, path, hosts_of(2, 4, 5), &why));
    EXPECT_NE(why.find("ppr:4:node"), std::string::npos) << why;
    EXPECT_NE(why.find("requested"), std::string::npos) << why;
  }
}

TEST(Hierarchical, AutomaticOnNcclForUniformMultiHostLayouts) {
  std::string why;
  EXPECT_TRUE(use_hierarchical_allreduce(kAuto, true, GpuPath::kNccl, hosts_of(2, 4, 1), &why));
  EXPECT_NE(why.find("automatic"), std::string::npos) << why;
  EXPECT_TRUE(use_hierarchical_allreduce(kAuto, true, GpuPath::kNccl, hosts_of(3, 2, 0), &why));
  EXPECT_TRUE(hierarchical_layout(hosts_of(3, 2, 0), &why));
  EXPECT_FALSE(hierarchical_layout(hosts_of(1, 8, 0), &why));
  EXPECT_FALSE(use_hierarchical_allreduce(kAuto, true, GpuPath::kNccl, hosts_of(1, 8, 0), &why));
}

TEST(Hierarchical, AutomaticStaysFlatOnMpi) {
  std::string why;
  for (GpuPath path : {GpuPath::kMpiStaged, GpuPath::kMpiCudaAware}) {
    EXPECT_FALSE(use_hierarchical_allreduce(kAuto, true, path, hosts_of(2, 4, 0), &why));
    EXPECT_NE(why.find("CHORUS_HIERARCHICAL_ALLREDUCE is unset"), std::string::npos) << why;
  }
}

TEST(Hierarchical, ZeroTurnsTheAutomaticChoiceOff) {
  // Where automatic would choose it (NCCL, uniform multi-host layout), 0 keeps it flat.
  std::string why;
  for (GpuPath path : {GpuPath::kNccl, GpuPath::kMpiStaged, GpuPath::kMpiCudaAware}) {
    for (int rank : {0, 3, 7}) {
      EXPECT_FALSE(use_hierarchical_allreduce(kOff, true, path, hosts_of(2, 4, rank), &why));
      EXPECT_NE(why.find("CHORUS_HIERARCHICAL_ALLREDUCE=0"), std::string::npos) << why;
    }
  }
  EXPECT_FALSE(use_hierarchical_allreduce(kOff, false, GpuPath::kNccl, hosts_of(2, 4, 0), &why));
  EXPECT_FALSE(use_hierarchical_allreduce(kOff, true, GpuPath::kNccl, hosts_of(1, 4, 0), &why));
}

TEST(Hierarchical, OffWithReasons) {
  std::string why;
  for (std::optional<bool> requested : {kAuto, kOn}) {
    EXPECT_FALSE(
        use_hierarchical_allreduce(requested, false, GpuPath::kNccl, hosts_of(2, 4, 0), &why));
    EXPECT_NE(why.find("global process set"), std::string::npos);
    EXPECT_FALSE(
        use_hierarchical_allreduce(requested, true, GpuPath::kNccl, hosts_of(1, 4, 0), &why));
    EXPECT_NE(why.find("one host"), std::string::npos);
    EXPECT_FALSE(
        use_hierarchical_allreduce(requested, true, GpuPath::kNccl, hosts_of(3, 1, 0), &why));
    EXPECT_NE(why.find("one rank per host"), std::string::npos);
    RankMap uneven = compute_rank_map({"a", "a", "b"}, 0);
    EXPECT_FALSE(use_hierarchical_allreduce(requested, true, GpuPath::kNccl, uneven, &why));
    EXPECT_NE(why.find("different numbers"), std::string::npos);
  }
}

TEST(Hierarchical, GroupsBuiltWhenTheSettingOrTheLayoutAsks) {
  // Unset: exactly where the layout allows it; 1: always (as before); 0: never.
  EXPECT_TRUE(hierarchical_groups_needed(kAuto, hosts_of(2, 4, 0)));
  EXPECT_FALSE(hierarchical_groups_needed(kAuto, hosts_of(1, 4, 0)));
  EXPECT_FALSE(hierarchical_groups_needed(kAuto, hosts_of(4, 1, 0)));
  EXPECT_TRUE(hierarchical_groups_needed(kOn, hosts_of(2, 4, 0)));
  EXPECT_TRUE(hierarchical_groups_needed(kOn, hosts_of(1, 4, 0)));
  EXPECT_FALSE(hierarchical_groups_needed(kOff, hosts_of(2, 4, 0)));
  EXPECT_FALSE(hierarchical_groups_needed(kOff, hosts_of(1, 4, 0)));
}

}  // namespace
}  // namespace chorus
