#include "topology/rank_map.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace chorus {
namespace {

void classify_layout(RankMap& map) {
  const std::size_t k = map.hosts.front().size();
  map.uniform = std::all_of(map.hosts.begin(), map.hosts.end(),
                            [&](const std::vector<int>& h) { return h.size() == k; });
  map.ranks_per_host = map.uniform ? static_cast<int>(k) : 0;
  map.ppr_block = map.uniform;
  for (std::size_t h = 0; h < map.hosts.size() && map.ppr_block; ++h) {
    for (std::size_t i = 0; i < k; ++i) {
      if (map.hosts[h][i] != static_cast<int>(h * k + i)) map.ppr_block = false;
    }
  }
}

}  // namespace

RankMap compute_rank_map(const std::vector<std::string>& names, int rank) {
  RankMap map;
  map.rank = rank;
  map.size = static_cast<int>(names.size());
  std::map<std::string, int> host_index;
  std::vector<int> host_of(names.size());
  for (int r = 0; r < static_cast<int>(names.size()); ++r) {
    auto [it, fresh] = host_index.try_emplace(names[r], static_cast<int>(map.hosts.size()));
    if (fresh) {
      map.hosts.emplace_back();
      map.host_names.push_back(names[r]);
    }
    const int local = static_cast<int>(map.hosts[it->second].size());
    if (local == static_cast<int>(map.cross_sets.size())) map.cross_sets.emplace_back();
    map.cross_sets[local].push_back(r);
    map.hosts[it->second].push_back(r);
    host_of[r] = it->second;
  }
  // A cross set in host order: its member on host h then has index cross_rank (for a
  // uniform layout), whatever order the launcher numbered the ranks in.
  for (std::vector<int>& cross : map.cross_sets) {
    std::sort(cross.begin(), cross.end(), [&](int a, int b) { return host_of[a] < host_of[b]; });
  }
  const int host = host_index.at(names.at(rank));
  const std::vector<int>& local = map.hosts[host];
  map.cross_rank = host;
  map.cross_size = static_cast<int>(map.hosts.size());
  map.local_size = static_cast<int>(local.size());
  for (int i = 0; i < map.local_size; ++i) {
    if (local[i] == rank) map.local_rank = i;
  }
  classify_layout(map);
  return map;
}

bool RankMap::one_host(const std::vector<int>& ranks) const {
  for (const std::vector<int>& host : hosts) {
    auto here = [&host](int r) { return std::find(host.begin(), host.end(), r) != host.end(); };
    if (here(ranks.at(0))) return std::all_of(ranks.begin(), ranks.end(), here);
  }
  return false;
}

std::string RankMap::layout() const {
  if (ppr_block) return "ppr:" + std::to_string(ranks_per_host) + ":node";
  std::ostringstream out;
  if (uniform) {
    out << ranks_per_host << " ranks per host, not in consecutive blocks";
    return out.str();
  }
  out << "non-uniform: ";
  for (std::size_t h = 0; h < hosts.size(); ++h) out << (h ? ", " : "") << hosts[h].size();
  out << " ranks per host";
  return out.str();
}

std::string format_ranks(const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  std::ostringstream out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    out << (i ? "," : "") << sorted[i];
    if (j > i) out << "-" << sorted[j];
    i = j + 1;
  }
  return out.str();
}

std::string describe_rank(const RankMap& map, int rank, int size) {
  std::ostringstream out;
  out << "rank " << rank << "/" << size << " on host '" << map.host_names.at(map.cross_rank)
      << "': local_rank " << map.local_rank << "/" << map.local_size << ", cross_rank "
      << map.cross_rank << "/" << map.cross_size;
  return out.str();
}

std::string format_host_table(const RankMap& map, int size) {
  std::ostringstream out;
  out << "rank map: " << size << " ranks on " << map.cross_size << " host"
      << (map.cross_size == 1 ? "" : "s") << ", layout " << map.layout();
  for (std::size_t h = 0; h < map.hosts.size(); ++h) {
    out << "\n  host " << h << " '" << map.host_names[h] << "': ranks "
        << format_ranks(map.hosts[h]);
  }
  return out.str();
}

}  // namespace chorus
