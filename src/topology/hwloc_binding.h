#pragma once
// hwloc behind a small seam: read the host's cores (for cpu_plan.h) and bind the process or
// the calling thread to a list of processing units. Every hwloc call is checked and a
// failure names the call and errno.

#include <vector>

#include "chorus/status.h"
#include "topology/cpu_plan.h"

namespace chorus {

/// The cores this process is allowed to use (its cgroup/cpuset), in topology order.
StatusOr<CpuLayout> load_cpu_layout();

/// Binds every thread of the process to `pus` (OS indices).
Status bind_process(const std::vector<int>& pus);
/// Binds only the calling thread to `pus`.
Status bind_this_thread(const std::vector<int>& pus);
/// The calling thread's current binding, as OS indices of processing units.
StatusOr<std::vector<int>> this_thread_binding();

}  // namespace chorus
