#pragma once
/// \file
/// Starting every rank from the same state, and checkpoints.

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <optional>
#include <string>

#include "chorus/options.h"
#include "chorus/torch/sharded_optimizer.h"

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

/// Checkpoints of a ShardedOptimizer. Each rank writes `path`.shard<r>-of-<P> (the model,
/// its shard of the optimizer's state and `epoch`), which loads at the same number of ranks;
/// with `consolidated`, rank 0 writes `path` instead, holding the whole state by parameter
/// name, which loads on any number of ranks. Collective; every rank waits until the files
/// are complete.
void save_checkpoint(const std::string& path, ::torch::nn::Module& module,
                     ShardedOptimizer& optimizer, int64_t epoch, bool consolidated = false);
/// Reads `path` if it exists (a consolidated checkpoint, resharded), else this rank's shard
/// file; std::nullopt, with nothing changed, when neither exists.
std::optional<int64_t> load_checkpoint(const std::string& path, ::torch::nn::Module& module,
                                       ShardedOptimizer& optimizer);
/// The name of rank `rank`'s file among `count` of a sharded checkpoint at `path`.
std::string shard_path(const std::string& path, int rank, int count);

}  // namespace chorus::torch
