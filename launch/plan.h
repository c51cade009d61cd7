#pragma once
// How many ranks go to which host: `mpirun -map-by ppr:K:node` semantics when --ppr is
// given (K ranks on each of the first np/K hosts), otherwise the hosts' slots filled in
// order. Impossible requests are errors that say what to change, before anything starts.

#include <optional>
#include <string>
#include <vector>

#include "allocation.h"

namespace chorus::launch {

struct Placement {
  std::string host;
  int ranks = 0;       ///< ranks on this host
  int first_rank = 0;  ///< global rank of its local rank 0 (ranks are consecutive per host)
};

struct Plan {
  int np = 0;
  int ppr = 0;  ///< ranks per host when every used host has the same number, else 0
  /// No --ppr, and every slot of the allocation gets one rank: the layout is the
  /// allocation's own.
  bool fills_allocation = false;
  std::vector<Placement> hosts;  ///< the hosts used, in order
};

struct PlanRequest {
  std::optional<int> np;   ///< -np
  std::optional<int> ppr;  ///< --ppr
  bool oversubscribe = false;
};

StatusOr<Plan> make_plan(const Allocation& allocation, const PlanRequest& request);

}  // namespace chorus::launch
