#pragma once
// Where a job may run: the hosts given on the command line, or those of the scheduler
// allocation this command runs in (Slurm, SGE/ABCI, PBS), or this host alone.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "host_list.h"

namespace chorus::launch {

using Env = std::map<std::string, std::string>;
using ReadFile = std::function<StatusOr<std::string>(const std::string& path)>;

struct Allocation {
  std::string source;       ///< "-H", "--hostfile h.txt", "Slurm (SLURM_JOB_NODELIST)", ...
  std::vector<Host> hosts;  ///< in order; slots from the source
  bool slurm = false;       ///< inside a Slurm job (srun can launch)
  /// The slots are the Slurm job's own task layout (SLURM_TASKS_PER_NODE), which srun
  /// reproduces by itself when asked for that many tasks, even or not.
  bool slurm_tasks = false;
};

struct AllocationQuery {
  std::string host_list;   ///< -H, or empty
  std::string hostfile;    ///< --hostfile, or empty
  std::string local_host;  ///< this host's name, when nothing else gives hosts
  int local_slots = 1;     ///< this host's slots (its cores)
};

/// First of: -H, --hostfile, Slurm (SLURM_JOB_NODELIST with SLURM_TASKS_PER_NODE, else
/// SLURM_JOB_CPUS_PER_NODE), SGE/ABCI (PE_HOSTFILE), PBS (PBS_NODEFILE), this host. An
/// allocation whose variables are malformed is an error naming the variable, never a
/// silent fallback to this host.
StatusOr<Allocation> find_allocation(const AllocationQuery& query, const Env& env,
                                     const ReadFile& read);

}  // namespace chorus::launch
