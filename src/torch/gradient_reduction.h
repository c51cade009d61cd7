#pragma once
// The reduction of gradients that DistributedOptimizer's and ShardedOptimizer's options ask
// for, checked: one place for both engines.

#include <torch/types.h>

#include "chorus/options.h"
#include "chorus/torch/gradient_reducer.h"

namespace chorus::torch {

/// The allreduce of the gradients: `op` is kAverage or kSum; `predivide` divides each
/// gradient before the sum and multiplies the average after it (kAverage only); `passes`
/// (backward passes per step) is at least 1. Throws chorus::Error naming the bad value.
AllreduceOptions gradient_reduction(ReduceOp op, double predivide, int passes,
                                    ProcessSet process_set);

/// The dtype a tensor of `type` travels in under `compression`: float32 and float64 as the
/// 16-bit type asked for, anything else as it is.
::torch::ScalarType wire_type(::torch::ScalarType type, Compression compression);
/// `t` converted to its wire_type().
::torch::Tensor on_the_wire(const ::torch::Tensor& t, Compression compression);

}  // namespace chorus::torch
