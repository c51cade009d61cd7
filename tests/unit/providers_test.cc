// Unit tests of the provider registry (src/collectives/providers.h): the one order of each
// memory's providers, and the choice assemble() makes of them for a set: shared memory only
// on one host and only where allowed, the hierarchical allreduce only for the global set
// across hosts, NCCL only on the agreed NCCL path, and the last provider always.
#include "collectives/providers.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/topology_groups.h"
#include "common/recording_backend.h"
#include "topology/rank_map.h"

namespace chorus::testing {
namespace {

std::vector<std::string> names_of(Memory memory) {
  std::vector<std::string> out;
  for (const Provider& p : provider_registry()) {
    if (p.memory == memory) out.push_back(p.name);
  }
  return out;
}

TEST(ProvidersTest, EachMemoryHasOneOrderEndingWithWhatServesEverything) {
  EXPECT_EQ(
      names_of(Memory::kHost),
      (std::vector<std::string>{"hierarchical allreduce", "shared memory", "the set's group"}));
  EXPECT_EQ(names_of(Memory::kGpu),
            (std::vector<std::string>{"hierarchical allreduce", "nccl", "staged"}));
}

// Serves reductions only, as the shared-memory provider does.
class Reductions final : public Backend {
 public:
  Reductions(int rank, int size) : rank_(rank), size_(size) {}
  const char* name() const override { return "reductions"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool serves(Collective c, DataType) const override {
    return c == Collective::kAllreduce || c == Collective::kReducescatter;
  }

 private:
  int rank_;
  int size_;
};

// A group whose own backend records calls and whose shared memory is a Reductions backend;
// it counts how often its shared memory was asked for. The providers never use its control.
class FakeGroup final : public Group {
 public:
  FakeGroup(int rank, int size) : own_(rank, size) {}
  int rank() const override { return own_.rank(); }
  int size() const override { return own_.size(); }
  ControlTransport& control() override {
    ADD_FAILURE() << "a provider used the group's control transport";
    std::abort();
  }
  Backend& backend() override { return own_; }
  StatusOr<std::unique_ptr<Backend>> shared_memory(std::string*) override {
    ++shared_asked;
    auto b = std::make_unique<Reductions>(own_.rank(), own_.size());
    shared = b.get();
    return std::unique_ptr<Backend>(std::move(b));
  }

  int shared_asked = 0;
  Backend* shared = nullptr;

 private:
  RecordingBackend own_;
};

ProviderSet host_set(FakeGroup& group, const RankMap& map, std::vector<int> ranks) {
  ProviderSet set;
  set.label = "set 1";
  set.ranks = std::move(ranks);
  set.map = &map;
  set.group = &group;
  return set;
}

TEST(ProvidersTest, ASetOnOneHostReducesThroughSharedMemoryAndMovesBytesOnItsGroup) {
  const RankMap map = compute_rank_map({"a", "a", "a"}, 0);
  FakeGroup group(0, 3);
  StatusOr<BackendChoice> choice = assemble(Memory::kHost, host_set(group, map, {0, 1, 2}));
  ASSERT_TRUE(choice.ok()) << choice.status().to_string();
  EXPECT_EQ(group.shared_asked, 1);
  EXPECT_EQ(&choice->pick(Collective::kAllreduce, DataType::kFloat32), group.shared);
  EXPECT_EQ(&choice->pick(Collective::kAllgather, DataType::kUInt8), &group.backend());
  EXPECT_EQ(&choice->own(), &group.backend());
  EXPECT_TRUE(choice->offered_by("shared memory"));
  EXPECT_FALSE(choice->offered_by("hierarchical allreduce"));
}

TEST(ProvidersTest, SharedMemoryIsNotAskedForWhenOffOrAcrossHostsOrAlone) {
  const RankMap two_hosts = compute_rank_map({"a", "b"}, 0);
  const RankMap one_host = compute_rank_map({"a", "a"}, 0);
  FakeGroup across(0, 2);
  FakeGroup off(0, 2);
  FakeGroup alone(0, 1);
  ProviderSet shm_off = host_set(off, one_host, {0, 1});
  shm_off.shared_memory = false;
  for (auto [group, set] :
       {std::pair{&across, host_set(across, two_hosts, {0, 1})}, std::pair{&off, shm_off},
        std::pair{&alone, host_set(alone, one_host, {0})}}) {
    StatusOr<BackendChoice> choice = assemble(Memory::kHost, set);
    ASSERT_TRUE(choice.ok()) << choice.status().to_string();
    EXPECT_EQ(&choice->pick(Collective::kAllreduce, DataType::kFloat32), &group->backend());
    EXPECT_FALSE(choice->offered_by("shared memory"));
  }
  EXPECT_EQ(across.shared_asked + alone.shared_asked, 0);
}

// Two hosts of two ranks; this is rank 0. The topology groups' choices are the test's.
struct TwoByTwo {
  RankMap map = compute_rank_map({"a", "a", "b", "b"}, 0);
  RecordingBackend local{0, 2};
  RecordingBackend cross{0, 2};
  TopologyGroups groups;
  FakeGroup global{0, 4};
  TwoByTwo() {
    groups.local_host = std::make_unique<BackendChoice>("local group", &local, "local");
    groups.cross_host = std::make_unique<BackendChoice>("cross group", &cross, "cross");
  }
  ProviderSet set() {
    ProviderSet s = host_set(global, map, {0, 1, 2, 3});
    s.label = "global";
    s.global_set = true;
    s.groups = &groups;
    return s;
  }
};

TEST(ProvidersTest, TheGlobalSetAcrossHostsAllreducesHierarchicallyUnlessAskedNotTo) {
  TwoByTwo job;
  StatusOr<BackendChoice> on = assemble(Memory::kHost, job.set());
  ASSERT_TRUE(on.ok()) << on.status().to_string();
  EXPECT_STREQ(on->pick(Collective::kAllreduce, DataType::kFloat32).name(), "hierarchical");
  EXPECT_EQ(&on->pick(Collective::kBroadcast, DataType::kUInt8), &job.global.backend());
  float x[4] = {1, 2, 3, 4};
  ASSERT_TRUE(on->allreduce(x, x, 4, DataType::kFloat32, ReduceOp::kSum, {}).ok());
  EXPECT_EQ(job.local.calls().front().op, "reducescatter") << "the local level runs first";
  EXPECT_EQ(job.cross.calls().front().op, "allreduce");

  ProviderSet flat = job.set();
  flat.hierarchical = false;
  StatusOr<BackendChoice> off = assemble(Memory::kHost, flat);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(&off->pick(Collective::kAllreduce, DataType::kFloat32), &job.global.backend());

  ProviderSet subset = job.set();
  subset.global_set = false;
  StatusOr<BackendChoice> sub = assemble(Memory::kHost, subset);
  ASSERT_TRUE(sub.ok());
  EXPECT_FALSE(sub->offered_by("hierarchical allreduce"));
}

TEST(ProvidersTest, TheHierarchyWithoutItsGroupsFailsByName) {
  TwoByTwo job;
  ProviderSet set = job.set();
  set.groups = nullptr;
  StatusOr<BackendChoice> choice = assemble(Memory::kHost, set);
  ASSERT_FALSE(choice.ok());
  EXPECT_NE(choice.status().message().find("global: the hierarchy has no local and cross groups"),
            std::string::npos)
      << choice.status().message();
}

// The GPU maker of the tests: each backend it makes records calls; it notes what it was asked
// to make, over which host backends.
class FakeMaker final : public GpuMaker {
 public:
  std::unique_ptr<Backend> staged(Backend& host) override {
    made.push_back("staged over " + std::to_string(host.size()));
    return std::make_unique<RecordingBackend>(host.rank(), host.size());
  }
  StatusOr<std::unique_ptr<Backend>> nccl(Backend& host, const std::string& label) override {
    made.push_back("nccl " + label);
    if (label == fail) return internal_error(label + ": ncclCommInitRank failed");
    return std::unique_ptr<Backend>(std::make_unique<Reductions>(host.rank(), host.size()));
  }
  void keep(std::unique_ptr<Backend> backend) override { kept.push_back(std::move(backend)); }
  std::vector<std::string> made;
  std::vector<std::unique_ptr<Backend>> kept;  ///< what a failed assembly handed back
  std::string fail;                            ///< the label of the communicator that fails here
};

struct GpuSet {
  TwoByTwo job;
  RecordingBackend host{0, 4};
  FakeMaker maker;
  GpuPathChoice path;
  ProviderSet set(GpuPath p, std::optional<bool> hierarchical) {
    path.path = p;
    path.reason = "the test's path";
    ProviderSet s = job.set();
    s.group = nullptr;
    s.hierarchical = hierarchical;
    s.host = &host;
    s.gpu = &maker;
    s.gpu_path = &path;
    s.set_name = "global (ranks [0, 1, 2, 3])";
    // Every member's NCCL communicator was made (agree_on_success's exchange).
    host.set_peer([](int, void* block, int64_t bytes) { std::memset(block, 1, bytes); });
    return s;
  }
};

TEST(ProvidersTest, OnTheStagedPathEveryGpuCollectiveIsStaged) {
  GpuSet gpu;
  StatusOr<BackendChoice> choice = assemble(Memory::kGpu, gpu.set(GpuPath::kMpiStaged, {}));
  ASSERT_TRUE(choice.ok()) << choice.status().to_string();
  EXPECT_EQ(gpu.maker.made, (std::vector<std::string>{"staged over 4"}));
  EXPECT_STREQ(choice->pick(Collective::kAllreduce, DataType::kFloat32).name(), "recording");
}

TEST(ProvidersTest, OnTheNcclPathNcclRunsWhatItServesAndTheStagedPathTheRest) {
  GpuSet gpu;
  StatusOr<BackendChoice> choice = assemble(Memory::kGpu, gpu.set(GpuPath::kNccl, {}));
  ASSERT_TRUE(choice.ok()) << choice.status().to_string();
  EXPECT_EQ(gpu.maker.made,
            (std::vector<std::string>{"staged over 4", "nccl global (ranks [0, 1, 2, 3])"}));
  EXPECT_STREQ(choice->pick(Collective::kAllreduce, DataType::kFloat32).name(), "reductions");
  EXPECT_STREQ(choice->pick(Collective::kAllgather, DataType::kUInt8).name(), "recording");
  EXPECT_FALSE(choice->offered_by("hierarchical allreduce"));
}

TEST(ProvidersTest, AskedForTheGpuHierarchyBothLevelsAreNcclOverTheTopologyGroups) {
  GpuSet gpu;
  StatusOr<BackendChoice> choice = assemble(Memory::kGpu, gpu.set(GpuPath::kNccl, true));
  ASSERT_TRUE(choice.ok()) << choice.status().to_string();
  EXPECT_EQ(gpu.maker.made,
            (std::vector<std::string>{"staged over 4", "nccl global (ranks [0, 1, 2, 3])",
                                      "nccl global/local", "nccl global/cross"}));
  EXPECT_STREQ(choice->pick(Collective::kAllreduce, DataType::kFloat32).name(), "hierarchical");
  EXPECT_TRUE(choice->offered_by("hierarchical allreduce"));
}

// A level made by some members only: its outcome is agreed over the whole set, so a level that
// failed here fails here by its own message, and where it failed elsewhere, by the ranks.
TEST(ProvidersTest, ALevelThatFailsOnAnyMemberFailsTheAssemblyByName) {
  GpuSet here;
  ProviderSet set = here.set(GpuPath::kNccl, true);
  here.maker.fail = "global/local";
  StatusOr<BackendChoice> choice = assemble(Memory::kGpu, set);
  ASSERT_FALSE(choice.ok());
  EXPECT_NE(choice.status().message().find("global/local: ncclCommInitRank failed"),
            std::string::npos)
      << choice.status().message();
  // The staged backend and the flat communicator, made before the level failed, are the
  // maker's to destroy, not the failed assembly's.
  EXPECT_EQ(here.maker.kept.size(), 2u);

  GpuSet elsewhere;
  set = elsewhere.set(GpuPath::kNccl, true);
  elsewhere.host.set_peer(
      [](int rank, void* block, int64_t bytes) { std::memset(block, rank == 2 ? 0 : 1, bytes); });
  choice = assemble(Memory::kGpu, set);
  ASSERT_FALSE(choice.ok());
  EXPECT_NE(
      choice.status().message().find("global/local: its NCCL communicator failed on rank(s) 2"),
      std::string::npos)
      << choice.status().message();
}

}  // namespace
}  // namespace chorus::testing
