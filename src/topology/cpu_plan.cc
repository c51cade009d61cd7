#include "topology/cpu_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <numeric>
#include <set>

#include "topology/rank_map.h"

namespace chorus {

int CpuLayout::numa_count() const {
  std::set<int> nodes;
  for (const CpuCore& c : cores) nodes.insert(c.numa);
  return static_cast<int>(nodes.size());
}

std::string format_cpu_list(const std::vector<int>& cpus) { return format_ranks(cpus); }

VisibleGpus visible_gpus(const std::optional<std::string>& value, int gpu_count) {
  VisibleGpus visible;
  std::vector<int> all(static_cast<std::size_t>(std::max(gpu_count, 0)));
  std::iota(all.begin(), all.end(), 0);
  if (!value) {
    visible.order = all;
    return visible;
  }
  std::vector<std::string> entries;
  if (!value->empty()) {
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = value->find(',', start);
      std::string entry = value->substr(start, comma - start);
      entry.erase(0, entry.find_first_not_of(" \t"));
      entry.erase(entry.find_last_not_of(" \t") + 1);
      entries.push_back(entry);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  const std::string quoted = "CUDA_VISIBLE_DEVICES='" + *value + "'";
  for (const std::string& e : entries) {
    if (e.rfind("GPU-", 0) == 0 || e.rfind("MIG-", 0) == 0) {
      visible.order = all;
      visible.note = quoted +
                     " names GPUs by UUID, which Chorus cannot match without CUDA; ranks are "
                     "placed on the GPUs in PCI bus order";
      return visible;
    }
  }
  for (const std::string& e : entries) {
    const bool digits =
        !e.empty() && e.size() < 9 &&
        std::all_of(e.begin(), e.end(), [](unsigned char c) { return std::isdigit(c); });
    const int index = digits ? std::stoi(e) : -1;
    if (index < 0 || index >= gpu_count ||
        std::count(visible.order.begin(), visible.order.end(), index)) {
      visible.note = quoted + ": '" + e + "' is not an unused GPU index of this host (" +
                     std::to_string(gpu_count) +
                     " GPUs); as CUDA does, only the GPUs listed before it are visible";
      break;
    }
    visible.order.push_back(index);
  }
  return visible;
}

CpuLayout select_gpus(CpuLayout layout, const std::vector<int>& order) {
  std::vector<GpuLocality> chosen;
  for (int g : order) {
    if (g >= 0 && g < static_cast<int>(layout.gpus.size())) chosen.push_back(layout.gpus[g]);
  }
  layout.gpus = std::move(chosen);
  return layout;
}

int gpu_of(const CpuLayout& layout, int local_rank) {
  if (layout.gpus.empty() || local_rank < 0) return -1;
  return local_rank % static_cast<int>(layout.gpus.size());
}

std::string describe_gpu(const CpuLayout& layout, int gpu) {
  if (gpu < 0 || gpu >= static_cast<int>(layout.gpus.size())) return "none";
  const GpuLocality& g = layout.gpus[gpu];
  return "cuda:" + std::to_string(gpu) + " (PCI " + g.pci_bus_id +
         (g.numa.empty() ? std::string() : ", NUMA " + format_ranks(g.numa)) + ")";
}

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

// The cores (indices into layout.cores) of local rank `local_rank` when its GPU's locality
// decides them (see plan_cpus), or nullopt when a GPU in use has no locality to go by.
StatusOr<std::optional<std::vector<int>>> cores_near_gpus(const CpuLayout& layout,
                                                          const std::string& name, int local_rank,
                                                          int local_size) {
  const int total = static_cast<int>(layout.cores.size());
  const int gpus = static_cast<int>(layout.gpus.size());
  const int used = std::min(gpus, local_size);  // GPUs 0..used-1 have ranks
  std::vector<std::set<int>> near(used);
  for (int g = 0; g < used; ++g) {
    for (int c : layout.gpus[g].cores) {
      if (c >= 0 && c < total) near[g].insert(c);
    }
    // A GPU near every core (or none) says nothing about where its rank should run.
    if (near[g].empty() || static_cast<int>(near[g].size()) == total)
      return std::optional<std::vector<int>>();
  }
  // GPUs whose core sets overlap pool them, so that ranks of different pools never share
  // a core: a union-find over the GPUs in use.
  std::vector<int> pool(used);
  std::iota(pool.begin(), pool.end(), 0);
  auto root = [&pool](int g) {
    while (pool[g] != g) g = pool[g];
    return g;
  };
  for (int a = 0; a < used; ++a) {
    for (int b = a + 1; b < used; ++b) {
      const bool overlap =
          std::any_of(near[b].begin(), near[b].end(), [&](int c) { return near[a].count(c) > 0; });
      if (overlap && root(a) != root(b)) pool[root(b)] = root(a);
    }
  }
  const int mine = root(local_rank % gpus);
  std::set<int> pool_cores;
  std::vector<int> pool_gpus;
  for (int g = 0; g < used; ++g) {
    if (root(g) != mine) continue;
    pool_cores.insert(near[g].begin(), near[g].end());
    pool_gpus.push_back(g);
  }
  int count = 0, index = 0;
  for (int r = 0; r < local_size; ++r) {
    if (root(r % gpus) != mine) continue;
    if (r < local_rank) ++index;
    ++count;
  }
  if (static_cast<int>(pool_cores.size()) < count) {
    return failed_precondition(name + ": " + std::to_string(count) +
                               " ranks on GPU cuda:" + format_ranks(pool_gpus) + " but only " +
                               std::to_string(pool_cores.size()) +
                               " cores near it; each rank needs a core of its own");
  }
  const std::vector<int> ordered(pool_cores.begin(), pool_cores.end());
  std::vector<int> cores;
  for (int c : cut_block(static_cast<int>(ordered.size()), count, index)) {
    cores.push_back(ordered[c]);
  }
  return std::optional<std::vector<int>>(std::move(cores));
}

}  // namespace

StatusOr<CpuPlan> plan_cpus(const CpuLayout& layout, BindMode mode, int local_rank,
                            int local_size) {
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
    return invalid_argument("plan_cpus: local rank " + std::to_string(local_rank) + " of " +
                            std::to_string(local_size));
  }
  const int gpu = gpu_of(layout, local_rank);
  if (mode == BindMode::kNone) {
    CpuPlan none;
    none.gpu = gpu;
    return none;
  }
  const int cores = static_cast<int>(layout.cores.size());
  if (cores == 0) return internal_error("plan_cpus: the host has no usable cores");
  const std::string name = std::string("CHORUS_BIND=") + kBindWords.name(mode);
  if (cores < local_size) {
    return failed_precondition(name + ": " + std::to_string(local_size) +
                               " ranks on this host but only " + std::to_string(cores) +
                               " cores; each rank needs a core of its own");
  }
  if (!layout.gpus.empty()) {
    StatusOr<std::optional<std::vector<int>>> near =
        cores_near_gpus(layout, name, local_rank, local_size);
    if (!near.ok()) return near.status();
    if (*near) {
      CpuPlan plan = plan_from_cores(layout, **near);
      plan.gpu = gpu;
      return plan;
    }
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
  CpuPlan plan = plan_from_cores(layout, mine);
  plan.gpu = gpu;
  return plan;
}

}  // namespace chorus
