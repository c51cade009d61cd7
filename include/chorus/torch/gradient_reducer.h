#pragma once
/// \file
/// GradientReducer: the engine under DistributedOptimizer (and the Python DistributedOptimizer).
/// It hooks every parameter's gradient accumulation and starts the gradient's allreduce the
/// moment backward has produced it, so communication overlaps the rest of backward.

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chorus/options.h"
#include "chorus/types.h"

namespace chorus::torch {

/// How gradients travel: as they are, or rounded to 16-bit floats before the wire and
/// widened back after (float32 and float64 gradients only; others go as they are).
enum class Compression { kNone, kFloat16, kBFloat16 };

/// PowerSGD (Vogels et al., NeurIPS 2019), as torch's DDP hook powerSGD_hook defines it: each
/// matrix-shaped gradient M (a parameter of two dimensions or more, seen as its first
/// dimension by the rest) is averaged as a rank-r product P Q^T. Per step: M += the error this
/// rank's approximation left last step; P = M Q, summed over the ranks and orthogonalized
/// (Gram-Schmidt); Q = M^T P, averaged over the ranks; M = P Q^T; the new error is M's value
/// before minus after. Q starts random (the same on every rank) and, with warm_start, carries
/// over from step to step (orthogonalized first). Vectors, integer and 16-bit tensors, and
/// matrices too small to gain min_compression_rate are averaged as usual.
struct PowerSgdOptions {
  /// r; 0 turns PowerSGD off.
  int matrix_approximation_rank = 0;
  /// Steps averaged uncompressed first (counted in synchronize() calls).
  int64_t start_iter = 1000;
  /// A matrix n x m is compressed only if (n + m) r * min_compression_rate < n m.
  double min_compression_rate = 2.0;
  bool error_feedback = true;
  bool warm_start = true;
  /// Added to each column's norm before dividing by it (0: none).
  double orthogonalization_epsilon = 0.0;
  /// Seeds the random Q, with the step and the parameter: the same on every rank.
  uint64_t seed = 0;
};

struct DistributedOptimizerOptions {
  /// kAverage (the mean over ranks) or kSum; DistributedOptimizer also takes kAdasum, which
  /// reduces each local step's delta instead of the gradients (not with
  /// gradient_predivide_factor, groups or bucket_bytes).
  ReduceOp op = ReduceOp::kAverage;
  /// With kAverage: gradients are divided by this factor before the sum and by
  /// size / factor after it, which keeps large sums of low-precision values in range.
  double gradient_predivide_factor = 1.0;
  /// Gradients accumulate locally over this many backward passes and are reduced once, on
  /// the last. They are summed, not averaged, over the passes: divide the loss by the
  /// count for a mean.
  int backward_passes_per_step = 1;
  Compression compression = Compression::kNone;
  ProcessSet process_set;
  /// Prefix of the collective names, "grad." by default; give each optimizer of one
  /// trainer its own.
  std::string name_prefix = "grad.";
  /// Parameters (by index in the list given to the reducer) reduced together as one
  /// grouped allreduce, started once all of them are ready. Parameters in no group are
  /// reduced one by one. A parameter may be in one group at most.
  std::vector<std::vector<std::size_t>> groups;
  /// Sparse gradients (embeddings) are reduced as dense tensors, and given back sparse (the
  /// reduced tensor's non-zeros), as Horovod does. Without it, a gradient that
  /// arrives sparse is reduced with sparse_allreduce_async and stays sparse (for SparseAdam),
  /// decided from the gradient itself at every step, the first included. A rank with no
  /// gradient for a parameter whose gradients are sparse sends an empty sparse one: the
  /// first synchronize() agrees on which parameters had sparse gradients on some rank. A
  /// parameter whose first sparse gradient comes in a later step must get a gradient on
  /// every rank in that step (or the ranks' calls differ and the step stalls).
  bool sparse_as_dense = false;
  /// Gradients in buckets (DistributedOptimizer only): 0 reduces each gradient (or group)
  /// as its own collective, which the core fuses; a positive size keeps the gradients inside
  /// persistent flat buckets of at most that many bytes, laid out in the order backward
  /// produces them, each allreduced in place once its last gradient is accumulated, with no
  /// pack and no unpack (param.grad() is a view into its bucket; ShardedReducer, stage 0).
  /// Not with `groups` or sparse gradients kept sparse.
  int64_t bucket_bytes = 0;
  /// Low-rank compression of the matrix-shaped gradients (op kAverage, no compression to
  /// 16 bits, no groups, no buckets): see PowerSgdOptions.
  PowerSgdOptions powersgd;
};

/// A named parameter list, as Module::named_parameters() gives it.
using NamedParameters = std::vector<std::pair<std::string, ::torch::Tensor>>;

/// Hooks `parameters` and reduces their gradients across the process set.
///
/// The constructor is collective over the process set: ranks whose parameter lists differ
/// (names, shapes or dtypes) all fail here with an error naming the first difference,
/// instead of hanging later.
///
/// Parameters that do not get a gradient in a step (a branch not taken on this rank):
/// synchronize() reduces a zero gradient for them, so every rank takes part in every
/// parameter's reduction and nothing waits forever; their gradient then holds what the
/// other ranks contributed (zero if no rank used them). Parameters with
/// requires_grad() == false (frozen layers) are left out entirely: no hook, no reduction.
class GradientReducer {
 public:
  GradientReducer(NamedParameters parameters, DistributedOptimizerOptions options = {});
  /// Reductions still in flight finish first.
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Waits until every gradient is reduced (starting the reductions of gradients whose
  /// hook has not fired), and leaves the results in the parameters' grad(). Throws
  /// chorus::Error on every rank if a reduction failed.
  void synchronize();
  /// Gradient reductions started since the last synchronize(), counted per parameter.
  int64_t reductions_started() const;

  /// PowerSGD's state, for checkpoints: the steps synchronize() completed and each compressed
  /// matrix's Q (the same on every rank), named "<reduction name>.q". Each rank's error
  /// feedback is its own and is not kept: after load_powersgd_state() it restarts from zero.
  /// Empty without PowerSGD.
  struct PowerSgdState {
    int64_t iteration = 0;
    std::vector<std::pair<std::string, ::torch::Tensor>> qs;
  };
  PowerSgdState powersgd_state() const;
  /// Throws chorus::Error for a Q whose shape does not fit its parameter.
  void load_powersgd_state(const PowerSgdState& state);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace chorus::torch
