#include "torch/shard_layout.h"

#include <algorithm>
#include <map>
#include <utility>

namespace chorus::torch {

std::vector<Bucket> lay_out_buckets(const std::vector<ParameterShape>& shapes, int64_t bucket_bytes,
                                    int ranks) {
  std::vector<Bucket> buckets;
  std::map<std::pair<int, std::string>, std::size_t> open;  // (group, kind) -> its bucket
  for (std::size_t k = shapes.size(); k-- > 0;) {
    const ParameterShape& p = shapes[k];
    const auto key = std::make_pair(p.group, p.kind);
    auto it = open.find(key);
    if (it != open.end()) {
      const Bucket& b = buckets[it->second];
      if ((b.numel + p.numel) * p.element_size > bucket_bytes) {
        open.erase(it);
        it = open.end();
      }
    }
    if (it == open.end()) {
      Bucket fresh;
      fresh.group = p.group;
      fresh.kind = p.kind;
      fresh.ranks = ranks;
      buckets.push_back(std::move(fresh));
      it = open.emplace(key, buckets.size() - 1).first;
    }
    Bucket& b = buckets[it->second];
    b.slots.push_back({k, b.numel, p.numel});
    b.numel += p.numel;
  }
  const int64_t unit = kShardAlign * ranks;
  for (Bucket& b : buckets) b.padded = std::max<int64_t>(1, (b.numel + unit - 1) / unit) * unit;
  return buckets;
}

}  // namespace chorus::torch
