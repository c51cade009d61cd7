#include "topology/rank_map.h"

#include <map>

namespace chorus {

RankMap compute_rank_map(const std::vector<std::string>& names, int rank) {
  RankMap map;
  std::map<std::string, int> host_index;
  for (int r = 0; r < static_cast<int>(names.size()); ++r) {
    auto [it, fresh] = host_index.try_emplace(names[r], static_cast<int>(map.hosts.size()));
    if (fresh) {
      map.hosts.emplace_back();
      map.host_names.push_back(names[r]);
    }
    map.hosts[it->second].push_back(r);
  }
  const int host = host_index.at(names.at(rank));
  const std::vector<int>& local = map.hosts[host];
  map.cross_rank = host;
  map.cross_size = static_cast<int>(map.hosts.size());
  map.local_size = static_cast<int>(local.size());
  for (int i = 0; i < map.local_size; ++i) {
    if (local[i] == rank) map.local_rank = i;
  }
  return map;
}

}  // namespace chorus
