#pragma once
// --explain: the host -> rank -> local_rank -> CPUs (-> GPU) table of a plan, with the CPUs
// that CHORUS_BIND would give each rank, planned on this host's cores and GPUs (the launcher
// cannot see the others; clusters are built from alike nodes).

#include <optional>
#include <string>

#include "plan.h"
#include "topology/cpu_plan.h"

namespace chorus::launch {

/// `host`: this host's cores and GPUs (all, in PCI bus order), nullopt when hwloc failed;
/// `cuda_visible_devices`: CUDA_VISIBLE_DEVICES as chorusrun sees it (nullopt: unset), which
/// narrows the GPUs as it will for the ranks. The GPU column appears when GPUs remain.
std::string format_explain(const Plan& plan, BindMode mode, const std::optional<CpuLayout>& host,
                           const std::string& source,
                           const std::optional<std::string>& cuda_visible_devices);

}  // namespace chorus::launch
