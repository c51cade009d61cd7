#pragma once
// Where each trainable parameter lives in the flat buckets of a ShardedReducer, and which part
// of each bucket a rank owns. Pure arithmetic on sizes: the same inputs give the same layout
// on every rank.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::torch {

/// What the layout needs of one parameter.
struct ParameterShape {
  int64_t numel = 0;
  int64_t element_size = 0;
  /// Parameters share a bucket only when both keys are equal: the optimizer's parameter
  /// group (its learning rate applies to the whole shard) and "dtype on device".
  int group = 0;
  std::string kind;
};

struct BucketSlot {
  std::size_t parameter = 0;  // index into the shapes given
  int64_t offset = 0;         // in elements, inside the bucket
  int64_t numel = 0;
};

struct Bucket {
  std::vector<BucketSlot> slots;
  int group = 0;
  std::string kind;
  /// Elements: the parameters' sum, then padded up so that every rank's shard has the same
  /// length, a multiple of kShardAlign elements.
  int64_t numel = 0;
  int64_t padded = 0;
  int64_t shard() const { return padded / ranks; }
  int ranks = 1;
};

/// Shards start at multiples of this many elements (64 bytes of float32).
inline constexpr int64_t kShardAlign = 16;

/// Buckets in the order backward produces gradients, which is taken to be the reverse of
/// the parameters' order (the order a module registers them and runs them forward). A bucket
/// closes when the next parameter of its group and kind would take it past `bucket_bytes`;
/// a parameter larger than that has a bucket of its own. Rank r of `ranks` owns elements
/// [r * shard, (r + 1) * shard) of every bucket.
std::vector<Bucket> lay_out_buckets(const std::vector<ParameterShape>& shapes, int64_t bucket_bytes,
                                    int ranks);

}  // namespace chorus::torch
