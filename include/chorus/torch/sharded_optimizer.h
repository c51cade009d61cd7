#pragma once
/// \file
/// ShardedOptimizer: sharded data parallelism for a LibTorch trainer. Wraps any
/// torch::optim::Optimizer; each rank keeps the optimizer's state (stage 1), and the reduced
/// gradients too (stage 2), for 1/P of every parameter bucket only. See ShardedReducer for
/// the layout and the stages.

#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <string>
#include <vector>

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

  /// Writes the optimizer's state: this rank's shard (as Optimizer::save writes it, with the
  /// rank and count it belongs to), or with `consolidated` the whole state by parameter
  /// name, the same on every rank: each shard's element-wise state (momentum, moments)
  /// gathered over the set and cut per parameter, other values (step counts) kept per
  /// parameter, and every group's options. Collective when consolidated.
  void save(::torch::serialize::OutputArchive& archive, bool consolidated = false);
  /// Reads either kind: a shard only at its own rank and count (else it throws, naming
  /// both); the consolidated state at any count, resharded. Not collective.
  void load(::torch::serialize::InputArchive& archive);

  ::torch::optim::Optimizer& optimizer() { return optimizer_; }
  ShardedReducer& reducer() { return reducer_; }
  int64_t reductions_started() const { return reducer_.reductions_started(); }

 private:
  void load_consolidated(::torch::serialize::InputArchive& archive);

  ::torch::optim::Optimizer& optimizer_;
  std::vector<std::string> names_;  // of the parameters given
  ShardedReducer reducer_;
  bool synchronized_ = false;
};

}  // namespace chorus::torch
