#pragma once
/// \file
/// ShardedOptimizer: sharded data parallelism for a LibTorch trainer. Wraps any
/// torch::optim::Optimizer; each rank keeps the optimizer's state (stage 1), and the reduced
/// gradients too (stage 2), for 1/P of every parameter bucket only. See ShardedReducer for
/// the layout and the stages.

#include <torch/optim/optimizer.h>

#include "chorus/torch/sharded_reducer.h"

namespace chorus::torch {

/// Wraps `optimizer`, which must outlive the wrapper, must not have stepped yet, and must
/// hold exactly the trainable parameters given (in any of its parameter groups; frozen ones
/// may be there too). Construction is collective. The wrapped optimizer's parameter groups
/// are rewritten to hold this rank's shards (flat tensors sharing the parameters' storage),
/// so its options (learning rate, ...) keep applying per group.
///
/// Per step: zero_grad(), forward, backward (each bucket's reduction starts from a hook as
/// soon as its gradients are accumulated), then step(): it waits for the reductions, runs the
/// wrapped optimizer on the shards, and allgathers the updated shards into every rank's
/// parameters. To clip, call clip_grad_norm() between backward and step().
class ShardedOptimizer {
 public:
  ShardedOptimizer(::torch::optim::Optimizer& optimizer, NamedParameters named_parameters,
                   ShardedOptions options = {});

  /// See ShardedReducer::synchronize().
  void synchronize();
  /// synchronize() unless it already ran since the last step, the wrapped step() on this
  /// rank's shards, then the parameters' allgather.
  void step();
  void zero_grad();
  /// Scales the gradient so that its norm over every rank's shards is at most `max_norm`;
  /// returns the norm before scaling. Collective; synchronizes first where needed.
  double clip_grad_norm(double max_norm, double norm_type = 2.0);

  ::torch::optim::Optimizer& optimizer() { return optimizer_; }
  ShardedReducer& reducer() { return reducer_; }
  int64_t reductions_started() const { return reducer_.reductions_started(); }

 private:
  ::torch::optim::Optimizer& optimizer_;
  ShardedReducer reducer_;
  bool synchronized_ = false;
};

}  // namespace chorus::torch
