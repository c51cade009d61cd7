// Multi-rank test of create_topology_groups (src/collectives/topology_groups.h) on real MPI
// communicators. The host names are made up, so one machine can check the local and cross
// groups of several layouts: block (ppr:2:node), round-robin and uneven. Each group's
// membership is checked by gathering the members' made-up host names and global ranks
// through the group's own control transport. Run with 4 ranks.
#include "collectives/topology_groups.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "collectives/mpi/mpi_world.h"
#include "topology/rank_map.h"

namespace chorus {
namespace {

int g_failures = 0;

void check(bool ok, const std::string& what, int rank) {
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "topology_groups_test: FAIL on rank %d: %s\n", rank, what.c_str());
}

// Gathers "host/rank" of every member at the group's rank 0, which checks that the members
// are exactly `want` (global ranks, in group order) and that the rows name `want_host`
// (when not empty) for every member.
void check_group(Group& group, const std::vector<std::string>& names, const std::vector<int>& want,
                 int rank, const std::string& what) {
  check(group.size() == static_cast<int>(want.size()),
        what + ": size " + std::to_string(group.size()), rank);
  const int me = static_cast<int>(std::find(want.begin(), want.end(), rank) - want.begin());
  check(group.rank() == me, what + ": rank in group " + std::to_string(group.rank()), rank);
  StatusOr<std::vector<std::string>> rows =
      group.control().gather(names[rank] + "/" + std::to_string(rank));
  check(rows.ok(), what + ": gather failed: " + rows.status().to_string(), rank);
  if (!rows.ok() || group.rank() != 0) return;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::string expected = names[want[i]] + "/" + std::to_string(want[i]);
    check(i < rows->size() && (*rows)[i] == expected,
          what + ": member " + std::to_string(i) + " is '" + (i < rows->size() ? (*rows)[i] : "") +
              "', expected '" + expected + "'",
          rank);
  }
}

void run_layout(World& world, const std::vector<std::string>& names, const char* label) {
  const int rank = world.rank();
  RankMap map = compute_rank_map(names, rank);
  StatusOr<TopologyGroups> groups = create_topology_groups(world, map, true);
  check(groups.ok(), std::string(label) + ": " + groups.status().to_string(), rank);
  if (!groups.ok()) return;
  check_group(*groups->local, names, map.local_set(), rank, std::string(label) + " local");
  check_group(*groups->cross, names, map.cross_set(), rank, std::string(label) + " cross");
  // Hosts of the cross set are all different; the local set's are all this host.
  for (int q : map.cross_set()) {
    check(q == rank || names[q] != names[rank], std::string(label) + ": cross set shares a host",
          rank);
  }
}

}  // namespace
}  // namespace chorus

int main() {
  using namespace chorus;
  StatusOr<std::unique_ptr<World>> world = init_mpi_world();
  if (!world.ok()) {
    std::fprintf(stderr, "init_mpi_world failed: %s\n", world.status().to_string().c_str());
    return 2;
  }
  if ((*world)->size() != 4) {
    std::fprintf(stderr, "topology_groups_test: needs 4 ranks, got %d\n", (*world)->size());
    return 2;
  }
  run_layout(**world, {"a", "a", "b", "b"}, "block");
  run_layout(**world, {"a", "b", "a", "b"}, "round-robin");
  run_layout(**world, {"b", "a", "a", "c"}, "uneven");
  run_layout(**world, {"x", "x", "x", "x"}, "one host");
  const int rank = (*world)->rank();
  Status fin = (*world)->finalize();
  if (!fin.ok()) std::fprintf(stderr, "finalize: %s\n", fin.to_string().c_str());
  std::fprintf(stderr, "topology_groups_test: rank %d %s\n", rank,
               g_failures ? "FAILED" : "passed");
  return g_failures || !fin.ok() ? 1 : 0;
}
