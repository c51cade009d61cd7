#pragma once
// The launcher command for a plan, as an argv vector (never a shell string), and its
// shell-quoted form for --dry-run.

#include <string>
#include <vector>

#include "plan.h"

namespace chorus::launch {

enum class Launcher { kMpirun, kSrun };
const char* launcher_name(Launcher l);

struct CommandOptions {
  Launcher launcher = Launcher::kMpirun;
  std::vector<std::string> launcher_args;  ///< --mpi-args, split into words
  std::vector<std::string> forward_env;    ///< variables mpirun passes with -x
  std::string srun_mpi = "pmix";           ///< srun --mpi=<this>; empty: Slurm's default
  bool chorus_binds = false;               ///< CHORUS_BIND != none: the launcher must not bind
  bool oversubscribe = false;
  /// A task that fails ends the whole step at once (srun --kill-on-bad-exit; mpirun does so
  /// by default), as an elastic job's supervisor needs.
  bool end_step_on_failure = false;
  /// The allocation's slots are Slurm's task layout (Allocation::slurm_tasks): srun can
  /// run a plan that fills them as they are, even when hosts have different counts.
  bool slurm_task_layout = false;
  std::vector<std::string> program;  ///< the program and its arguments
};

/// Whether mpirun passes the launching shell's variable `name` to the ranks: all but the shell's
/// own (PWD, SHLVL, BASH_FUNC_*...), the host's own (HOSTNAME, TMPDIR, SSH_*), and the
/// launchers' and schedulers' (OMPI_*, PMIX_*, PMI_*, SLURM_*, PBS_*, SGE_*, PE_HOSTFILE,
/// NHOSTS...), which each host's launcher sets itself. A module's PATH, LD_LIBRARY_PATH and
/// PYTHONPATH, a venv's VIRTUAL_ENV, HOROVOD_*, CHORUS_* and NCCL_* reach every rank, as they would
/// in a job script.
bool forwarded_to_ranks(const std::string& name);

/// srun's --mpi for the plugins `srun --mpi=list` printed: pmix when there is one, else pmi2,
/// else "" (Slurm's default).
std::string choose_srun_mpi(const std::string& mpi_list);

/// mpirun -np N -H a:K,b:K -map-by ppr:K:node [-x VAR]... ARGS... PROGRAM...
/// srun --nodes=H --ntasks=N --ntasks-per-node=K --nodelist=a,b --mpi=pmix ARGS... PROGRAM...
/// srun --ntasks=N --mpi=pmix ARGS... PROGRAM...   (an uneven plan that is the Slurm job's
///                                                own task layout: srun knows it)
/// Any other uneven plan is an error for srun.
StatusOr<std::vector<std::string>> build_command(const Plan& plan, const CommandOptions& options);

/// `arg` as a POSIX shell reads it back: unchanged when it holds only safe characters,
/// otherwise in single quotes.
std::string shell_quote(const std::string& arg);
std::string format_command(const std::vector<std::string>& argv);

}  // namespace chorus::launch
