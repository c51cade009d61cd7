#pragma once
/// \file
/// DistributedOptimizer: data-parallel training for a LibTorch trainer. Wraps any
/// torch::optim::Optimizer and reduces each gradient across ranks as soon as backward has
/// accumulated it, so communication overlaps the rest of backward.

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

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

struct DistributedOptimizerOptions {
  /// kAverage (the mean over ranks) or kSum.
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
};

/// A named parameter list, as Module::named_parameters() gives it.
using NamedParameters = std::vector<std::pair<std::string, ::torch::Tensor>>;

/// Parameters of `module`, recursively, with their dotted names ("conv1.weight", ...).
NamedParameters named_parameters(const ::torch::nn::Module& module);

/// Wraps `optimizer`, which must outlive the wrapper and optimize exactly the parameters
/// given. The constructor is collective over the process set: every rank builds its
/// optimizer at the same point, and ranks whose parameter lists differ (names, shapes or
/// dtypes) all fail here with an error naming the first difference, instead of hanging
/// later.
///
/// Per step: zero_grad(), forward, backward (each gradient's allreduce starts from a hook
/// as soon as it is accumulated), then step(), which waits for the reductions and runs the
/// wrapped optimizer. To work on the reduced gradients before the update (clipping), call
/// synchronize() first: step() then does not synchronize again.
///
/// Parameters that do not get a gradient in a step (a branch not taken on this rank):
/// synchronize() reduces a zero gradient for them, so every rank takes part in every
/// parameter's reduction and nothing waits forever; their gradient then holds what the
/// other ranks contributed (zero if no rank used them). Parameters with
/// requires_grad() == false (frozen layers) are left out entirely: no hook, no reduction.
class DistributedOptimizer {
 public:
  DistributedOptimizer(::torch::optim::Optimizer& optimizer, NamedParameters named_parameters,
                       DistributedOptimizerOptions options = {});
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  /// Waits until every gradient is reduced (starting the reductions of gradients whose
  /// hook has not fired), and leaves the results in the parameters' grad(). Throws
  /// chorus::Error on every rank if a reduction failed.
  void synchronize();
  /// synchronize() unless it already ran since the last step, then the wrapped step().
  void step();
  /// The wrapped optimizer's zero_grad().
  void zero_grad();

  ::torch::optim::Optimizer& optimizer() { return optimizer_; }
  /// Gradient reductions started since the last synchronize(): lets a trainer (or a test)
  /// see that communication began while backward was still running.
  int64_t reductions_started() const;

  struct State;

 private:
  ::torch::optim::Optimizer& optimizer_;
  std::shared_ptr<State> state_;
  bool synchronized_ = false;
};

}  // namespace chorus::torch
