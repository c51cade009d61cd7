#pragma once
// Slurm's compressed lists, as found in a job's environment:
//   SLURM_JOB_NODELIST   "gpu[01-03,07],login1,rack[1-2]-n[1-2]"  (zero padding kept;
//                         several bracket groups in one name expand as a product)
//   SLURM_TASKS_PER_NODE "2(x3),1"  (and SLURM_JOB_CPUS_PER_NODE, same form)

#include <string>
#include <vector>

#include "chorus/status.h"

namespace chorus::launch {

StatusOr<std::vector<std::string>> expand_nodelist(const std::string& list,
                                                   const std::string& variable);
StatusOr<std::vector<int>> expand_counts(const std::string& list, const std::string& variable);

}  // namespace chorus::launch
