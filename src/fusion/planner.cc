#include "fusion/planner.h"

#include <unordered_map>

namespace chorus {

std::vector<FusionBatch> plan_fusion(const std::vector<FusionItem>& items, std::size_t threshold) {
  std::vector<FusionBatch> batches;
  std::unordered_map<uint64_t, std::size_t> open;  // key -> index of its open batch
  for (std::size_t i = 0; i < items.size(); ++i) {
    const FusionItem& item = items[i];
    if (threshold == 0 || !item.fusible || item.bytes > threshold) {
      batches.push_back({{i}, item.bytes});
      continue;
    }
    auto it = open.find(item.key);
    if (it != open.end() && batches[it->second].bytes + item.bytes <= threshold) {
      batches[it->second].items.push_back(i);
      batches[it->second].bytes += item.bytes;
      continue;
    }
    open[item.key] = batches.size();
    batches.push_back({{i}, item.bytes});
  }
  return batches;
}

}  // namespace chorus
