#pragma once
// DistributedOptimizer with op kAdasum (distributed_optimizer.h): what is reduced is the
// wrapped optimizer's step, not the gradient. Each rank steps the wrapped optimizer on its own
// gradients from the parameters every rank shares; the change that local step made to each
// parameter (its delta) is reduced with Adasum (collectives/adasum.h), and every rank applies
// the combined delta to the shared parameters. The optimizer's state (momentum, moments)
// follows the rank's own gradients. Horovod defines its Adasum optimizer so; Chorus reduces
// the deltas when step() is called, as one fused batch, at any number of ranks and over any
// process set.

#include <functional>
#include <string>
#include <vector>

#include "chorus/torch/gradient_reducer.h"

namespace chorus::torch {

class AdasumDelta {
 public:
  /// Collective over the set: the ranks' parameter lists must agree (check_same_layout).
  /// Frozen parameters are left out.
  AdasumDelta(const NamedParameters& parameters, const DistributedOptimizerOptions& options);

  /// Runs `local_step` (the wrapped optimizer's step), then gives each parameter its start
  /// plus the Adasum of every rank's delta. Throws chorus::Error on every rank if a reduction
  /// failed (each started one is waited for first).
  void step(const std::function<void()>& local_step);

 private:
  std::vector<std::string> names_;
  std::vector<::torch::Tensor> params_;
  std::vector<::torch::Tensor> starts_;  // where each parameter stood before the local step
  Compression compression_;
  AllreduceOptions adasum_;
};

}  // namespace chorus::torch
