#pragma once
// Reading back an optimizer that Optimizer::save wrote: the per-parameter state, and the
// options of each parameter group (learning rate, betas, ...), which Optimizer::load alone
// leaves as they were. Checkpoints, the optimizer's broadcast and elastic commits use it.

#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>

namespace chorus::torch {

void load_optimizer(::torch::optim::Optimizer& optimizer,
                    ::torch::serialize::InputArchive& archive);

}  // namespace chorus::torch
