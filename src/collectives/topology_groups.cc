#include "collectives/topology_groups.h"

#include <string>
#include <utility>
#include <vector>

#include "collectives/providers.h"

namespace chorus {
namespace {

// A group's host-memory backends, as the registry gives any set's.
StatusOr<std::unique_ptr<BackendChoice>> host_choice(Group& group, const RankMap& map,
                                                     const std::vector<int>& ranks,
                                                     bool shared_memory, std::string label) {
  ProviderSet set;
  set.label = std::move(label);
  set.ranks = ranks;
  set.map = &map;
  set.shared_memory = shared_memory;
  set.group = &group;
  StatusOr<BackendChoice> choice = assemble(Memory::kHost, set);
  if (!choice.ok()) return choice.status();
  return std::make_unique<BackendChoice>(std::move(choice).value());
}

}  // namespace

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
    return internal_error(
        "create_topology_groups: the groups the world built disagree with "
        "the map");
  }
  StatusOr<std::unique_ptr<BackendChoice>> local_host =
      host_choice(*groups.local, map, map.local_set(), shared_memory, "local group");
  if (!local_host.ok()) return local_host.status();
  groups.local_host = std::move(local_host).value();
  StatusOr<std::unique_ptr<BackendChoice>> cross_host =
      host_choice(*groups.cross, map, map.cross_set(), shared_memory, "cross group");
  if (!cross_host.ok()) return cross_host.status();
  groups.cross_host = std::move(cross_host).value();
  return groups;
}

}  // namespace chorus
