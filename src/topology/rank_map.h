#pragma once
// Where each rank runs, computed from every rank's host name (gathered over MPI), never
// from launcher variables: a pure function so it is tested without MPI. Every rank computes
// the same tables from the same names, so the sets below agree everywhere.

#include <string>
#include <vector>

namespace chorus {

struct RankMap {
  int rank = 0;        ///< this rank's global rank
  int size = 1;        ///< ranks in the job
  int local_rank = 0;  ///< index among the ranks on this host, in global rank order
  int local_size = 1;  ///< ranks on this host
  int cross_rank = 0;  ///< this host's index, hosts ordered by their lowest global rank
  int cross_size = 1;  ///< number of hosts
  std::vector<std::vector<int>> hosts;  ///< global ranks on each host, by host index
  std::vector<std::string> host_names;  ///< name of each host, by host index
  /// cross_sets[i]: the global ranks whose local_rank is i, in host order. With a uniform
  /// layout every host contributes one rank to each; otherwise the later sets are shorter.
  std::vector<std::vector<int>> cross_sets;
  /// Every host runs the same number of ranks (ranks_per_host).
  bool uniform = false;
  /// Uniform, and host h holds exactly ranks h*K .. h*K+K-1: what `mpirun -map-by
  /// ppr:K:node` and `srun --ntasks-per-node K` (block distribution) produce.
  bool ppr_block = false;
  int ranks_per_host = 0;  ///< K when uniform, else 0

  /// The global ranks that share this rank's host (the local process set).
  const std::vector<int>& local_set() const { return hosts.at(cross_rank); }
  /// The ranks with this rank's local_rank, one per host (the cross process set).
  const std::vector<int>& cross_set() const { return cross_sets.at(local_rank); }
  /// "ppr:4:node", "4 ranks per host, not in consecutive blocks" (e.g. round-robin), or
  /// "non-uniform: 3, 1, 2 ranks per host".
  std::string layout() const;
  /// True if every one of `ranks` (global ranks, at least one) runs on one host.
  bool one_host(const std::vector<int>& ranks) const;
};

/// `names[r]` is the host of global rank r; `rank` must index `names`.
RankMap compute_rank_map(const std::vector<std::string>& names, int rank);

/// "0-3,8,10-11": sorted global ranks with runs collapsed.
std::string format_ranks(const std::vector<int>& ranks);
/// One line for this rank: "rank 5/8 on host 'a002': local_rank 1/4, cross_rank 1/2".
std::string describe_rank(const RankMap& map, int rank, int size);
/// The host -> ranks table (first line: ranks, hosts and layout; then one line per host).
std::string format_host_table(const RankMap& map, int size);

}  // namespace chorus
