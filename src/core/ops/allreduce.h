#pragma once
// allreduce: every rank ends with the reduction of every rank's tensor, combined in rank
// order. The one op that runs while ranks have joined (they contribute zeros), and the one
// the executor fuses (executor.cc's fused allreduce).

#include "chorus/options.h"
#include "core/ops/op.h"

namespace chorus {

const OpDescriptor& allreduce_op();
/// The allreduce of `in` into `out` (null: memory this rank could not have, kept in x.s)
/// with the response's reduction: the input prescaled into `out` first. Shared by allreduce
/// and reduce, so that reduce's root gets allreduce's bits.
void allreduce_into(OpRun& x, const void* in, void* out);
/// Checks one allreduce member (or reduce: the op prepare() set in the request) and fills
/// its request and tensors.
Status fill_reduction(Entry& e, const TensorRef& input, const TensorRef& output,
                      const AllreduceOptions& options);

}  // namespace chorus
