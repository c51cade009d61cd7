#include "topology/topology_groups.h"

namespace chorus {

StatusOr<TopologyGroups> create_topology_groups(MpiWorld& world, const RankMap& map) {
  TopologyGroups groups;
  // Every rank walks the same lists in the same order; create_group returns a group only
  // on the members, so each rank keeps exactly one of each kind.
  for (const std::vector<int>& host : map.hosts) {
    StatusOr<std::unique_ptr<MpiGroup>> g = world.create_group(host);
    if (!g.ok()) return g.status();
    if (*g) groups.local = std::move(g).value();
  }
  for (const std::vector<int>& cross : map.cross_sets) {
    StatusOr<std::unique_ptr<MpiGroup>> g = world.create_group(cross);
    if (!g.ok()) return g.status();
    if (*g) groups.cross = std::move(g).value();
  }
  if (!groups.local || !groups.cross) {
    return internal_error("create_topology_groups: this rank is missing from its own sets");
  }
  return groups;
}

}  // namespace chorus
