// Unit tests of the launcher cross-check (src/topology/launcher_view.h): which variables are
// compared, which are skipped as another job's, and that a warning names the variable.
#include "topology/launcher_view.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/env_map.h"

namespace chorus {
namespace {

using Env = testing::EnvMap;
using testing::lookup;

// 4 ranks, ppr:2:node on hosts n1, n2; rank 3 is local rank 1 on n2.
const std::vector<std::string> kNames = {"n1", "n1", "n2", "n2"};

LauncherCheck check_rank3(const Env& env) {
  return check_launcher_view(compute_rank_map(kNames, 3), 3, 4, lookup(env));
}

bool any_contains(const std::vector<std::string>& lines, const std::string& what) {
  for (const std::string& l : lines) {
    if (l.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(LauncherViewTest, NoVariablesNoWarnings) {
  LauncherCheck c = check_rank3({});
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_TRUE(c.notes.empty());
}

TEST(LauncherViewTest, AgreeingOpenMpiVariablesAreNoted) {
  LauncherCheck c = check_rank3({{"OMPI_COMM_WORLD_SIZE", "4"},
                                 {"OMPI_COMM_WORLD_RANK", "3"},
                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                 {"PMIX_RANK", "3"}});
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
  EXPECT_TRUE(any_contains(c.notes, "Open MPI: 4 variable(s) agree"));
  EXPECT_TRUE(any_contains(c.notes, "PMIx: 1 variable(s) agree"));
}

TEST(LauncherViewTest, DisagreeingLocalRankIsNamed) {
  LauncherCheck c = check_rank3({{"OMPI_COMM_WORLD_SIZE", "4"},
                                 {"OMPI_COMM_WORLD_RANK", "3"},
                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}});
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("OMPI_COMM_WORLD_LOCAL_RANK=3 disagrees with local_rank 1"),
            std::string::npos)
      << c.warnings[0];
  EXPECT_NE(c.warnings[0].find("host 'n2'"), std::string::npos) << c.warnings[0];
}

TEST(LauncherViewTest, PmixRankWithoutSizeVariableIsAlwaysCompared) {
  LauncherCheck c = check_rank3({{"PMIX_RANK", "0"}});
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("PMIX_RANK=0 disagrees with rank 3"), std::string::npos);
}

TEST(LauncherViewTest, SlurmStepOfThisJobIsCompared) {
  // srun --ntasks-per-node 2 whose SLURM_LOCALID disagrees (e.g. a cyclic distribution
  // that the host names contradict).
  LauncherCheck c =
      check_rank3({{"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_PROCID", "3"}, {"SLURM_LOCALID", "0"}});
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("SLURM_LOCALID=0 disagrees with local_rank 1"), std::string::npos);
}

TEST(LauncherViewTest, SlurmVariablesOfAnotherStepAreSkipped) {
  // mpirun inside sbatch: the ranks inherit the variables of the step that started
  // mpirun's daemons (one task per node), which say nothing about the ranks.
  LauncherCheck c =
      check_rank3({{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "0"}});
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_TRUE(any_contains(c.notes, "SLURM_STEP_NUM_TASKS=2 describes another job"));
}

TEST(LauncherViewTest, SlurmVariablesWithoutStepSizeAreSkipped) {
  // The batch script's own environment: SLURM_PROCID=0 everywhere, no step size.
  LauncherCheck c = check_rank3({{"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}});
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_TRUE(any_contains(c.notes, "SLURM_STEP_NUM_TASKS is not set"));
}

TEST(LauncherViewTest, UnreadableValueIsAWarning) {
  LauncherCheck c = check_rank3({{"MV2_COMM_WORLD_SIZE", "4"}, {"MV2_COMM_WORLD_RANK", "three"}});
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("MV2_COMM_WORLD_RANK='three' is not a non-negative integer"),
            std::string::npos);
}

TEST(LauncherViewTest, MpichLocalSize) {
  LauncherCheck c = check_rank3(
      {{"PMI_SIZE", "4"}, {"PMI_RANK", "3"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "4"}});
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("MPI_LOCALNRANKS=4 disagrees with local_size 2"), std::string::npos);
}

TEST(LauncherViewTest, WrongJobSizeOfALauncherWithSizeIsNotCompared) {
  LauncherCheck c = check_rank3({{"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_RANK", "7"}});
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_TRUE(any_contains(c.notes, "OMPI_COMM_WORLD_SIZE=8 describes another job"));
}

}  // namespace
}  // namespace chorus
