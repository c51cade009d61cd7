#include "topology/cpu_plan.h"

#include <algorithm>
#include <cstdint>
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

// Indices (into layout.cores) of each NUMA node's cores, nodes in the order the cores list
// them.
std::vector<std::vector<int>> cores_by_node(const CpuLayout& layout) {
  std::vector<int> ids;
  std::vector<std::vector<int>> nodes;
  for (int c = 0; c < static_cast<int>(layout.cores.size()); ++c) {
    auto it = std::find(ids.begin(), ids.end(), layout.cores[c].numa);
    if (it == ids.end()) {
      ids.push_back(layout.cores[c].numa);
      nodes.emplace_back();
      it = ids.end() - 1;
    }
    nodes[it - ids.begin()].push_back(c);
  }
  return nodes;
}

// Block `index` of `count` consecutive, disjoint blocks of `total` items, the first
// total % count blocks one longer. Needs total >= count.
std::vector<int> cut_block(int total, int count, int index) {
  const int base = total / count, extra = total % count;
  const int first = index * base + std::min(index, extra);
  const int size = base + (index < extra ? 1 : 0);
  std::vector<int> block;
  for (int i = first; i < first + size; ++i) block.push_back(i);
  return block;
}

// The node of local rank r when ranks are spread evenly over n nodes in order.
int node_of(int r, int n, int local_size) {
  return static_cast<int>(static_cast<int64_t>(r) * n / local_size);
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
  const std::string name = std::string("CHORUS_BIND=") + bind_mode_name(mode);
  if (cores < local_size) {
    return failed_precondition(name + ": " + std::to_string(local_size) +
                               " ranks on this host but only " + std::to_string(cores) +
                               " cores; each rank needs a core of its own");
  }
  const std::vector<std::vector<int>> nodes = cores_by_node(layout);
  const int n = static_cast<int>(nodes.size());
  // With at least as many ranks as nodes, each node's ranks share out its cores, so no
  // rank's block spans two nodes. numa always splits this way. core does when every node
  // gets the same number of ranks and has a core for each; otherwise it cuts all cores into
  // consecutive blocks, which keeps every rank's core count within one of the others'.
  bool per_node = mode == BindMode::kNuma ? local_size > n : local_size % n == 0;
  if (mode == BindMode::kCore) {
    for (const std::vector<int>& node : nodes) {
      per_node = per_node && static_cast<int>(node.size()) >= local_size / n;
    }
  }
  std::vector<int> mine;
  if (per_node) {
    const int node = node_of(local_rank, n, local_size);
    int first = local_rank;  // the node's first rank
    while (first > 0 && node_of(first - 1, n, local_size) == node) --first;
    int count = 0;
    while (first + count < local_size && node_of(first + count, n, local_size) == node) ++count;
    const std::vector<int>& node_cores = nodes[node];
    if (static_cast<int>(node_cores.size()) < count) {
      return failed_precondition(name + ": " + std::to_string(count) + " ranks on NUMA node " +
                                 std::to_string(layout.cores[node_cores[0]].numa) + " but only " +
                                 std::to_string(node_cores.size()) +
                                 " cores there; each rank needs a core of its own");
    }
    for (int c : cut_block(static_cast<int>(node_cores.size()), count, local_rank - first)) {
      mine.push_back(node_cores[c]);
    }
  } else if (mode == BindMode::kCore) {
    mine = cut_block(cores, local_size, local_rank);
  } else {
    // No more ranks than nodes: each rank gets whole nodes, [lo, hi).
    const int lo = local_rank * n / local_size, hi = (local_rank + 1) * n / local_size;
    for (int i = lo; i < hi; ++i) mine.insert(mine.end(), nodes[i].begin(), nodes[i].end());
    std::sort(mine.begin(), mine.end());
  }
  return plan_from_cores(layout, mine);
}

}  // namespace chorus
