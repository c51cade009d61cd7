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
  bool chorus_binds = false;               ///< CHORUS_BIND != none: the launcher must not bind
  bool oversubscribe = false;
  /// The allocation's slots are Slurm's task layout (Allocation::slurm_tasks): srun can
  /// run a plan that fills them as they are, even when hosts have different counts.
  bool slurm_task_layout = false;
  std::vector<std::string> program;  ///< the program and its arguments
};

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
