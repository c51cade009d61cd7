#pragma once
// hwloc behind a small seam: read the host's cores (for cpu_plan.h) and bind the process or
// the calling thread to a list of processing units. The topology is loaded once per
// HwlocTopology (a few milliseconds: it walks sysfs, PCI devices included, to find the
// GPUs), so one object serves a whole binding.
// Every hwloc call is checked and a failure names the call (and errno where hwloc sets it).

#include <memory>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "topology/cpu_plan.h"

struct hwloc_topology;  // hwloc.h stays out of this header

namespace chorus {

/// The host's topology, as hwloc loaded it. Movable, not copyable. Calls may come from any
/// one thread at a time; binding calls act on the process or on the calling thread.
class HwlocTopology {
 public:
  /// This host, with its PCI devices (hwloc's "important" I/O objects: GPUs, NICs, bridges).
  static StatusOr<HwlocTopology> load();
  /// A topology described by hwloc XML (`lstopo foo.xml`), I/O objects kept the same way; for
  /// tests and for planning another machine's layout. Binding calls on it fail.
  static StatusOr<HwlocTopology> load_xml(const std::string& xml);

  /// The cores this process is allowed to use (its cgroup/cpuset), in topology order, and
  /// the NVIDIA GPUs (PCI vendor 0x10de, class VGA or 3D controller) in PCI bus order, each
  /// with the cores and NUMA nodes of its first non-I/O ancestor. No CUDA is involved.
  StatusOr<CpuLayout> cpu_layout() const;
  /// Binds every thread of the process to `pus` (OS indices).
  Status bind_process(const std::vector<int>& pus) const;
  /// Binds only the calling thread to `pus`.
  Status bind_this_thread(const std::vector<int>& pus) const;
  /// The calling thread's current binding, as OS indices of processing units.
  StatusOr<std::vector<int>> this_thread_binding() const;

 private:
  struct Destroy {
    void operator()(hwloc_topology* t) const;
  };
  explicit HwlocTopology(hwloc_topology* t) : topo_(t) {}
  Status bind(const std::vector<int>& pus, int flags, const char* what) const;

  std::unique_ptr<hwloc_topology, Destroy> topo_;
};

/// HwlocTopology::load() then cpu_layout(), for callers that only read the cores.
StatusOr<CpuLayout> load_cpu_layout();

}  // namespace chorus
