#pragma once
/// \file
/// ShardedReducer: the engine under ShardedOptimizer (C++ and Python) and under
/// DistributedOptimizer's gradient buckets. It lays the trainable parameters out in flat
/// buckets, in the order backward produces their gradients, and reduces each bucket as one
/// collective as soon as backward has accumulated its last gradient.
///
/// Stages (DeepSpeed's names):
///  - 0: gradients are views into persistent buckets (param.grad() stays such a view), each
///    bucket allreduced in place: no pack, no unpack. Parameters and optimizer state stay
///    whole on every rank.
///  - 1: as 0, and the optimizer's state is sharded: every parameter's storage becomes a view
///    into a flat bucket too, rank r of P owns elements [r s, (r+1) s) of every bucket
///    (s = the padded bucket / P), the wrapped optimizer updates only those (shards()), and
///    gather_parameters() allgathers the updated shards into every rank's parameters.
///  - 2: as 1, and the gradients are sharded: each bucket is packed from the gradients and
///    reduce-scattered during backward, and a rank keeps its shard of the reduced gradient
///    only; param.grad() is released once packed (undefined between steps).
///
/// Every element gets the sum the allreduce of DistributedOptimizer gives it (the core
/// combines every element in one order, whatever the collective or the buffer), so with an
/// element-wise optimizer the weights are those of DistributedOptimizer bit for bit.
///
/// Construction is collective over the process set and fails on every rank, naming the
/// parameter, when the ranks' parameter lists differ. Frozen parameters (requires_grad false)
/// are left out. A parameter without a gradient in a step counts as zero, as in
/// GradientReducer. A sparse gradient is reduced dense and stays dense (for sparse
/// reductions use DistributedOptimizer without buckets).
///
/// Stage 2 gives back what travelled as soon as it can: before a bucket is packed, the
/// buckets whose reduce-scatter completed release their packed buffers (it never waits for
/// one inside backward, where ranks that start buckets in different orders would wait for
/// each other).

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chorus/torch/gradient_reducer.h"

namespace chorus::torch {

struct ShardedOptions {
  /// 0, 1 or 2, as above.
  int stage = 2;
  /// A bucket closes when the next parameter would take it past this many bytes.
  int64_t bucket_bytes = int64_t{25} << 20;
  /// kAverage or kSum, as DistributedOptimizerOptions.
  ReduceOp op = ReduceOp::kAverage;
  double gradient_predivide_factor = 1.0;
  /// Gradients accumulate over this many backward passes; the bucket is reduced on the last
  /// (at stage 2 the whole gradients are kept until then).
  int backward_passes_per_step = 1;
  Compression compression = Compression::kNone;
  ProcessSet process_set;
  std::string name_prefix = "shard.";
};

/// The part of a bucket's elements a parameter holds, for checkpoints and resharding.
struct ShardSlot {
  std::size_t parameter = 0;  ///< index into the parameters given to the reducer
  int64_t offset = 0;         ///< in elements, inside the bucket
  int64_t numel = 0;
};

class ShardedReducer {
 public:
  /// `group_of[i]`: the optimizer's parameter group of parameters[i] (buckets never mix
  /// groups); empty means one group.
  ShardedReducer(NamedParameters parameters, std::vector<int> group_of, ShardedOptions options);
  /// Reductions and gathers still in flight finish first.
  ~ShardedReducer();
  ShardedReducer(const ShardedReducer&) = delete;
  ShardedReducer& operator=(const ShardedReducer&) = delete;

  /// Zeroes the gradients for the next step: stages 0 and 1 zero the buckets in place (and
  /// make any param.grad() that was replaced a view again); stage 2 releases them.
  void zero_grad();
  /// Waits until every bucket is reduced (starting those whose gradients backward did not
  /// all produce; at stages 1 and 2 a parameter whose storage the trainer replaced, as
  /// Module::load does, is copied into its bucket and made a view of it again), then leaves: stage
  /// 0 the reduced gradients in param.grad(); stages 1 and 2 this rank's shard of them in
  /// shards()[b].grad(). Throws chorus::Error on every rank if a reduction failed.
  void synchronize();
  /// Stages 1 and 2: allgathers every bucket's updated shard into the parameters.
  void gather_parameters();
  /// Stages 1 and 2: scales this rank's gradient shards so that the norm of the whole
  /// gradient (over every rank's shards) is at most `max_norm`; returns that norm before
  /// scaling. Collective. Call after synchronize().
  double clip_grad_norm(double max_norm, double norm_type = 2.0);

  /// Checkpoints and resharding. `shard_values` has one tensor per bucket, shaped like
  /// shards()[b] (an optimizer's momentum or moments of that shard; undefined for none);
  /// returns, by allgathers over the set, one whole tensor per parameter given to the
  /// constructor, shaped like it (undefined for frozen parameters and undefined values).
  /// Collective.
  std::vector<::torch::Tensor> gather_to_parameters(
      const std::vector<::torch::Tensor>& shard_values) const;
  /// The inverse, without communication: this rank's shard of every bucket cut from whole
  /// per-parameter tensors (indexed as the constructor's parameters; padding and undefined
  /// values are zeros).
  std::vector<::torch::Tensor> shard_from_parameters(
      const std::vector<::torch::Tensor>& values) const;

  int stage() const;
  /// This rank's shard of every bucket (stages 1 and 2): flat tensors sharing the
  /// parameters' storage, which the wrapped optimizer updates.
  const std::vector<::torch::Tensor>& shards() const;
  /// The optimizer group of each bucket, and the parameters each holds.
  std::size_t bucket_count() const;
  int group_of_bucket(std::size_t bucket) const;
  const std::vector<ShardSlot>& slots(std::size_t bucket) const;
  int64_t padded_numel(std::size_t bucket) const;
  /// This rank's position and the count of ranks the buckets are sharded over.
  int shard_rank() const;
  int shard_count() const;
  ProcessSet process_set() const;
  /// Gradient reductions started since the last synchronize(), counted per parameter.
  int64_t reductions_started() const;
  /// Bytes this rank holds for gradients between steps (buckets or shards).
  int64_t gradient_bytes() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace chorus::torch
