#pragma once
// Where each rank runs, computed from every rank's host name (gathered over MPI), never
// from launcher variables: a pure function so it is tested without MPI.

#include <string>
#include <vector>

namespace chorus {

struct RankMap {
  int local_rank = 0;  ///< index among the ranks on this host, in global rank order
  int local_size = 1;  ///< ranks on this host
  int cross_rank = 0;  ///< this host's index, hosts ordered by their lowest global rank
  int cross_size = 1;  ///< number of hosts
  std::vector<std::vector<int>> hosts;  ///< global ranks on each host, by host index
  std::vector<std::string> host_names;  ///< name of each host, by host index
};

/// `names[r]` is the host of global rank r.
RankMap compute_rank_map(const std::vector<std::string>& names, int rank);

}  // namespace chorus
