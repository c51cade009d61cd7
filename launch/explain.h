#pragma once
// --explain: the host -> rank -> local_rank -> CPUs table of a plan, with the CPUs that
// CHORUS_BIND would give each rank, planned on this host's cores (the launcher cannot see
// the others; clusters are built from alike nodes).

#include <optional>
#include <string>

#include "plan.h"
#include "topology/cpu_plan.h"

namespace chorus::launch {

std::string format_explain(const Plan& plan, BindMode mode, const std::optional<CpuLayout>& cores,
                           const std::string& source);

}  // namespace chorus::launch
