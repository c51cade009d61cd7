#pragma once
// The local and cross process groups that hierarchical collectives run over: the ranks of
// this host, and the ranks with this local_rank on every host (RankMap::local_set() and
// cross_set()). Each is a Group (collectives/world.h) with its own communicators, and its
// host-memory calls go through a choice the provider registry assembles like any set's
// (collectives/providers.h): the local group's reductions through shared memory where every
// rank of the host maps it, the rest (and otherwise everything) by the group's own backend.

#include <memory>

#include "chorus/status.h"
#include "collectives/backend_choice.h"
#include "collectives/world.h"
#include "topology/rank_map.h"

namespace chorus {

struct TopologyGroups {
  std::unique_ptr<Group> local;  ///< this host's ranks, ordered by local_rank
  std::unique_ptr<Group> cross;  ///< one rank per host, ordered by cross_rank
  /// Each group's host-memory backends (the hierarchy's levels run on them).
  std::unique_ptr<BackendChoice> local_host;
  std::unique_ptr<BackendChoice> cross_host;
};

/// Collective over every rank of `world`, with `map` computed on every rank from the same
/// names. Costs two communicator splits (and a dup each), whatever the number of hosts.
/// `shared_memory` (CHORUS_SHARED_MEMORY, the same on every rank): whether the local group
/// may reduce through shared memory.
StatusOr<TopologyGroups> create_topology_groups(World& world, const RankMap& map,
                                                bool shared_memory);

}  // namespace chorus
