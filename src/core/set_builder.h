#pragma once
// The one builder of a process set's parts on this rank: its group, the transport of its
// rounds (the host's board for the global set of a job on one host), its negotiator, and its
// executor with the host backends the provider registry assembles (collectives/providers.h)
// and the setup its GPU context will be made from. The set table (core/set_table.h) asks it
// for the global set at start and for every set a response creates.
//
// Thread contract: the thread that runs the cycle.

#include <cstdint>
#include <memory>
#include <vector>

#include "chorus/status.h"
#include "collectives/gpu_context.h"
#include "collectives/topology_groups.h"
#include "collectives/world.h"
#include "core/config.h"
#include "core/doorbell.h"
#include "core/entry_table.h"
#include "core/executor.h"
#include "core/host_rounds.h"
#include "core/negotiator.h"
#include "core/observability.h"
#include "topology/rank_map.h"

namespace chorus {

struct SetState {
  int32_t id = 0;
  std::vector<int> ranks;  // global ranks, in set order
  std::unique_ptr<Group> group;
  std::unique_ptr<HostRounds> host_rounds;  // set when its rounds use the board
  ControlTransport* control = nullptr;      // host_rounds, or the group's
  std::unique_ptr<Negotiator> negotiator;
  // Owns the set's backends (its host choice, its GPU context): declared after the group
  // they run on, so destroyed before it.
  std::unique_ptr<Executor> executor;
  EntryTable entries;
};

class SetBuilder {
 public:
  /// What a set is made of, from the rank's set-up; each pointer outlives the sets built.
  struct Rank {
    World* world = nullptr;
    int rank = -1;
    const Config* config = nullptr;
    const RankMap* map = nullptr;
    Doorbells* doorbells = nullptr;
    TopologyGroups* topology_groups = nullptr;
    RankDevice* gpu_device = nullptr;
  };

  /// `observability` is the runtime's; it outlives the builder.
  SetBuilder(const Rank& rank, Observability* observability)
      : rank_(rank), observability_(observability) {}

  /// The set `id` of `ranks` (global ranks, in set order); null where this rank is not a
  /// member. Collective over the world (the group's creation), then over the set (shared
  /// memory, the hierarchy): it fails on every member where it fails on one.
  StatusOr<std::unique_ptr<SetState>> build(int32_t id, const std::vector<int>& ranks) const;

 private:
  Rank rank_;
  Observability* observability_;
};

}  // namespace chorus
