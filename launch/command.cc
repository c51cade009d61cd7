#include "command.h"

#include <cctype>
#include <set>
#include <sstream>

namespace chorus::launch {

const char* launcher_name(Launcher l) { return l == Launcher::kSrun ? "srun" : "mpirun"; }

bool forwarded_to_ranks(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;  // BASH_FUNC_f%%
  }
  static const std::set<std::string> kHostOwn = {
      "_",      "PWD",     "OLDPWD",     "SHLVL",          "PS1",     "HOSTNAME",     "HOST",
      "TMPDIR", "DISPLAY", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "SSH_AUTH_SOCK"};
  if (kHostOwn.count(name)) return false;
  static const std::set<std::string> kGridEngineOwn = {"PE_HOSTFILE", "JOB_ID", "JOB_NAME",
                                                       "NHOSTS",      "NSLOTS", "NQUEUES"};
  if (kGridEngineOwn.count(name)) return false;
  for (const char* prefix :
       {"OMPI_", "PMIX_", "PMI_", "PRTE_", "SLURM_", "SLURMD_", "PBS_", "SGE_"}) {
    if (name.rfind(prefix, 0) == 0) return false;
  }
  return true;
}

std::string choose_srun_mpi(const std::string& mpi_list) {
  bool pmix = false;
  bool pmi2 = false;
  std::istringstream lines(mpi_list);
  for (std::string word; lines >> word;) {
    pmix = pmix || word == "pmix" || word.rfind("pmix_v", 0) == 0;
    pmi2 = pmi2 || word == "pmi2";
  }
  return pmix ? "pmix" : pmi2 ? "pmi2" : "";
}

StatusOr<std::vector<std::string>> build_command(const Plan& plan, const CommandOptions& o) {
  std::vector<std::string> argv;
  const std::string np = std::to_string(plan.np);
  if (o.launcher == Launcher::kMpirun) {
    std::string hosts;
    for (const Placement& p : plan.hosts) {
      hosts += (hosts.empty() ? "" : ",") + p.host + ":" + std::to_string(p.ranks);
    }
    argv = {"mpirun",
            "-np",
            np,
            "-H",
            hosts,
            "-map-by",
            plan.ppr ? "ppr:" + std::to_string(plan.ppr) + ":node" : "slot"};
    if (o.oversubscribe) argv.push_back("--oversubscribe");
    if (o.chorus_binds) argv.insert(argv.end(), {"--bind-to", "none"});
    for (const std::string& var : o.forward_env) argv.insert(argv.end(), {"-x", var});
  } else if (plan.ppr == 0 && plan.fills_allocation && o.slurm_task_layout) {
    // Different counts per host that are the job's own layout (sbatch -n 7 over 4 nodes:
    // SLURM_TASKS_PER_NODE=2(x3),1): srun lays out that many tasks exactly so, as a plain
    // srun in the job script would, while --ntasks-per-node cannot say it.
    argv = {"srun", "--ntasks=" + np};
    if (!o.srun_mpi.empty()) argv.push_back("--mpi=" + o.srun_mpi);
    if (o.chorus_binds) argv.push_back("--cpu-bind=none");
    if (o.end_step_on_failure) argv.push_back("--kill-on-bad-exit=1");
  } else {
    if (plan.ppr == 0) {
      std::string counts;
      for (const Placement& p : plan.hosts) {
        counts += (counts.empty() ? "" : ", ") + p.host + ":" + std::to_string(p.ranks);
      }
      return invalid_argument(
          "--launcher srun needs the same number of ranks on every host, but the plan has " +
          counts + "; give --ppr K, an -np that fills whole hosts, or (inside a Slurm job) " +
          "no -np, to run the job's own task layout");
    }
    std::string nodes;
    for (const Placement& p : plan.hosts) nodes += (nodes.empty() ? "" : ",") + p.host;
    argv = {"srun", "--nodes=" + std::to_string(plan.hosts.size()), "--ntasks=" + np,
            "--ntasks-per-node=" + std::to_string(plan.ppr), "--nodelist=" + nodes};
    if (!o.srun_mpi.empty()) argv.push_back("--mpi=" + o.srun_mpi);
    if (o.oversubscribe) argv.push_back("--overcommit");
    if (o.chorus_binds) argv.push_back("--cpu-bind=none");
    if (o.end_step_on_failure) argv.push_back("--kill-on-bad-exit=1");
  }
  argv.insert(argv.end(), o.launcher_args.begin(), o.launcher_args.end());
  argv.insert(argv.end(), o.program.begin(), o.program.end());
  return argv;
}

std::string shell_quote(const std::string& arg) {
  if (arg.empty()) return "''";
  bool safe = true;
  for (char c : arg) {
    safe = safe && (std::isalnum(static_cast<unsigned char>(c)) ||
                    std::string("@%_-+=:,./").find(c) != std::string::npos);
  }
  if (safe) return arg;
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string format_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

}  // namespace chorus::launch
