#pragma once
// The fusion planner: which responses share a fusion buffer. A pure function of its inputs
// (so every rank, given the same responses, makes the same plan).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus {

struct FusionItem {
  std::size_t bytes = 0;
  uint64_t key = 0;      ///< items fuse only with items of the same key
  bool fusible = false;  ///< false: always alone (non-allreduce ops)
};

struct FusionBatch {
  std::vector<std::size_t> items;  ///< indices into the input, in input order
  std::size_t bytes = 0;
};

/// Packs items into batches of at most `threshold` bytes. Each key has one open batch;
/// an item joins its key's open batch if it fits, otherwise that batch closes and a new one
/// opens. Items larger than the threshold, or not fusible, run alone. Batches come out in
/// the order of their first item. threshold 0 disables fusion.
std::vector<FusionBatch> plan_fusion(const std::vector<FusionItem>& items, std::size_t threshold);

}  // namespace chorus
