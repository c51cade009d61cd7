#pragma once
// Which CPUs each local rank gets when Chorus binds (CHORUS_BIND=core|numa). Pure: it plans
// on a description of the host's cores that hwloc_binding.h reads, so the same plan is
// unit-tested and printed by `chorusrun --explain`.

#include <optional>
#include <string>
#include <vector>

#include "chorus/status.h"

namespace chorus {

enum class BindMode { kNone, kCore, kNuma };

/// "none", "core" or "numa" (CHORUS_BIND); an error naming `variable` and the value otherwise.
/// An empty value is kNone.
StatusOr<BindMode> parse_bind_mode(const std::string& value, const std::string& variable);
const char* bind_mode_name(BindMode mode);

/// One core: the OS indices of its processing units (hyperthreads) and its NUMA node.
struct CpuCore {
  int numa = 0;
  std::vector<int> pus;
};
/// The cores this process may use, in topology order (package, NUMA node, core), so that
/// consecutive cores are close to each other.
struct CpuLayout {
  std::vector<CpuCore> cores;
  int numa_count() const;
};

struct CpuPlan {
  std::vector<int> pus;         ///< the rank's processing units (the process binding)
  std::vector<int> thread_pus;  ///< the background thread's: the last core of `pus`
  int cores = 0;                ///< cores in `pus`
  std::string describe;         ///< "cores 2-3 (PUs 2-3, NUMA 0)"
};

/// The CPUs of local rank `local_rank` of `local_size`, disjoint from every other local
/// rank's (process and background thread alike); fewer cores than ranks is a
/// failed_precondition.
/// - core: when the ranks divide evenly over the NUMA nodes (and each node has a core per
///   rank), each node's cores are cut among its ranks, so no block spans two nodes;
///   otherwise all cores are cut into `local_size` consecutive blocks. Either way the first
///   (cores % ranks) ranks of a cut get one core more.
/// - numa: with no more ranks than NUMA nodes, each rank gets whole nodes of its own;
///   otherwise ranks are spread evenly over the nodes (rank r on node r * nodes / ranks)
///   and each node's cores are cut among the ranks placed on it.
StatusOr<CpuPlan> plan_cpus(const CpuLayout& layout, BindMode mode, int local_rank, int local_size);

/// "0-3,8": a list of CPU indices.
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace chorus
