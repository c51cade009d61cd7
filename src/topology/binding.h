#pragma once
// CHORUS_BIND: whether Chorus binds each rank (and, separately, its background thread) to
// CPUs of its own. Off by default, because mpirun and srun may bind already and two
// binders fight; turn it on together with `--bind-to none` / `--cpu-bind=none`.

#include <optional>
#include <string>

#include "chorus/status.h"
#include "topology/cpu_plan.h"
#include "topology/rank_map.h"

namespace chorus {

struct BindingResult {
  bool bound = false;    ///< the process and the calling thread were bound
  bool warning = false;  ///< `message` should be logged as a warning (binding skipped)
  std::string message;   ///< what was chosen, for the log
};

/// Binds the process to this local rank's CPUs and the calling thread (the background
/// thread) to the last core of them, as planned by plan_cpus, loading the hwloc topology
/// once. A layout that cannot be bound (more ranks than cores) is reported as a warning and
/// leaves the binding alone; a failing hwloc call is an error naming the call. With kNone
/// nothing is loaded unless Chorus's logger is at debug level, where `message` then
/// describes the launcher's binding (an empty message otherwise).
/// With NVIDIA GPUs on the host (read by hwloc from the PCI bus), the CPUs are those near the
/// rank's GPU (plan_cpus), the GPUs being those CUDA_VISIBLE_DEVICES keeps, and `message`
/// names the GPU. Reads CUDA_VISIBLE_DEVICES from the environment.
StatusOr<BindingResult> apply_binding(BindMode mode, const RankMap& map);

/// apply_binding with CUDA_VISIBLE_DEVICES given (nullopt: unset), for tests. A value that
/// cannot be followed (UUIDs, a bad index) is logged as a warning.
StatusOr<BindingResult> apply_binding(BindMode mode, const RankMap& map,
                                      const std::optional<std::string>& cuda_visible_devices);

}  // namespace chorus
