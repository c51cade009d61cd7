#pragma once
/// \file
/// Starting every rank from the same state, and checkpoints.

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <optional>
#include <string>

#include "chorus/options.h"

namespace chorus::torch {

/// Copies `root`'s parameters and buffers (batch-norm statistics, ...) into every rank's
/// `module`, in place. Collective over the process set; the modules must have the same
/// structure on every rank.
void broadcast_parameters(::torch::nn::Module& module, int root, ProcessSet process_set = {});

/// Copies `root`'s optimizer state (hyperparameters of every parameter group and the
/// per-parameter state: Adam's step counts and moments, momentum buffers, ...) into every
/// rank's `optimizer`. The optimizers must be of the same type over the same parameters.
void broadcast_optimizer_state(::torch::optim::Optimizer& optimizer, int root,
                               ProcessSet process_set = {});

/// Checkpoints: rank 0 of the global set writes `path` (model, optimizer and `epoch`), then
/// every rank waits at a barrier, so a load that follows sees the complete file.
void save_checkpoint(const std::string& path, ::torch::nn::Module& module,
                     ::torch::optim::Optimizer& optimizer, int64_t epoch);
/// Every rank reads `path` into its own module (on the module's own device) and optimizer
/// and returns the saved epoch; std::nullopt, with nothing changed, when `path` does not
/// exist on this rank.
std::optional<int64_t> load_checkpoint(const std::string& path, ::torch::nn::Module& module,
                                       ::torch::optim::Optimizer& optimizer);

}  // namespace chorus::torch
