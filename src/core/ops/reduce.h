#pragma once
// reduce: the reduction of every rank's tensor, on the root alone. It runs as the allreduce
// (the backend's combination in rank order) with the root's output as the only one kept, so
// that its bits are the allreduce's, at the allreduce's cost.

#include "chorus/options.h"
#include "core/ops/op.h"

namespace chorus {

const OpDescriptor& reduce_op();
/// Checks one reduce and fills its request and tensors; `root` is a set rank, checked by
/// the coordinator so that a bad one fails on every rank.
Status fill_reduce(Entry& e, const TensorRef& input, const TensorRef& output, int root,
                   const ReduceOptions& options);

}  // namespace chorus
