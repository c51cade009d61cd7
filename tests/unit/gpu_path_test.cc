// The choice of transport for GPU tensors and of the hierarchical allreduce: pure
// functions, tested without a GPU.

#include "collectives/gpu_path.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace chorus {
namespace {

GpuPathInputs inputs(bool nccl, bool shared,
                     GpuBackendRequest requested = GpuBackendRequest::kAuto) {
  GpuPathInputs in;
  in.nccl_built = nccl;
  in.gpu_shared = shared;
  in.shared_by = shared ? "ranks 0 and 1" : "";
  in.requested = requested;
  return in;
}

// The choice, failing the test when there is none.
GpuPathChoice choose(const GpuPathInputs& in) {
  StatusOr<GpuPathChoice> c = choose_gpu_path(in);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : GpuPathChoice{};
}

constexpr GpuBackendRequest kAutoPath = GpuBackendRequest::kAuto;
constexpr GpuBackendRequest kNcclPath = GpuBackendRequest::kNccl;
constexpr GpuBackendRequest kMpiPath = GpuBackendRequest::kMpi;

TEST(GpuPath, NcclWhenBuiltAndEveryRankHasItsOwnGpu) {
  GpuPathChoice c = choose(inputs(true, false));
  EXPECT_EQ(c.path, GpuPath::kNccl);
  EXPECT_NE(c.reason.find("NCCL"), std::string::npos);
  EXPECT_NE(c.reason.find("CHORUS_GPU_BACKEND=auto"), std::string::npos) << c.reason;
}

// Staged through host memory, whatever the MPI library's CUDA support: the host backend's
// non-blocking collectives take no device pointers.
TEST(GpuPath, SharedGpuFallsBackToStagedMpi) {
  GpuPathChoice staged = choose(inputs(true, true));
  EXPECT_EQ(staged.path, GpuPath::kMpiStaged);
  EXPECT_NE(staged.reason.find("share a GPU"), std::string::npos) << staged.reason;
  EXPECT_NE(staged.reason.find("ranks 0 and 1"), std::string::npos) << staged.reason;
  EXPECT_NE(staged.reason.find("pinned"), std::string::npos) << staged.reason;
}

TEST(GpuPath, NoNcclInTheBuild) {
  EXPECT_EQ(choose(inputs(false, false)).path, GpuPath::kMpiStaged);
  EXPECT_NE(choose(inputs(false, false)).reason.find("no NCCL"), std::string::npos);
}

TEST(GpuPath, ForcedMpiWinsOverNccl) {
  for (bool shared : {false, true}) {
    GpuPathChoice c = choose(inputs(true, shared, kMpiPath));
    EXPECT_EQ(c.path, GpuPath::kMpiStaged);
    EXPECT_NE(c.reason.find("CHORUS_GPU_BACKEND=mpi"), std::string::npos) << c.reason;
  }
  EXPECT_EQ(choose(inputs(false, false, kMpiPath)).path, GpuPath::kMpiStaged);
}

TEST(GpuPath, ForcedNcclRunsWhereItCan) {
  GpuPathChoice c = choose(inputs(true, false, kNcclPath));
  EXPECT_EQ(c.path, GpuPath::kNccl);
  EXPECT_NE(c.reason.find("CHORUS_GPU_BACKEND=nccl"), std::string::npos) << c.reason;
}

TEST(GpuPath, ForcedNcclThatCannotRunFailsInsteadOfFallingBack) {
  StatusOr<GpuPathChoice> shared = choose_gpu_path(inputs(true, true, kNcclPath));
  ASSERT_FALSE(shared.ok()) << "ran " << gpu_path_name(shared->path);
  EXPECT_EQ(shared.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(shared.status().message().find("CHORUS_GPU_BACKEND=nccl"), std::string::npos)
      << shared.status().message();
  EXPECT_NE(shared.status().message().find("ranks 0 and 1"), std::string::npos)
      << shared.status().message();
  StatusOr<GpuPathChoice> unbuilt = choose_gpu_path(inputs(false, false, kNcclPath));
  ASSERT_FALSE(unbuilt.ok());
  EXPECT_EQ(unbuilt.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(unbuilt.status().message().find("no NCCL"), std::string::npos)
      << unbuilt.status().message();
}

// CHORUS_TEST_SHARED_GPU=1: NCCL on a shared GPU, auto or forced, the reason naming the test
// mode; MPI when asked for; still no NCCL in a build without it.
TEST(GpuPath, TestModeRunsNcclOnASharedGpu) {
  for (GpuBackendRequest requested : {kAutoPath, kNcclPath}) {
    GpuPathInputs in = inputs(true, true, requested);
    in.shared_gpu_nccl = true;
    GpuPathChoice c = choose(in);
    EXPECT_EQ(c.path, GpuPath::kNccl) << c.reason;
    EXPECT_NE(c.reason.find("CHORUS_TEST_SHARED_GPU=1"), std::string::npos) << c.reason;
    EXPECT_NE(c.reason.find("ranks 0 and 1"), std::string::npos) << c.reason;
  }
  GpuPathInputs mpi = inputs(true, true, kMpiPath);
  mpi.shared_gpu_nccl = true;
  EXPECT_EQ(choose(mpi).path, GpuPath::kMpiStaged);
  GpuPathInputs unbuilt = inputs(false, true);
  unbuilt.shared_gpu_nccl = true;
  EXPECT_EQ(choose(unbuilt).path, GpuPath::kMpiStaged);
  GpuPathInputs own = inputs(true, false);
  own.shared_gpu_nccl = true;
  EXPECT_EQ(choose(own).reason.find("TEST"), std::string::npos) << "no GPU is shared";
}

TEST(GpuPath, ParseAndNameTheSetting) {
  const std::pair<const char*, GpuBackendRequest> good[] = {
      {"", kAutoPath}, {"auto", kAutoPath}, {"nccl", kNcclPath}, {"mpi", kMpiPath}};
  for (const auto& [text, value] : good) {
    StatusOr<GpuBackendRequest> got = kGpuBackendWords.parse(text, "CHORUS_GPU_BACKEND");
    ASSERT_TRUE(got.ok()) << "'" << text << "': " << got.status().to_string();
    EXPECT_EQ(*got, value) << text;
  }
  for (GpuBackendRequest r : {kAutoPath, kNcclPath, kMpiPath}) {
    StatusOr<GpuBackendRequest> back = kGpuBackendWords.parse(kGpuBackendWords.name(r), "X");
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, r);
  }
  for (const char* bad : {"NCCL", "gloo", "mpi ", "1"}) {
    StatusOr<GpuBackendRequest> got = kGpuBackendWords.parse(bad, "CHORUS_GPU_BACKEND");
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(got.status().message().find("CHORUS_GPU_BACKEND"), std::string::npos);
    EXPECT_NE(got.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << got.status().message();
    EXPECT_NE(got.status().message().find("auto, nccl or mpi"), std::string::npos);
  }
}

TEST(GpuPath, MembersAgreeOnTheSetting) {
  for (GpuBackendRequest r : {kAutoPath, kNcclPath, kMpiPath}) {
    for (int n : {1, 2, 3}) {
      StatusOr<GpuBackendRequest> got =
          agree_gpu_backend(std::vector<GpuBackendRequest>(n, r), "global");
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_EQ(*got, r);
    }
  }
}

TEST(GpuPath, MembersThatDisagreeFailNamingValuesAndRanks) {
  StatusOr<GpuBackendRequest> got =
      agree_gpu_backend({kAutoPath, kNcclPath, kAutoPath, kMpiPath, kNcclPath}, "set 2");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kMismatch);
  const std::string& m = got.status().message();
  EXPECT_NE(m.find("set 2"), std::string::npos) << m;
  EXPECT_NE(m.find("CHORUS_GPU_BACKEND"), std::string::npos) << m;
  EXPECT_NE(m.find("auto on ranks 0, 2"), std::string::npos) << m;
  EXPECT_NE(m.find("nccl on ranks 1, 4"), std::string::npos) << m;
  EXPECT_NE(m.find("mpi on rank 3"), std::string::npos) << m;
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

const GpuPath kPaths[] = {GpuPath::kNccl, GpuPath::kMpiStaged};

TEST(Hierarchical, OnWhenRequestedForUniformMultiHostLayouts) {
  for (GpuPath path : kPaths) {
    const GpuHierarchy h = gpu_hierarchy(kOn, true, path, hosts_of(2, 4, 5));
    EXPECT_TRUE(h.on) << h.reason;
    EXPECT_NE(h.reason.find("ppr:4:node"), std::string::npos) << h.reason;
    EXPECT_NE(h.reason.find("requested"), std::string::npos) << h.reason;
    EXPECT_NE(h.reason.find(gpu_path_name(path)), std::string::npos) << h.reason;
  }
  EXPECT_TRUE(gpu_hierarchy(kOn, true, GpuPath::kNccl, hosts_of(3, 2, 0)).on);
  std::string why;
  EXPECT_TRUE(hierarchical_layout(hosts_of(3, 2, 0), &why));
  EXPECT_FALSE(hierarchical_layout(hosts_of(1, 8, 0), &why));
}

// Both levels take the set's path: on NCCL the cross step is a NCCL communicator too, so no
// shard is copied to the host and reduced there by MPI.
TEST(Hierarchical, BothLevelsUseTheSetsPath) {
  for (GpuPath path : kPaths) {
    const GpuHierarchy h = gpu_hierarchy(kOn, true, path, hosts_of(2, 4, 1));
    ASSERT_TRUE(h.on) << h.reason;
    EXPECT_EQ(h.local, path) << gpu_path_name(path);
    EXPECT_EQ(h.cross, path) << gpu_path_name(path);
  }
}

// Unset: flat on every GPU path, NCCL included, even where the layout allows the hierarchy
// (and host memory takes it).
TEST(Hierarchical, UnsetIsFlatOnEveryPath) {
  for (GpuPath path : kPaths) {
    for (int rank : {0, 3, 7}) {
      const GpuHierarchy h = gpu_hierarchy(kAuto, true, path, hosts_of(2, 4, rank));
      EXPECT_FALSE(h.on) << h.reason;
      EXPECT_NE(h.reason.find("CHORUS_HIERARCHICAL_ALLREDUCE is unset"), std::string::npos)
          << h.reason;
      EXPECT_NE(h.reason.find("set it to 1"), std::string::npos) << h.reason;
    }
  }
  std::string why;
  EXPECT_TRUE(use_hierarchical_host_allreduce(kAuto, true, hosts_of(2, 4, 0), &why)) << why;
}

TEST(Hierarchical, ZeroKeepsItFlat) {
  for (GpuPath path : kPaths) {
    for (int rank : {0, 3, 7}) {
      const GpuHierarchy h = gpu_hierarchy(kOff, true, path, hosts_of(2, 4, rank));
      EXPECT_FALSE(h.on);
      EXPECT_NE(h.reason.find("CHORUS_HIERARCHICAL_ALLREDUCE=0"), std::string::npos) << h.reason;
    }
  }
  EXPECT_FALSE(gpu_hierarchy(kOff, false, GpuPath::kNccl, hosts_of(2, 4, 0)).on);
  EXPECT_FALSE(gpu_hierarchy(kOff, true, GpuPath::kNccl, hosts_of(1, 4, 0)).on);
}

TEST(Hierarchical, RequestedButNotPossibleSaysWhy) {
  auto why_not = [](bool global_set, const RankMap& map) {
    const GpuHierarchy h = gpu_hierarchy(kOn, global_set, GpuPath::kNccl, map);
    EXPECT_FALSE(h.on) << h.reason;
    return h.reason;
  };
  EXPECT_NE(why_not(false, hosts_of(2, 4, 0)).find("global process set"), std::string::npos);
  EXPECT_NE(why_not(true, hosts_of(1, 4, 0)).find("one host"), std::string::npos);
  EXPECT_NE(why_not(true, hosts_of(3, 1, 0)).find("one rank per host"), std::string::npos);
  EXPECT_NE(why_not(true, compute_rank_map({"a", "a", "b"}, 0)).find("different numbers"),
            std::string::npos);
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
