#include "topology/hwloc_binding.h"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>

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

constexpr unsigned kNvidiaVendor = 0x10de;
constexpr unsigned kClassVga = 0x0300;  // PCI class 03 (display), subclass 00 (VGA)
constexpr unsigned kClass3d = 0x0302;   // subclass 02: 3D controller (data-centre GPUs)

bool is_nvidia_gpu(hwloc_obj_t dev) {
  const auto& pci = dev->attr->pcidev;
  return pci.vendor_id == kNvidiaVendor && (pci.class_id == kClassVga || pci.class_id == kClass3d);
}

std::string bus_id(hwloc_obj_t dev) {
  const auto& pci = dev->attr->pcidev;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", static_cast<unsigned>(pci.domain),
                static_cast<unsigned>(pci.bus), static_cast<unsigned>(pci.dev),
                static_cast<unsigned>(pci.func));
  return buf;
}

// I/O objects are filtered out by default; GPUs, NICs and the bridges above them are what
// "important" keeps (not every PCI device), enough to place each GPU.
Status keep_io(hwloc_topology_t t) {
  CHORUS_HWLOC_CHECK(hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT));
  return {};
}

}  // namespace

void HwlocTopology::Destroy::operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }

StatusOr<HwlocTopology> HwlocTopology::load() {
  hwloc_topology_t raw = nullptr;
  CHORUS_HWLOC_CHECK(hwloc_topology_init(&raw));
  HwlocTopology topo(raw);
  if (Status s = keep_io(raw); !s.ok()) return s;
  CHORUS_HWLOC_CHECK(hwloc_topology_load(raw));
  return topo;
}

StatusOr<HwlocTopology> HwlocTopology::load_xml(const std::string& xml) {
  hwloc_topology_t raw = nullptr;
  CHORUS_HWLOC_CHECK(hwloc_topology_init(&raw));
  HwlocTopology topo(raw);
  if (Status s = keep_io(raw); !s.ok()) return s;
  // hwloc wants the terminating NUL counted in the length.
  CHORUS_HWLOC_CHECK(
      hwloc_topology_set_xmlbuffer(raw, xml.c_str(), static_cast<int>(xml.size() + 1)));
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
  std::vector<hwloc_const_cpuset_t> core_sets;  // parallel to layout.cores
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
    if (c.pus.empty()) continue;
    layout.cores.push_back(std::move(c));
    core_sets.push_back((*core)->cpuset);
  }
  if (layout.cores.empty()) return internal_error("hwloc: the topology lists no cores");

  std::vector<hwloc_obj_t> gpus;
  for (hwloc_obj_t dev = hwloc_get_next_pcidev(t, nullptr); dev;
       dev = hwloc_get_next_pcidev(t, dev)) {
    if (is_nvidia_gpu(dev)) gpus.push_back(dev);
  }
  auto bus_order = [](hwloc_obj_t a, hwloc_obj_t b) {
    const auto& x = a->attr->pcidev;
    const auto& y = b->attr->pcidev;
    return std::tie(x.domain, x.bus, x.dev, x.func) < std::tie(y.domain, y.bus, y.dev, y.func);
  };
  std::sort(gpus.begin(), gpus.end(), bus_order);
  for (hwloc_obj_t dev : gpus) {
    GpuLocality g;
    g.index = static_cast<int>(layout.gpus.size());
    g.pci_bus_id = bus_id(dev);
    // The package or NUMA-level group the PCI bus hangs off; its cpuset is the GPU's locality.
    hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(t, dev);
    if (near && near->cpuset) {
      for (int c = 0; c < static_cast<int>(core_sets.size()); ++c) {
        if (hwloc_bitmap_isincluded(core_sets[c], near->cpuset)) g.cores.push_back(c);
      }
    }
    if (near && near->nodeset) {
      for (hwloc_obj_t node : nodes) {
        if (hwloc_bitmap_isset(near->nodeset, node->os_index)) {
          g.numa.push_back(static_cast<int>(node->os_index));
        }
      }
    }
    layout.gpus.push_back(std::move(g));
  }
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
