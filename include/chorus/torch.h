#pragma once
/// \file
/// The LibTorch adapter (target Chorus::torch): collectives on torch::Tensor, a distributed
/// optimizer that overlaps gradient allreduces with backward, and helpers that make every
/// rank start from the same model and optimizer state.
///
/// A trainer's additions, in order: chorus::init(); build the model and its optimizer;
/// broadcast_parameters(*model, 0); broadcast_optimizer_state(optimizer, 0); wrap the
/// optimizer in DistributedOptimizer; then train as usual, calling the wrapper's zero_grad()
/// and step(). Launch with mpirun or srun.
///
/// Errors: every function here throws chorus::Error carrying the core's Status (its message
/// names the tensor, rank or value at fault).

#include "chorus/torch/distributed_optimizer.h"
#include "chorus/torch/elastic.h"
#include "chorus/torch/sharded_optimizer.h"
#include "chorus/torch/state.h"
#include "chorus/torch/tensor_ops.h"
