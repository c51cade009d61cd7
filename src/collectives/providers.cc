#include "collectives/providers.h"

#include <algorithm>
#include <utility>

#include "base/logging.h"
#include "collectives/gpu_agree.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/shm/shm_backend.h"
#include "collectives/topology_groups.h"

namespace chorus {
namespace {

// Host memory.

// The global set across hosts, where the layout allows it and CHORUS_HIERARCHICAL_ALLREDUCE
// is not 0: the runtime built the local and cross groups wherever this holds
// (hierarchical_groups_needed).
StatusOr<Offered> host_hierarchy(const ProviderSet& set, Backend* below) {
  Offered out;
  if (!set.global_set || set.map->cross_size == 1) return out;
  if (!use_hierarchical_host_allreduce(set.hierarchical, true, *set.map, &out.why)) {
    log().debug("{}: flat host-memory allreduce across hosts: {}", set.label, out.why);
    return out;
  }
  if (!set.groups || !set.groups->local_host || !set.groups->cross_host) {
    return internal_error(set.label + ": the hierarchy has no local and cross groups");
  }
  StatusOr<std::unique_ptr<HierarchicalBackend>> h = HierarchicalBackend::create(
      below, set.groups->local_host.get(), set.groups->cross_host.get(), /*host_memory=*/true);
  if (!h.ok()) return h.status();
  out.backend = h->get();
  out.owned.push_back(std::move(h).value());
  return out;
}

// A set whose members all run on this host, unless CHORUS_SHARED_MEMORY=0. The map and the
// setting are the same on every rank, so all its members join or none.
StatusOr<Offered> host_shared_memory(const ProviderSet& set, Backend*) {
  Offered out;
  if (set.ranks.size() < 2 || !set.map->one_host(set.ranks)) return out;
  StatusOr<std::unique_ptr<Backend>> shared =
      shared_memory_provider(*set.group, set.shared_memory, set.label);
  if (!shared.ok()) return shared.status();
  if (!*shared) return out;
  out.backend = shared->get();
  out.why = "every member runs on this host";
  out.owned.push_back(std::move(shared).value());
  return out;
}

// Every set: the world's group (MPI's communicator, or Gloo's contexts).
StatusOr<Offered> host_group(const ProviderSet& set, Backend*) {
  Offered out;
  out.backend = &set.group->backend();
  out.why = std::string("the set's own group (") + out.backend->name() + ")";
  return out;
}

// GPU memory.

// One level of the hierarchy over `group_host` (one node's ranks, or one rank per node): a
// NCCL communicator is made by the group's members alone, so its outcome is then agreed over
// the whole set: a level that failed on one node fails every node, before any of them makes a
// call the failed node would not make (the other level, the first allreduce's cross step).
Status gpu_level(const ProviderSet& set, Backend& group_host, GpuPath path,
                 const std::string& label, std::unique_ptr<Backend>* out) {
  if (path != GpuPath::kNccl) {
    *out = set.gpu->staged(group_host);
    return {};
  }
  StatusOr<std::unique_ptr<Backend>> made = set.gpu->nccl(group_host, label);
  if (made.ok()) *out = std::move(made).value();
  return agree_on_success(*set.host, made.status(), label + ": its NCCL communicator");
}

// Asked for (CHORUS_HIERARCHICAL_ALLREDUCE=1) where the host hierarchy would run: both
// levels over the set's agreed path.
StatusOr<Offered> gpu_hierarchy_provider(const ProviderSet& set, Backend* below) {
  Offered out;
  GpuHierarchy hierarchy;
  hierarchy.reason = "the runtime built no local and cross groups";
  if (set.map && set.groups && set.groups->local_host && set.groups->cross_host) {
    hierarchy = gpu_hierarchy(set.hierarchical, set.global_set, set.gpu_path->path, *set.map);
  }
  log().debug("{}: {} GPU allreduce: {}", set.label, hierarchy.on ? "hierarchical" : "flat",
              hierarchy.reason);
  if (!hierarchy.on) return out;
  // A level made goes to the maker where a later step fails (see assemble()).
  std::unique_ptr<Backend> local;
  std::unique_ptr<Backend> cross;
  auto failed = [&](Status s) {
    if (local) set.gpu->keep(std::move(local));
    if (cross) set.gpu->keep(std::move(cross));
    return s;
  };
  if (Status s =
          gpu_level(set, *set.groups->local_host, hierarchy.local, set.label + "/local", &local);
      !s.ok()) {
    return failed(s);
  }
  if (Status s =
          gpu_level(set, *set.groups->cross_host, hierarchy.cross, set.label + "/cross", &cross);
      !s.ok()) {
    return failed(s);
  }
  StatusOr<std::unique_ptr<HierarchicalBackend>> h =
      HierarchicalBackend::create(below, local.get(), cross.get());
  if (!h.ok()) return failed(h.status());
  out.backend = h->get();
  out.why = hierarchy.reason;
  out.owned.push_back(std::move(h).value());
  out.owned.push_back(std::move(local));
  out.owned.push_back(std::move(cross));
  return out;
}

// Where the set's agreed path is NCCL. NCCL's own failures name the set's ranks: NCCL cannot
// say which one failed.
StatusOr<Offered> gpu_nccl(const ProviderSet& set, Backend*) {
  Offered out;
  if (set.gpu_path->path != GpuPath::kNccl) return out;
  StatusOr<std::unique_ptr<Backend>> nccl = set.gpu->nccl(*set.host, set.set_name);
  if (!nccl.ok()) return nccl.status();
  out.backend = nccl->get();
  out.why = set.gpu_path->reason;
  out.owned.push_back(std::move(nccl).value());
  return out;
}

// Every set: the host backends, staged through pinned memory.
StatusOr<Offered> gpu_staged(const ProviderSet& set, Backend*) {
  Offered out;
  out.owned.push_back(set.gpu->staged(*set.host));
  out.backend = out.owned.back().get();
  out.why = set.gpu_path->path == GpuPath::kNccl ? "staged through host memory, it serves every "
                                                   "collective"
                                                 : set.gpu_path->reason;
  return out;
}

}  // namespace

const std::vector<Provider>& provider_registry() {
  static const std::vector<Provider> registry = {
      {"hierarchical allreduce", Memory::kHost, host_hierarchy},
      {"shared memory", Memory::kHost, host_shared_memory},
      {"the set's group", Memory::kHost, host_group},
      {"hierarchical allreduce", Memory::kGpu, gpu_hierarchy_provider},
      {"nccl", Memory::kGpu, gpu_nccl},
      {"staged", Memory::kGpu, gpu_staged},
  };
  return registry;
}

StatusOr<BackendChoice> assemble(Memory memory, const ProviderSet& set) {
  std::vector<const Provider*> order;
  for (const Provider& p : provider_registry()) {
    if (p.memory == memory) order.push_back(&p);
  }
  std::vector<BackendChoice::Offer> offers;  // last provider first
  // A failed assembly hands what its providers made to the GPU maker (GpuMaker::keep); host
  // backends are destroyed.
  auto failed = [&offers, &set](Status s) {
    if (set.gpu) {
      for (BackendChoice::Offer& o : offers) {
        for (std::unique_ptr<Backend>& b : o.owned) {
          if (b) set.gpu->keep(std::move(b));
        }
      }
    }
    return s;
  };
  Backend* below = nullptr;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    StatusOr<Offered> made = (*it)->offer(set, below);
    if (!made.ok()) return failed(made.status());
    if (it == order.rbegin()) {
      // The memory's last provider serves every set: what the others fall back on.
      if (!made->backend)
        return failed(internal_error(set.label + ": its last provider serves nothing"));
      below = made->backend;
    }
    if (!made->backend) continue;
    made->provider = (*it)->name;
    offers.push_back(std::move(made).value());
  }
  std::reverse(offers.begin(), offers.end());
  return BackendChoice(set.label, std::move(offers));
}

}  // namespace chorus
