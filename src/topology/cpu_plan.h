#pragma once
// Which CPUs each local rank gets when Chorus binds (CHORUS_BIND=core|numa). Pure: it plans
// on a description of the host's cores that hwloc_binding.h reads, so the same plan is
// unit-tested and printed by `chorusrun --explain`. With NVIDIA GPUs on the host, each local
// rank's CPUs come from the cores nearest its GPU.

#include <optional>
#include <string>
#include <vector>

#include "base/words.h"
#include "chorus/status.h"

namespace chorus {

enum class BindMode { kNone, kCore, kNuma };

/// CHORUS_BIND's words; empty reads as none.
inline constexpr Words<BindMode, 3> kBindWords{{{
    {BindMode::kNone, "none"},
    {BindMode::kCore, "core"},
    {BindMode::kNuma, "numa"},
}}};

/// One core: the OS indices of its processing units (hyperthreads) and its NUMA node.
struct CpuCore {
  int numa = 0;
  std::vector<int> pus;
};
/// An NVIDIA GPU and the CPUs near it, as hwloc places its PCI device.
struct GpuLocality {
  int index = 0;           ///< position among the host's GPUs in PCI bus order
  std::string pci_bus_id;  ///< "0000:3b:00.0"
  std::vector<int> numa;   ///< OS indices of the NUMA nodes near it; empty when unknown
  /// Indices into CpuLayout::cores of the cores near it: those of its first non-I/O
  /// ancestor (a NUMA node's group or a package). Empty when hwloc does not place it.
  std::vector<int> cores;
};

/// The cores this process may use, in topology order (package, NUMA node, core), so that
/// consecutive cores are close to each other, and the GPUs the ranks use.
struct CpuLayout {
  std::vector<CpuCore> cores;
  /// In CUDA device order: all the host's NVIDIA GPUs in PCI bus order as hwloc reads them,
  /// or those CUDA_VISIBLE_DEVICES keeps once select_gpus() applied it. Empty: no GPU, and
  /// plans follow core order only.
  std::vector<GpuLocality> gpus;
  int numa_count() const;
};

/// Which of the host's GPUs (indices in PCI bus order) the ranks see, in CUDA device order.
struct VisibleGpus {
  std::vector<int> order;
  std::string note;  ///< why CUDA_VISIBLE_DEVICES was not followed as written; empty if it was
};

/// Reads CUDA_VISIBLE_DEVICES (`value`, nullopt when unset) against `gpu_count` GPUs, as CUDA
/// does with a comma list of indices: the listed GPUs in the listed order, stopping at the
/// first entry that is not a valid, unused index (an empty value hides every GPU). UUID
/// entries ("GPU-…", "MIG-…") cannot be matched without CUDA: all GPUs in PCI bus order,
/// with a note saying so. Assumes CUDA numbers GPUs in PCI bus order
/// (CUDA_DEVICE_ORDER=PCI_BUS_ID; CUDA's default order is usually the same on alike GPUs).
VisibleGpus visible_gpus(const std::optional<std::string>& value, int gpu_count);

/// `layout` with its GPUs (in PCI bus order) narrowed and reordered to `order`.
CpuLayout select_gpus(CpuLayout layout, const std::vector<int>& order);

/// The GPU (index into layout.gpus, i.e. the CUDA device) of local rank `local_rank`:
/// local_rank mod the number of GPUs; -1 without GPUs.
int gpu_of(const CpuLayout& layout, int local_rank);

/// "cuda:1 (PCI 0000:3b:00.0, NUMA 0)" for layout.gpus[gpu].
std::string describe_gpu(const CpuLayout& layout, int gpu);

struct CpuPlan {
  std::vector<int> pus;         ///< the rank's processing units (the process binding)
  std::vector<int> thread_pus;  ///< the background thread's: the last core of `pus`
  int cores = 0;                ///< cores in `pus`
  std::string describe;         ///< "cores 2-3 (PUs 2-3, NUMA 0)"
  int gpu = -1;                 ///< the rank's GPU (gpu_of), also with kNone; -1 without GPUs
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
/// - with GPUs (either mode): rank r takes GPU gpu_of(r), and the ranks whose GPUs are near
///   the same cores cut those cores among themselves in local-rank order (GPUs whose core
///   sets overlap pool them), so every rank runs next to its GPU; cores near no used GPU
///   stay unused. When a used GPU has no locality (no cores, or all of them), the plan is
///   the one without GPUs. Fewer cores near a GPU than ranks on them: failed_precondition.
StatusOr<CpuPlan> plan_cpus(const CpuLayout& layout, BindMode mode, int local_rank, int local_size);

/// "0-3,8": a list of CPU indices.
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace chorus
