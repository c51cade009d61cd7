#include "elastic_job.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>

#include "hosts_notice.h"
#include "shell.h"
#include "watched_launch.h"

namespace chorus::launch {
namespace {

// The hosts the discovery script prints now; a script that fails is an error naming it.
StatusOr<std::vector<Host>> discover_hosts(const std::string& script) {
  const ShellOutput out = shell_output(shell_quote(script).c_str());
  if (!out.ran || out.status != 0) {
    const int status = out.ran && WIFEXITED(out.status) ? WEXITSTATUS(out.status) : out.status;
    return invalid_argument("host discovery script '" + script + "' failed (status " +
                            std::to_string(status) + ")");
  }
  return parse_discovered_hosts(out.text);
}

}  // namespace

ElasticRequest elastic_request(const Cli& cli) {
  return {cli.max_restarts.value_or(0), cli.np, cli.min_np, cli.max_np, cli.ppr, cli.oversubscribe,
          cli.host_discovery_script};
}

void elastic_command_options(CommandOptions& options) {
  for (const char* name : {"CHORUS_ELASTIC_JOB", "CHORUS_ELASTIC_LAUNCH",
                           "CHORUS_ELASTIC_SUPERVISOR", "CHORUS_ELASTIC_HOSTS_VERSION"}) {
    if (std::find(options.forward_env.begin(), options.forward_env.end(), name) ==
        options.forward_env.end()) {
      options.forward_env.push_back(name);
    }
  }
  // Uneven layouts after a host leaves are the plan's own, not the allocation's.
  options.slurm_task_layout = false;
  options.end_step_on_failure = true;
}

StatusOr<std::vector<Host>> elastic_hosts(const ElasticRequest& request,
                                          const Allocation& allocation) {
  if (request.discovery_script.empty()) return allocation.hosts;
  return discover_hosts(request.discovery_script);
}

int supervise_job(const Cli& cli, const Env& env, const Allocation& allocation,
                  CommandOptions options, const std::string& mpirun,
                  const std::string& default_job_name) {
  StatusOr<std::unique_ptr<HostsNotice>> notice = HostsNotice::start();
  if (!notice.ok()) {
    std::fprintf(stderr, "chorusrun: error: %s\n", notice.status().message().c_str());
    return 2;
  }
  auto job = env.find("CHORUS_ELASTIC_JOB");
  const std::string job_name =
      job != env.end() && !job->second.empty() ? job->second : default_job_name;
  const ElasticRequest request = elastic_request(cli);
  SupervisorHooks hooks;
  hooks.hosts = [&] { return elastic_hosts(request, allocation); };
  hooks.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  hooks.launch = [&](const Plan& plan, int launch, const std::set<std::string>& excluded) {
    StatusOr<std::vector<std::string>> argv = build_command(plan, options);
    if (!argv.ok()) {
      LaunchResult none;
      none.not_started = argv.status().message();
      return none;
    }
    if (options.launcher == Launcher::kMpirun) (*argv)[0] = mpirun;
    const int version = (*notice)->version();
    const std::vector<std::string> overrides = {
        "CHORUS_ELASTIC_JOB=" + job_name, "CHORUS_ELASTIC_LAUNCH=" + std::to_string(launch),
        "CHORUS_ELASTIC_SUPERVISOR=" + (*notice)->address(),
        "CHORUS_ELASTIC_HOSTS_VERSION=" + std::to_string(version)};
    int seconds = 0;
    auto look_for_hosts = [&] {
      if (request.discovery_script.empty() || ++seconds % 2 != 0) return;
      if ((*notice)->version() != version) return;  // told once per launch
      StatusOr<std::vector<Host>> found = discover_hosts(request.discovery_script);
      if (!found.ok()) return;
      std::vector<Host> usable;
      for (const Host& h : *found) {
        if (!excluded.count(h.name)) usable.push_back(h);
      }
      StatusOr<Plan> bigger = elastic_plan(usable, request);
      if (bigger.ok() && bigger->np > plan.np) {
        std::fprintf(stderr,
                     "chorusrun: hosts added (%s): %d ranks fit; the job stops at its "
                     "next commit to grow\n",
                     format_host_list(usable).c_str(), bigger->np);
        (*notice)->bump();
      }
    };
    return run_watched(*argv, overrides, look_for_hosts);
  };
  std::fprintf(stderr, "chorusrun: elastic job %s (CHORUS_ELASTIC_JOB)\n", job_name.c_str());
  return supervise(request, hooks);
}

}  // namespace chorus::launch
