#include "topology/hwloc_binding.h"

#include <hwloc.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

namespace chorus {
namespace {

Status hwloc_error(const char* call) {
  return internal_error(std::string("hwloc: ") + call + " failed: " + std::strerror(errno));
}

#define CHORUS_HWLOC_CHECK(call)               \
  do {                                         \
    if ((call) < 0) return hwloc_error(#call); \
  } while (0)

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

StatusOr<Topology> load_topology() {
  hwloc_topology_t raw = nullptr;
  CHORUS_HWLOC_CHECK(hwloc_topology_init(&raw));
  Topology topo(raw);
  CHORUS_HWLOC_CHECK(hwloc_topology_load(raw));
  return topo;
}

Bitmap to_bitmap(const std::vector<int>& pus) {
  Bitmap set(hwloc_bitmap_alloc());
  for (int pu : pus) hwloc_bitmap_set(set.get(), static_cast<unsigned>(pu));
  return set;
}

Status bind(const std::vector<int>& pus, int flags, const char* what) {
  if (pus.empty()) return invalid_argument(std::string(what) + ": no processing units given");
  StatusOr<Topology> topo = load_topology();
  if (!topo.ok()) return topo.status();
  Bitmap set = to_bitmap(pus);
  if (hwloc_set_cpubind(topo->get(), set.get(), flags) < 0) {
    return internal_error(std::string("hwloc: hwloc_set_cpubind(") + what + ", PUs " +
                          format_cpu_list(pus) + ") failed: " + std::strerror(errno));
  }
  return {};
}

}  // namespace

StatusOr<CpuLayout> load_cpu_layout() {
  StatusOr<Topology> topo = load_topology();
  if (!topo.ok()) return topo.status();
  hwloc_topology_t t = topo->get();
  CpuLayout layout;
  const int ncores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  const int nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < ncores; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
    CpuCore c;
    for (int n = 0; n < nnuma; ++n) {
      hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(n));
      if (hwloc_bitmap_intersects(node->cpuset, core->cpuset)) {
        c.numa = static_cast<int>(node->os_index);
        break;
      }
    }
    int pu = -1;
    while ((pu = hwloc_bitmap_next(core->cpuset, pu)) != -1) c.pus.push_back(pu);
    if (!c.pus.empty()) layout.cores.push_back(std::move(c));
  }
  if (layout.cores.empty()) return internal_error("hwloc: the topology lists no cores");
  return layout;
}

Status bind_process(const std::vector<int>& pus) {
  return bind(pus, HWLOC_CPUBIND_PROCESS, "process");
}

Status bind_this_thread(const std::vector<int>& pus) {
  return bind(pus, HWLOC_CPUBIND_THREAD, "thread");
}

StatusOr<std::vector<int>> this_thread_binding() {
  StatusOr<Topology> topo = load_topology();
  if (!topo.ok()) return topo.status();
  Bitmap set(hwloc_bitmap_alloc());
  CHORUS_HWLOC_CHECK(hwloc_get_cpubind(topo->get(), set.get(), HWLOC_CPUBIND_THREAD));
  std::vector<int> pus;
  int pu = -1;
  while ((pu = hwloc_bitmap_next(set.get(), pu)) != -1) pus.push_back(pu);
  return pus;
}

}  // namespace chorus
