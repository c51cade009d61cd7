#pragma once
/// \file
/// DistributedOptimizer: data-parallel training for a LibTorch trainer. Wraps any
/// torch::optim::Optimizer; a GradientReducer reduces each gradient across ranks as soon as
/// backward has accumulated it.

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <memory>

#include "chorus/torch/gradient_reducer.h"
#include "chorus/torch/sharded_reducer.h"

namespace chorus::torch {

class AdasumDelta;

/// Parameters of `module`, recursively, with their dotted names ("conv1.weight", ...).
NamedParameters named_parameters(const ::torch::nn::Module& module);

/// Wraps `optimizer`, which must outlive the wrapper and optimize exactly the parameters
/// given. Construction is collective, and unused or frozen parameters are handled, as
/// GradientReducer describes.
///
/// Per step: zero_grad(), forward, backward (each gradient's allreduce starts from a hook
/// as soon as it is accumulated), then step(), which waits for the reductions and runs the
/// wrapped optimizer. To work on the reduced gradients before the update (clipping), call
/// synchronize() first: step() then does not synchronize again.
///
/// With options.op kAdasum the gradients stay local: step() runs the wrapped optimizer on
/// this rank's gradients and reduces the change it made to each parameter with Adasum, which
/// every rank then applies (Horovod's Adasum optimizer; docs/torch.md). The learning rate is
/// not scaled by the number of ranks. synchronize() then has nothing to do.
class DistributedOptimizer {
 public:
  DistributedOptimizer(::torch::optim::Optimizer& optimizer, NamedParameters named_parameters,
                       DistributedOptimizerOptions options = {});
  ~DistributedOptimizer();
  DistributedOptimizer(DistributedOptimizer&&) noexcept;

  /// See GradientReducer::synchronize().
  void synchronize();
  /// synchronize() unless it already ran since the last step, then the wrapped step().
  void step();
  /// The wrapped optimizer's zero_grad().
  void zero_grad();

  ::torch::optim::Optimizer& optimizer() { return optimizer_; }
  /// The wrapped optimizer's state and, with PowerSGD, its step count and Qs
  /// (GradientReducer::powersgd_state); elastic::State keeps a DistributedOptimizer so.
  void save(::torch::serialize::OutputArchive& archive) const;
  void load(::torch::serialize::InputArchive& archive);
  /// See GradientReducer::powersgd_state(); empty without PowerSGD.
  GradientReducer::PowerSgdState powersgd_state() const;
  /// Gradient reductions started since the last synchronize(): lets a trainer (or a test)
  /// see that communication began while backward was still running.
  int64_t reductions_started() const;

 private:
  ::torch::optim::Optimizer& optimizer_;
  // One of the three: each gradient its own reduction, the gradients in buckets, or the
  // local step's delta reduced with Adasum.
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<ShardedReducer> buckets_;
  std::unique_ptr<AdasumDelta> delta_;
  bool synchronized_ = false;
};

}  // namespace chorus::torch
