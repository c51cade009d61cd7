// chorusrun: builds the mpirun or srun command of a Chorus job from the allocation and a
// few options, checks the layout before anything starts, then execs the launcher with an
// argv vector (no shell in between, so odd host names and arguments reach it unchanged).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "allocation.h"
#include "cli.h"
#include "command.h"
#include "explain.h"
#include "plan.h"
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

int run(const std::vector<std::string>& args) {
  StatusOr<Cli> cli = parse_cli(args);
  if (!cli.ok()) return error(cli.status());
  if (cli->help) {
    std::fputs(usage(), stdout);
    return 0;
  }
  Env env = read_environment();
  if (!cli->bind.empty()) env["CHORUS_BIND"] = cli->bind;
  auto bind_it = env.find("CHORUS_BIND");
  StatusOr<BindMode> mode = parse_bind_mode(bind_it == env.end() ? "" : bind_it->second,
                                            cli->bind.empty() ? "CHORUS_BIND" : "--bind");
  if (!mode.ok()) return error(mode.status());

  StatusOr<CpuLayout> cores = load_cpu_layout();
  AllocationQuery query{cli->host_list, cli->hostfile, local_host_name(),
                        cores.ok() ? static_cast<int>(cores->cores.size())
                                   : static_cast<int>(std::thread::hardware_concurrency())};
  StatusOr<Allocation> allocation = find_allocation(query, env, read_file);
  if (!allocation.ok()) return error(allocation.status());
  StatusOr<Plan> plan = make_plan(*allocation, {cli->np, cli->ppr, cli->oversubscribe});
  if (!plan.ok()) return error(plan.status());

  CommandOptions options;
  options.launcher = cli->launcher == "srun" || (cli->launcher == "auto" && allocation->slurm)
                         ? Launcher::kSrun
                         : Launcher::kMpirun;
  options.launcher_args = cli->launcher_args;
  for (const auto& [name, value] : env) {
    if (name.rfind("CHORUS_", 0) == 0 || name.rfind("NCCL_", 0) == 0) {
      options.forward_env.push_back(name);
    }
  }
  options.chorus_binds = *mode != BindMode::kNone;
  options.oversubscribe = cli->oversubscribe;
  options.slurm_task_layout = allocation->slurm_tasks;
  options.program = cli->program;
  StatusOr<std::vector<std::string>> argv = build_command(*plan, options);
  if (!argv.ok()) return error(argv.status());

  if (cli->explain) {
    std::optional<CpuLayout> layout;
    if (cores.ok()) layout = *cores;
    auto visible = env.find("CUDA_VISIBLE_DEVICES");
    std::optional<std::string> cuda_visible;
    if (visible != env.end()) cuda_visible = visible->second;
    std::fputs(format_explain(*plan, *mode, layout, allocation->source, cuda_visible).c_str(),
               stdout);
  }
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
