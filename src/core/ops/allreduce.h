#pragma once
// allreduce: every rank ends with the reduction of every rank's tensor, combined in rank
// order. The one op that runs while ranks have joined (they contribute zeros), and the one
// the executor fuses (executor.cc's fused allreduce).

#include "chorus/options.h"
#include "core/ops/op.h"

namespace chorus {

const OpDescriptor& allreduce_op();
/// Checks one allreduce member (or reduce: the op prepare() set in the request) and fills
/// its request and tensors.
Status fill_reduction(Entry& e, const TensorRef& input, const TensorRef& output,
                      const AllreduceOptions& options);

}  // namespace chorus
