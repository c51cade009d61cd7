#include "topology/cpu_plan.h"

#include <algorithm>
#include <set>

#include "topology/rank_map.h"

namespace chorus {

StatusOr<BindMode> parse_bind_mode(const std::string& value, const std::string& variable) {
  if (value.empty() || value == "none") return BindMode::kNone;
  if (value == "core") return BindMode::kCore;
  if (value == "numa") return BindMode::kNuma;
  return invalid_argument(variable + "='" + value + "' is invalid; expected none, core or numa");
}

const char* bind_mode_name(BindMode mode) {
  switch (mode) {
    case BindMode::kNone: return "none";
    case BindMode::kCore: return "core";
    case BindMode::kNuma: return "numa";
  }
  return "?";
}

int CpuLayout::numa_count() const {
  std::set<int> nodes;
  for (const CpuCore& c : cores) nodes.insert(c.numa);
  return static_cast<int>(nodes.size());
}

std::string format_cpu_list(const std::vector<int>& cpus) { return format_ranks(cpus); }

namespace {

CpuPlan plan_from_cores(const CpuLayout& layout, const std::vector<int>& core_indices) {
  CpuPlan plan;
  std::set<int> numas;
  std::vector<int> core_ids;
  for (int c : core_indices) {
    const CpuCore& core = layout.cores[c];
    plan.pus.insert(plan.pus.end(), core.pus.begin(), core.pus.end());
    numas.insert(core.numa);
    core_ids.push_back(c);
  }
  std::sort(plan.pus.begin(), plan.pus.end());
  plan.thread_pus = layout.cores[core_indices.back()].pus;
  plan.cores = static_cast<int>(core_indices.size());
  plan.describe = "cores " + format_ranks(core_ids) + " (PUs " + format_cpu_list(plan.pus) +
                  ", NUMA " + format_ranks({numas.begin(), numas.end()}) + ")";
  return plan;
}

}  // namespace

StatusOr<CpuPlan> plan_cpus(const CpuLayout& layout, BindMode mode, int local_rank,
                            int local_size) {
  if (mode == BindMode::kNone) return CpuPlan{};
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
    return invalid_argument("plan_cpus: local rank " + std::to_string(local_rank) + " of " +
                            std::to_string(local_size));
  }
  const int cores = static_cast<int>(layout.cores.size());
  if (cores == 0) return internal_error("plan_cpus: the host has no usable cores");
  std::vector<int> mine;
  if (mode == BindMode::kCore) {
    if (cores < local_size) {
      return failed_precondition("CHORUS_BIND=core: " + std::to_string(local_size) +
                                 " ranks on this host but only " + std::to_string(cores) +
                                 " cores; each rank needs a core of its own");
    }
    const int base = cores / local_size, extra = cores % local_size;
    const int first = local_rank * base + std::min(local_rank, extra);
    const int count = base + (local_rank < extra ? 1 : 0);
    for (int c = first; c < first + count; ++c) mine.push_back(c);
  } else {
    // NUMA node ids in the order the cores list them.
    std::vector<int> nodes;
    for (const CpuCore& c : layout.cores) {
      if (std::find(nodes.begin(), nodes.end(), c.numa) == nodes.end()) nodes.push_back(c.numa);
    }
    const int n = static_cast<int>(nodes.size());
    int lo, hi;  // this rank's nodes: [lo, hi)
    if (local_size <= n) {
      lo = local_rank * n / local_size;
      hi = (local_rank + 1) * n / local_size;
    } else {
      lo = local_rank * n / local_size;
      hi = lo + 1;
    }
    for (int c = 0; c < cores; ++c) {
      auto pos = std::find(nodes.begin(), nodes.end(), layout.cores[c].numa) - nodes.begin();
      if (pos >= lo && pos < hi) mine.push_back(c);
    }
  }
  return plan_from_cores(layout, mine);
}

}  // namespace chorus
