#include "topology/hwloc_binding.h"

#include <hwloc.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace chorus {
namespace {

Status hwloc_error(const std::string& call) {
  return internal_error("hwloc: " + call + " failed: " + std::strerror(errno));
}

#define CHORUS_HWLOC_CHECK(call)               \
  do {                                         \
    if ((call) < 0) return hwloc_error(#call); \
  } while (0)

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

StatusOr<Bitmap> new_bitmap() {
  Bitmap set(hwloc_bitmap_alloc());
  if (!set) return internal_error("hwloc: hwloc_bitmap_alloc failed (out of memory)");
  return set;
}

StatusOr<Bitmap> to_bitmap(const std::vector<int>& pus) {
  StatusOr<Bitmap> set = new_bitmap();
  if (!set.ok()) return set.status();
  for (int pu : pus) {
    if (pu < 0) return invalid_argument("hwloc: negative PU index " + std::to_string(pu));
    CHORUS_HWLOC_CHECK(hwloc_bitmap_set(set->get(), static_cast<unsigned>(pu)));
  }
  return set;
}

std::vector<int> to_list(hwloc_const_bitmap_t set) {
  std::vector<int> pus;
  int pu = -1;
  while ((pu = hwloc_bitmap_next(set, pu)) != -1) pus.push_back(pu);
  return pus;
}

// The object `index` of `type`, or an error naming the lookup (the count came from the same
// topology, so a miss means hwloc is inconsistent).
StatusOr<hwloc_obj_t> object(hwloc_topology_t t, hwloc_obj_type_t type, int index,
                             const char* type_name) {
  hwloc_obj_t obj = hwloc_get_obj_by_type(t, type, static_cast<unsigned>(index));
  if (!obj || !obj->cpuset) {
    return internal_error(std::string("hwloc: hwloc_get_obj_by_type(") + type_name + ", " +
                          std::to_string(index) + ") returned " +
                          (obj ? "an object without a cpuset" : "nothing"));
  }
  return obj;
}

StatusOr<int> count(hwloc_topology_t t, hwloc_obj_type_t type, const char* type_name) {
  const int n = hwloc_get_nbobjs_by_type(t, type);
  if (n < 0) {
    return internal_error(std::string("hwloc: hwloc_get_nbobjs_by_type(") + type_name +
                          ") returned " + std::to_string(n));
  }
  return n;
}

}  // namespace

void HwlocTopology::Destroy::operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }

StatusOr<HwlocTopology> HwlocTopology::load() {
  hwloc_topology_t raw = nullptr;
  CHORUS_HWLOC_CHECK(hwloc_topology_init(&raw));
  HwlocTopology topo(raw);
  CHORUS_HWLOC_CHECK(hwloc_topology_load(raw));
  return topo;
}

StatusOr<CpuLayout> HwlocTopology::cpu_layout() const {
  hwloc_topology_t t = topo_.get();
  StatusOr<int> ncores = count(t, HWLOC_OBJ_CORE, "HWLOC_OBJ_CORE");
  if (!ncores.ok()) return ncores.status();
  StatusOr<int> nnuma = count(t, HWLOC_OBJ_NUMANODE, "HWLOC_OBJ_NUMANODE");
  if (!nnuma.ok()) return nnuma.status();
  std::vector<hwloc_obj_t> nodes;
  for (int n = 0; n < *nnuma; ++n) {
    StatusOr<hwloc_obj_t> node = object(t, HWLOC_OBJ_NUMANODE, n, "HWLOC_OBJ_NUMANODE");
    if (!node.ok()) return node.status();
    nodes.push_back(*node);
  }
  CpuLayout layout;
  for (int i = 0; i < *ncores; ++i) {
    StatusOr<hwloc_obj_t> core = object(t, HWLOC_OBJ_CORE, i, "HWLOC_OBJ_CORE");
    if (!core.ok()) return core.status();
    CpuCore c;
    for (hwloc_obj_t node : nodes) {
      if (hwloc_bitmap_intersects(node->cpuset, (*core)->cpuset)) {
        c.numa = static_cast<int>(node->os_index);
        break;
      }
    }
    c.pus = to_list((*core)->cpuset);
    if (!c.pus.empty()) layout.cores.push_back(std::move(c));
  }
  if (layout.cores.empty()) return internal_error("hwloc: the topology lists no cores");
  return layout;
}

Status HwlocTopology::bind(const std::vector<int>& pus, int flags, const char* what) const {
  if (pus.empty()) return invalid_argument(std::string(what) + ": no processing units given");
  StatusOr<Bitmap> set = to_bitmap(pus);
  if (!set.ok()) return set.status();
  if (hwloc_set_cpubind(topo_.get(), set->get(), flags) < 0) {
    return hwloc_error(std::string("hwloc_set_cpubind(") + what + ", PUs " + format_cpu_list(pus) +
                       ")");
  }
  return {};
}

Status HwlocTopology::bind_process(const std::vector<int>& pus) const {
  return bind(pus, HWLOC_CPUBIND_PROCESS, "process");
}

Status HwlocTopology::bind_this_thread(const std::vector<int>& pus) const {
  return bind(pus, HWLOC_CPUBIND_THREAD, "thread");
}

StatusOr<std::vector<int>> HwlocTopology::this_thread_binding() const {
  StatusOr<Bitmap> set = new_bitmap();
  if (!set.ok()) return set.status();
  CHORUS_HWLOC_CHECK(hwloc_get_cpubind(topo_.get(), set->get(), HWLOC_CPUBIND_THREAD));
  return to_list(set->get());
}

StatusOr<CpuLayout> load_cpu_layout() {
  StatusOr<HwlocTopology> topo = HwlocTopology::load();
  if (!topo.ok()) return topo.status();
  return topo->cpu_layout();
}

}  // namespace chorus
