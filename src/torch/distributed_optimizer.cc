#include "chorus/torch/distributed_optimizer.h"

#include "chorus/chorus.h"

namespace chorus::torch {

NamedParameters named_parameters(const ::torch::nn::Module& module) {
  NamedParameters out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

DistributedOptimizer::DistributedOptimizer(::torch::optim::Optimizer& optimizer,
                                           NamedParameters named_parameters,
                                           DistributedOptimizerOptions options)
    : optimizer_(optimizer), reducer_(std::move(named_parameters), std::move(options)) {}

void DistributedOptimizer::synchronize() {
  synchronized_ = true;
  reducer_.synchronize();
}

void DistributedOptimizer::step() {
  if (!synchronized_) reducer_.synchronize();
  synchronized_ = false;
  optimizer_.step();
  chorus::mark_step();  // the step's end on this rank's timeline, for chorus-trace summary
}

void DistributedOptimizer::zero_grad() { optimizer_.zero_grad(); }

}  // namespace chorus::torch
