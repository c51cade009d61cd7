// chorusrun: builds the mpirun or srun command of a Chorus job from the allocation and a
// few options, checks the layout before anything starts, then execs the launcher with an
// argv vector (no shell in between, so odd host names and arguments reach it unchanged).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "allocation.h"
#include "build_facts.h"
#include "check_build.h"
#include "cli.h"
#include "command.h"
#include "elastic_job.h"
#include "explain.h"
#include "gloo_elastic.h"
#include "gloo_launch.h"
#include "parse_util.h"
#include "plan.h"
#include "shell.h"
#include "topology/hwloc_binding.h"

extern char** environ;

namespace chorus::launch {
namespace {

int error(const Status& s) {
  std::fprintf(stderr, "chorusrun: error: %s\n", s.message().c_str());
  return 2;
}

Env read_environment() {
  Env env;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env.emplace(std::string(*e, static_cast<std::size_t>(eq - *e)), std::string(eq + 1));
  }
  return env;
}

StatusOr<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalid_argument("cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string local_host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

// mpirun from PATH, else the MPI's launcher that Chorus was built with, so that a job that
// loaded only the chorus module runs (an absolute path also tells Open MPI its prefix).
std::string mpirun_program(const Env& env) {
  auto path = env.find("PATH");
  std::istringstream dirs(path == env.end() ? "" : path->second);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && access((dir + "/mpirun").c_str(), X_OK) == 0) return "mpirun";
  }
  return access(build::kMpiexec, X_OK) == 0 ? build::kMpiexec : "mpirun";
}

// chorus-check-job beside this chorusrun (installed, or in the pip package), else where the
// build made it.
std::string check_job_program() {
  std::error_code ec;
  std::filesystem::path beside =
      std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "chorus-check-job";
  if (!ec && access(beside.c_str(), X_OK) == 0) return beside.string();
  return build::kBuiltCheckJob;
}

// CHORUS_SRUN_MPI when set (pmix, pmi2, none...), else what this Slurm offers.
std::string srun_mpi(const Env& env) {
  auto given = env.find("CHORUS_SRUN_MPI");
  if (given != env.end()) return given->second;
  const ShellOutput list = shell_output("srun --mpi=list 2>&1");
  if (list.ran && list.status != 0) return "pmix";  // no srun here (a --dry-run outside Slurm)
  return choose_srun_mpi(list.text);
}

// chorusrun --gloo (launch/gloo_launch.h): MASTER_ADDR and MASTER_PORT as the environment
// gives them, else the first host (loopback when every rank runs here) and two free ports of
// this one.
int run_gloo(const Cli& cli, const Plan& plan, const Env& env, const Allocation& allocation) {
  GlooJob job;
  const std::string local = local_host_name();
  auto given = [&](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  job.master_addr = given("MASTER_ADDR");
  if (job.master_addr.empty()) {
    bool all_here = true;
    for (const Placement& p : plan.hosts) all_here = all_here && is_this_host(p.host, local);
    const std::string& first = plan.hosts.front().host;
    job.master_addr = all_here ? "127.0.0.1" : is_this_host(first, local) ? local : first;
  }
  const std::string port = given("MASTER_PORT");
  job.master_port = port.empty() ? free_port_pair() : std::atoi(port.c_str());
  if (const std::string rsh = given("CHORUS_RSH"); !rsh.empty()) {
    StatusOr<std::vector<std::string>> words = split_arguments(rsh, "CHORUS_RSH");
    if (!words.ok()) return error(words.status());
    job.rsh = *words;
  }
  // Where the command was typed, as the shell names it (PWD), for the remote ranks.
  job.cwd = given("PWD");
  if (job.cwd.empty()) {
    std::error_code ec;
    job.cwd = std::filesystem::current_path(ec).string();
  }
  if (!cli.bind.empty()) setenv("CHORUS_BIND", cli.bind.c_str(), 1);
  const std::string given_job = given("CHORUS_ELASTIC_JOB");
  const std::string job_name =
      given_job.empty() ? local + "-" + std::to_string(getpid()) : given_job;
  if (cli.elastic() && !cli.dry_run) {
    std::fflush(stdout);
    return supervise_gloo_job(cli, env, allocation, plan, job, local, job_name);
  }
  std::vector<RankStart> starts;
  if (cli.elastic()) {
    // The first workers, as the supervision would start them (its ports are picked then).
    int id = 0;
    for (const Placement& p : plan.hosts) {
      for (int k = 0; k < p.ranks; ++k) {
        starts.push_back(start_on(
            p.host,
            worker_vars("w" + std::to_string(++id), "ADDRESSES:PORT", "ADDRESSES:PORT", job_name),
            cli.program, job, env, local));
      }
    }
  } else {
    starts = gloo_starts(plan, cli.program, job, env, local);
  }
  if (cli.dry_run) {
    for (const RankStart& s : starts) {
      std::vector<std::string> words = s.env;
      words.insert(words.end(), s.argv.begin(), s.argv.end());
      std::printf("%s\n", format_command(words).c_str());
    }
    return 0;
  }
  return run_gloo_job(starts);
}

int run(const std::vector<std::string>& args) {
  StatusOr<Cli> cli = parse_cli(args);
  if (!cli.ok()) return error(cli.status());
  if (cli->help) {
    std::fputs(usage(), stdout);
    return 0;
  }
  if (cli->version) {
    std::printf("%s\n", version_line().c_str());
    return 0;
  }
  if (cli->check_build) {
    std::fputs(check_build().c_str(), stdout);
    return 0;
  }
  Env env = read_environment();
  if (!cli->bind.empty()) env["CHORUS_BIND"] = cli->bind;
  auto bind_it = env.find("CHORUS_BIND");
  StatusOr<BindMode> mode = kBindWords.parse(bind_it == env.end() ? "" : bind_it->second,
                                             cli->bind.empty() ? "CHORUS_BIND" : "--bind");
  if (!mode.ok()) return error(mode.status());

  StatusOr<CpuLayout> cores = load_cpu_layout();
  AllocationQuery query{cli->host_list, cli->hostfile, local_host_name(),
                        cores.ok() ? static_cast<int>(cores->cores.size())
                                   : static_cast<int>(std::thread::hardware_concurrency())};
  StatusOr<Allocation> allocation = find_allocation(query, env, read_file);
  if (!allocation.ok()) return error(allocation.status());
  CommandOptions options;
  options.launcher = cli->launcher == "srun" || (cli->launcher == "auto" && allocation->slurm)
                         ? Launcher::kSrun
                         : Launcher::kMpirun;
  options.launcher_args = cli->launcher_args;
  for (const auto& [name, value] : env) {
    if (forwarded_to_ranks(name)) options.forward_env.push_back(name);
  }
  if (options.launcher == Launcher::kSrun) options.srun_mpi = srun_mpi(env);
  options.chorus_binds = *mode != BindMode::kNone;
  options.oversubscribe = cli->oversubscribe;
  options.slurm_task_layout = allocation->slurm_tasks;
  options.program = cli->program;
  if (cli->check_job) options.program = {check_job_program()};
  if (cli->elastic()) elastic_command_options(options);
  // An elastic job's first launch is planned as each launch is (launch/supervisor.h).
  StatusOr<Plan> plan = [&]() -> StatusOr<Plan> {
    if (!cli->elastic()) return make_plan(*allocation, {cli->np, cli->ppr, cli->oversubscribe});
    StatusOr<std::vector<Host>> hosts = elastic_hosts(elastic_request(*cli), *allocation);
    if (!hosts.ok()) return hosts.status();
    return elastic_plan(*hosts, elastic_request(*cli));
  }();
  if (!plan.ok()) return error(plan.status());

  if (cli->explain) {
    std::optional<CpuLayout> layout;
    if (cores.ok()) layout = *cores;
    auto visible = env.find("CUDA_VISIBLE_DEVICES");
    std::optional<std::string> cuda_visible;
    if (visible != env.end()) cuda_visible = visible->second;
    std::fputs(format_explain(*plan, *mode, layout, allocation->source, cuda_visible).c_str(),
               stdout);
  }
  if (cli->gloo) return run_gloo(*cli, *plan, env, *allocation);
  if (cli->elastic() && !cli->dry_run) {
    std::fflush(stdout);
    if (!cli->bind.empty()) setenv("CHORUS_BIND", cli->bind.c_str(), 1);
    return supervise_job(*cli, env, *allocation, options, mpirun_program(env),
                         local_host_name() + "-" + std::to_string(getpid()));
  }
  StatusOr<std::vector<std::string>> argv = build_command(*plan, options);
  if (!argv.ok()) return error(argv.status());
  if (options.launcher == Launcher::kMpirun) (*argv)[0] = mpirun_program(env);
  if (cli->dry_run) {
    std::printf("%s\n", format_command(*argv).c_str());
    return 0;
  }
  std::fflush(stdout);
  if (!cli->bind.empty()) setenv("CHORUS_BIND", cli->bind.c_str(), 1);
  std::vector<char*> cargv;
  for (std::string& a : *argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execvp(cargv[0], cargv.data());
  std::fprintf(stderr, "chorusrun: error: cannot run '%s': %s\n", cargv[0], std::strerror(errno));
  return 127;
}

}  // namespace
}  // namespace chorus::launch

int main(int argc, char** argv) {
  return chorus::launch::run(std::vector<std::string>(argv + 1, argv + argc));
}
