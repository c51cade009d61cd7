// Unit tests of chorusrun's parsers and planner (launch/): host lists, hostfiles, Slurm's
// compressed lists, SGE and PBS files, the rank plan and the launcher command.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocation.h"
#include "cli.h"
#include "command.h"
#include "host_list.h"
#include "parse_util.h"
#include "plan.h"
#include "slurm_lists.h"

namespace chorus::launch {
namespace {

using Names = std::vector<std::string>;
using Hosts = std::vector<Host>;

template <class T>
std::string error_of(const StatusOr<T>& s) {
  return s.ok() ? "(no error)" : s.status().message();
}

TEST(HostListTest, SlotsAndBareNames) {
  EXPECT_EQ(*parse_host_list("a:4,b:4"), (Hosts{{"a", 4}, {"b", 4}}));
  EXPECT_EQ(*parse_host_list("node-1.example.org"), (Hosts{{"node-1.example.org", 1}}));
  EXPECT_EQ(format_host_list({{"a", 4}, {"b", 1}}), "a:4,b:1");
}

TEST(HostListTest, Errors) {
  EXPECT_EQ(error_of(parse_host_list("a:4,,b:4")), "-H 'a:4,,b:4': empty host name");
  EXPECT_EQ(error_of(parse_host_list("a:x")), "-H 'a:x', host 'a': 'x' is not a positive integer");
  EXPECT_EQ(error_of(parse_host_list("a:0")), "-H 'a:0', host 'a': '0' is not a positive integer");
  EXPECT_EQ(error_of(parse_host_list("a:2,a:2")), "-H 'a:2,a:2': host 'a' is listed twice");
  EXPECT_EQ(error_of(parse_host_list("a b:2")), "-H 'a b:2': bad host name 'a b'");
  EXPECT_EQ(error_of(parse_host_list("")), "-H '' lists no hosts");
}

TEST(HostfileTest, Forms) {
  const std::string text =
      "# cluster\n"
      "a slots=4\n"
      "b:2   # two\n"
      "\n"
      "c\n"
      "c\n"
      "d slots=8 max_slots=16\n";
  EXPECT_EQ(*parse_hostfile(text, "h.txt"), (Hosts{{"a", 4}, {"b", 2}, {"c", 2}, {"d", 8}}));
}

TEST(HostfileTest, Errors) {
  EXPECT_EQ(error_of(parse_hostfile("a slots=four\n", "h.txt")),
            "h.txt line 1 (slots=): 'four' is not a positive integer");
  EXPECT_EQ(error_of(parse_hostfile("a\nb cpus=2\n", "h.txt")),
            "h.txt line 2: unknown field 'cpus=2' (expected slots=N)");
  EXPECT_EQ(error_of(parse_hostfile("# nothing\n\n", "h.txt")), "h.txt lists no hosts");
}

TEST(PeHostfileTest, SgeAndAbci) {
  const std::string text =
      "g0001.abci.local 80 gpu@g0001.abci.local UNDEFINED\n"
      "g0002.abci.local 80 gpu@g0002.abci.local UNDEFINED\n";
  EXPECT_EQ(*parse_pe_hostfile(text, "PE_HOSTFILE"),
            (Hosts{{"g0001.abci.local", 80}, {"g0002.abci.local", 80}}));
  EXPECT_EQ(error_of(parse_pe_hostfile("g0001\n", "PE_HOSTFILE")),
            "PE_HOSTFILE line 1: expected 'host slots queue processors', got 'g0001'");
}

TEST(PbsNodefileTest, RepeatedNamesAreSlots) {
  EXPECT_EQ(*parse_pbs_nodefile("n1\nn1\nn2\nn1\nn2\n", "PBS_NODEFILE"),
            (Hosts{{"n1", 3}, {"n2", 2}}));
  EXPECT_EQ(error_of(parse_pbs_nodefile("n1 extra\n", "PBS_NODEFILE")),
            "PBS_NODEFILE line 1: expected one host name per line");
}

TEST(SlurmListsTest, Nodelist) {
  EXPECT_EQ(*expand_nodelist("n1", "L"), (Names{"n1"}));
  EXPECT_EQ(*expand_nodelist("n[1-3]", "L"), (Names{"n1", "n2", "n3"}));
  EXPECT_EQ(*expand_nodelist("gpu[08-10,12],login", "L"),
            (Names{"gpu08", "gpu09", "gpu10", "gpu12", "login"}));
  EXPECT_EQ(*expand_nodelist("r[1-2]-n[1-2]", "L"), (Names{"r1-n1", "r1-n2", "r2-n1", "r2-n2"}));
  EXPECT_EQ(*expand_nodelist("a[001-002],b[7]", "L"), (Names{"a001", "a002", "b7"}));
}

TEST(SlurmListsTest, NodelistErrors) {
  EXPECT_EQ(error_of(expand_nodelist("n[1-3", "SLURM_JOB_NODELIST")),
            "SLURM_JOB_NODELIST='n[1-3': unbalanced brackets");
  EXPECT_EQ(error_of(expand_nodelist("n[3-1]", "L")), "L='n[3-1]': range '3-1' runs backwards");
  EXPECT_EQ(error_of(expand_nodelist("n[a-b]", "L")), "L='n[a-b]': bad range 'a-b' in [a-b]");
  EXPECT_EQ(error_of(expand_nodelist("n[]", "L")), "L='n[]': empty brackets");
  EXPECT_EQ(error_of(expand_nodelist("n[[1]]", "L")), "L='n[[1]]': unbalanced brackets");
  EXPECT_EQ(error_of(expand_nodelist("a,,b", "L")), "L='a,,b': empty host name");
  EXPECT_FALSE(expand_nodelist("n[1-99999999]", "L").ok());
}

TEST(SlurmListsTest, Counts) {
  EXPECT_EQ(*expand_counts("2(x3),1", "T"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*expand_counts("4", "T"), (std::vector<int>{4}));
  EXPECT_EQ(*expand_counts("1,2(x2)", "T"), (std::vector<int>{1, 2, 2}));
  EXPECT_EQ(error_of(expand_counts("2(3)", "SLURM_TASKS_PER_NODE")),
            "SLURM_TASKS_PER_NODE='2(3)': bad item '2(3)' (expected N or N(xM))");
  EXPECT_EQ(error_of(expand_counts("2(x0)", "T")), "T='2(x0)': '0' is not a positive integer");
}

StatusOr<std::string> no_files(const std::string& path) {
  return invalid_argument("cannot read '" + path + "'");
}

TEST(AllocationTest, SlurmUsesTasksPerNode) {
  Env env = {{"SLURM_JOB_ID", "7"},
             {"SLURM_JOB_NODELIST", "n[1-3]"},
             {"SLURM_TASKS_PER_NODE", "2(x3)"},
             {"SLURM_JOB_CPUS_PER_NODE", "8(x3)"}};
  StatusOr<Allocation> a = find_allocation({}, env, no_files);
  ASSERT_TRUE(a.ok()) << error_of(a);
  EXPECT_TRUE(a->slurm);
  EXPECT_EQ(a->hosts, (Hosts{{"n1", 2}, {"n2", 2}, {"n3", 2}}));
}

TEST(AllocationTest, SlurmCountMismatchNamesBothVariables) {
  Env env = {{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}};
  EXPECT_EQ(error_of(find_allocation({}, env, no_files)),
            "SLURM_TASKS_PER_NODE='2(x2)' gives 2 nodes but SLURM_JOB_NODELIST='n[1-3]' lists 3");
}

TEST(AllocationTest, CommandLineWinsOverTheAllocation) {
  Env env = {{"SLURM_JOB_NODELIST", "n[1-3]"}};
  StatusOr<Allocation> a = find_allocation({"x:2", "", "", 1}, env, no_files);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->source, "-H");
  EXPECT_EQ(a->hosts, (Hosts{{"x", 2}}));
}

TEST(AllocationTest, UnreadablePeHostfile) {
  Env env = {{"PE_HOSTFILE", "/nonexistent/pe"}};
  EXPECT_EQ(error_of(find_allocation({}, env, no_files)),
            "SGE (PE_HOSTFILE=/nonexistent/pe): cannot read '/nonexistent/pe'");
}

TEST(AllocationTest, NoAllocationIsThisHost) {
  StatusOr<Allocation> a = find_allocation({"", "", "me", 8}, {}, no_files);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->hosts, (Hosts{{"me", 8}}));
}

Allocation two_by_four() { return Allocation{"-H", {{"a", 4}, {"b", 4}}, false, false}; }

TEST(PlanTest, PprFillsTheFirstHosts) {
  StatusOr<Plan> p =
      make_plan(Allocation{"-H", {{"a", 4}, {"b", 4}, {"c", 4}}, false, false}, {4, 2, false});
  ASSERT_TRUE(p.ok()) << error_of(p);
  EXPECT_EQ(p->ppr, 2);
  ASSERT_EQ(p->hosts.size(), 2u);
  EXPECT_EQ(p->hosts[1].host, "b");
  EXPECT_EQ(p->hosts[1].first_rank, 2);
  EXPECT_EQ(p->np, 4);
}

TEST(PlanTest, DefaultsFromSlots) {
  StatusOr<Plan> p = make_plan(two_by_four(), {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->np, 8);
  EXPECT_EQ(p->ppr, 4);
  StatusOr<Plan> q = make_plan(two_by_four(), {std::nullopt, 2, false});
  EXPECT_EQ(q->np, 4);
}

TEST(PlanTest, UnevenFill) {
  StatusOr<Plan> p = make_plan(two_by_four(), {6, std::nullopt, false});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ppr, 0);
  EXPECT_EQ(p->hosts[0].ranks, 4);
  EXPECT_EQ(p->hosts[1].ranks, 2);
}

TEST(PlanTest, ImpossibleLayouts) {
  EXPECT_EQ(error_of(make_plan(two_by_four(), {7, 4, false})),
            "-np 7 is not a multiple of --ppr 4 (ranks per node)");
  EXPECT_EQ(error_of(make_plan(two_by_four(), {12, 4, false})),
            "-np 12 with --ppr 4 needs 3 hosts, but -H (a:4,b:4) has 2");
  EXPECT_EQ(error_of(make_plan(two_by_four(), {16, 8, false})),
            "--ppr 8 needs 8 slots on each host, but host 'a' has 4 in -H (a:4,b:4); pass "
            "--oversubscribe to run more ranks than slots");
  EXPECT_EQ(error_of(make_plan(two_by_four(), {9, std::nullopt, false})),
            "-np 9 is more than the 8 slots of -H (a:4,b:4); pass --oversubscribe to run more "
            "ranks than slots");
  EXPECT_TRUE(make_plan(two_by_four(), {16, 8, true}).ok());
  EXPECT_TRUE(make_plan(two_by_four(), {10, std::nullopt, true}).ok());
}

TEST(CommandTest, Mpirun) {
  Plan plan = *make_plan(two_by_four(), {8, 4, false});
  CommandOptions o;
  o.launcher_args = {"-mca", "pml", "ob1"};
  o.forward_env = {"CHORUS_LOG_LEVEL", "NCCL_DEBUG"};
  o.program = {"./train", "--data", "a b"};
  EXPECT_EQ(format_command(*build_command(plan, o)),
            "mpirun -np 8 -H a:4,b:4 -map-by ppr:4:node -x CHORUS_LOG_LEVEL -x NCCL_DEBUG -mca "
            "pml ob1 ./train --data 'a b'");
}

TEST(CommandTest, SrunNeedsEvenHosts) {
  CommandOptions o;
  o.launcher = Launcher::kSrun;
  o.program = {"./train"};
  o.chorus_binds = true;
  EXPECT_EQ(format_command(*build_command(*make_plan(two_by_four(), {4, 2, false}), o)),
            "srun --nodes=2 --ntasks=4 --ntasks-per-node=2 --nodelist=a,b --mpi=pmix "
            "--cpu-bind=none ./train");
  EXPECT_EQ(error_of(build_command(*make_plan(two_by_four(), {6, std::nullopt, false}), o)),
            "--launcher srun needs the same number of ranks on every host, but the plan has a:4, "
            "b:2; give --ppr K, an -np that fills whole hosts, or (inside a Slurm job) no -np, to "
            "run the job's own task layout");
}

TEST(CommandTest, SrunRunsTheSlurmJobsOwnUnevenLayout) {
  Env env = {{"SLURM_JOB_ID", "99"},
             {"SLURM_JOB_NODELIST", "cn[7-9],cn12"},
             {"SLURM_TASKS_PER_NODE", "2(x3),1"}};
  StatusOr<Allocation> a = find_allocation({}, env, no_files);
  ASSERT_TRUE(a.ok()) << error_of(a);
  EXPECT_TRUE(a->slurm_tasks);
  CommandOptions o;
  o.launcher = Launcher::kSrun;
  o.slurm_task_layout = a->slurm_tasks;
  o.program = {"./train"};
  StatusOr<Plan> whole = make_plan(*a, {});
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(whole->fills_allocation);
  EXPECT_EQ(whole->ppr, 0);
  EXPECT_EQ(format_command(*build_command(*whole, o)), "srun --ntasks=7 --mpi=pmix ./train");
  // Fewer ranks than the job's tasks is not its layout: srun's placement would be a guess.
  StatusOr<Plan> part = make_plan(*a, {5, std::nullopt, false});
  ASSERT_TRUE(part.ok());
  EXPECT_FALSE(part->fills_allocation);
  EXPECT_FALSE(build_command(*part, o).ok());
  // Slots from SLURM_JOB_CPUS_PER_NODE are CPUs, not the job's tasks.
  env.erase("SLURM_TASKS_PER_NODE");
  env["SLURM_JOB_CPUS_PER_NODE"] = "8(x3),4";
  StatusOr<Allocation> cpus = find_allocation({}, env, no_files);
  ASSERT_TRUE(cpus.ok());
  EXPECT_FALSE(cpus->slurm_tasks);
  o.slurm_task_layout = cpus->slurm_tasks;
  EXPECT_FALSE(build_command(*make_plan(*cpus, {}), o).ok());
}

TEST(CommandTest, TheRanksGetTheJobScriptsEnvironment) {
  for (const char* name :
       {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "HOROVOD_FUSION_THRESHOLD",
        "CHORUS_BIND", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "OPAL_PREFIX", "MY_DATA"}) {
    EXPECT_TRUE(forwarded_to_ranks(name)) << name;
  }
  for (const char* name :
       {"PWD", "OLDPWD", "SHLVL", "_", "HOSTNAME", "TMPDIR", "SSH_CONNECTION",
        "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "SLURMD_NODENAME", "PBS_NODEFILE",
        "SGE_TASK_ID", "PE_HOSTFILE", "NHOSTS", "JOB_ID", "BASH_FUNC_module%%", "1X", ""}) {
    EXPECT_FALSE(forwarded_to_ranks(name)) << name;
  }
}

TEST(CommandTest, SrunMpiFromWhatSlurmOffers) {
  EXPECT_EQ(choose_srun_mpi("MPI plugin types are...\n\tnone\n\tcray_shasta\n\tpmi2\n\tpmix\n"
                            "specific pmix plugin versions available: pmix_v4\n"),
            "pmix");
  EXPECT_EQ(choose_srun_mpi("MPI plugin types are...\n\tnone\n\tpmi2\n\tcray_shasta\n"), "pmi2");
  EXPECT_EQ(choose_srun_mpi("srun: MPI types are...\nnone\npmix_v3\n"), "pmix");
  EXPECT_EQ(choose_srun_mpi("MPI plugin types are...\n\tnone\n"), "");
  Plan plan = *make_plan(two_by_four(), {4, 2, false});
  CommandOptions o;
  o.launcher = Launcher::kSrun;
  o.program = {"./train"};
  o.srun_mpi = "pmi2";
  EXPECT_EQ(format_command(*build_command(plan, o)),
            "srun --nodes=2 --ntasks=4 --ntasks-per-node=2 --nodelist=a,b --mpi=pmi2 ./train");
  o.srun_mpi = "";
  EXPECT_EQ(format_command(*build_command(plan, o)),
            "srun --nodes=2 --ntasks=4 --ntasks-per-node=2 --nodelist=a,b ./train");
}

TEST(CommandTest, ShellQuote) {
  EXPECT_EQ(shell_quote("plain-arg_1.0=x,y:z/@%+"), "plain-arg_1.0=x,y:z/@%+");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

TEST(CliTest, OptionsThenProgram) {
  StatusOr<Cli> c =
      parse_cli({"-np", "8", "--ppr=4", "-H", "a:4,b:4", "--mpi-args", "-mca pml ob1 --tag-output",
                 "--mpi-args", "-x 'A B'", "--dry-run", "./train", "-np", "3"});
  ASSERT_TRUE(c.ok()) << error_of(c);
  EXPECT_EQ(*c->np, 8);
  EXPECT_EQ(*c->ppr, 4);
  EXPECT_EQ(c->host_list, "a:4,b:4");
  EXPECT_TRUE(c->dry_run);
  EXPECT_EQ(c->launcher_args, (Names{"-mca", "pml", "ob1", "--tag-output", "-x", "A B"}));
  EXPECT_EQ(c->program, (Names{"./train", "-np", "3"}));
}

TEST(CliTest, VersionAndCheckBuildNeedNoProgram) {
  StatusOr<Cli> version = parse_cli({"--version"});
  ASSERT_TRUE(version.ok()) << error_of(version);
  EXPECT_TRUE(version->version);
  StatusOr<Cli> check = parse_cli({"--check-build"});
  ASSERT_TRUE(check.ok()) << error_of(check);
  EXPECT_TRUE(check->check_build);
  EXPECT_EQ(error_of(parse_cli({"--version=1"})),
            "unknown option '--version=1' (chorusrun --help lists them)");
  StatusOr<Cli> job = parse_cli({"--check-job", "-np", "4", "--ppr", "2"});
  ASSERT_TRUE(job.ok()) << error_of(job);
  EXPECT_TRUE(job->check_job);
  EXPECT_EQ(*job->np, 4);
  EXPECT_TRUE(job->program.empty());
  EXPECT_EQ(error_of(parse_cli({"--check-job", "./train"})),
            "--check-job runs its own program; './train' was given too");
}

TEST(CliTest, ElasticOptions) {
  StatusOr<Cli> c = parse_cli({"--max-restarts", "0", "--min-np=2", "--max-np", "6",
                               "--host-discovery-script", "./hosts.sh", "./train"});
  ASSERT_TRUE(c.ok()) << error_of(c);
  EXPECT_TRUE(c->elastic()) << "--max-restarts 0 still supervises: it never restarts";
  EXPECT_EQ(*c->max_restarts, 0);
  EXPECT_EQ(*c->min_np, 2);
  EXPECT_EQ(*c->max_np, 6);
  EXPECT_EQ(c->host_discovery_script, "./hosts.sh");
  EXPECT_FALSE(parse_cli({"-np", "2", "./train"})->elastic());
  EXPECT_EQ(error_of(parse_cli({"--max-restarts", "-1", "x"})),
            "--max-restarts: '-1' is not a positive integer");
  EXPECT_EQ(error_of(parse_cli({"--min-np", "4", "--max-np", "2", "x"})),
            "--min-np 4 is more than --max-np 2");
  EXPECT_EQ(error_of(parse_cli({"--max-restarts", "1", "--check-job"})),
            "--check-job is not supervised: drop the elastic options");
}

TEST(CliTest, Errors) {
  EXPECT_EQ(error_of(parse_cli({"-np"})), "-np needs a value");
  EXPECT_EQ(error_of(parse_cli({"-np", "two", "x"})), "-np: 'two' is not a positive integer");
  EXPECT_EQ(error_of(parse_cli({"--launcher", "ssh", "x"})),
            "--launcher 'ssh': expected mpirun, srun or auto");
  EXPECT_EQ(error_of(parse_cli({"--frobnicate", "x"})),
            "unknown option '--frobnicate' (chorusrun --help lists them)");
  EXPECT_EQ(error_of(parse_cli({"-np", "2"})), "no program given (chorusrun --help)");
  EXPECT_EQ(error_of(parse_cli({"--mpi-args", "-x 'open", "x"})),
            "--mpi-args: unterminated ' quote in '-x 'open'");
  EXPECT_EQ(error_of(parse_cli({"-H", "a", "--hostfile", "f", "x"})),
            "give -H or --hostfile, not both");
  StatusOr<Cli> dashdash = parse_cli({"--", "-weird-program"});
  ASSERT_TRUE(dashdash.ok());
  EXPECT_EQ(dashdash->program, (Names{"-weird-program"}));
}

}  // namespace
}  // namespace chorus::launch
