#include "collectives/topology_groups.h"

#include <string>

#include "collectives/shm/shm_backend.h"

namespace chorus {

StatusOr<TopologyGroups> create_topology_groups(World& world, const RankMap& map,
                                                bool shared_memory) {
  // Two splits of the whole world: by host (color: the host's index, cross_rank; order:
  // local_rank) and by local rank index (color: local_rank; order: cross_rank). Every rank
  // computed the same map, so ranks agree on colors and keys.
  TopologyGroups groups;
  StatusOr<std::unique_ptr<Group>> local = world.split(map.cross_rank, map.local_rank);
  if (!local.ok()) return local.status();
  groups.local = std::move(local).value();
  StatusOr<std::unique_ptr<Group>> cross = world.split(map.local_rank, map.cross_rank);
  if (!cross.ok()) return cross.status();
  groups.cross = std::move(cross).value();
  if (groups.local->size() != map.local_size || groups.local->rank() != map.local_rank ||
      groups.cross->size() != static_cast<int>(map.cross_set().size())) {
    return internal_error("create_topology_groups: the groups MPI built disagree with the map");
  }
  // The local group is one host's ranks: like any set on one host, it reduces through shared
  // memory where every rank can map it (unless CHORUS_SHARED_MEMORY=0), and by MPI messages
  // otherwise.
  groups.local_host = std::make_unique<BackendChoice>("local group", &groups.local->backend(),
                                                      "the local group's own communicator");
  if (groups.local->size() > 1) {
    StatusOr<std::unique_ptr<Backend>> shared =
        shared_memory_provider(*groups.local, shared_memory, "local group");
    if (!shared.ok()) return shared.status();
    groups.local_shared = std::move(shared).value();
    if (groups.local_shared)
      groups.local_host->prefer(groups.local_shared.get(), "every local rank maps the segment");
  }
  return groups;
}

}  // namespace chorus
