#pragma once
// reducescatter: the reduction of every rank's tensor, split by rows over the ranks
// (reducescatter_rows: the first ranks get one more row when the rows do not divide). Host
// members of a group fuse into one reducescatter.

#include "chorus/options.h"
#include "core/ops/op.h"

namespace chorus {

const OpDescriptor& reducescatter_op();
Status fill_reducescatter(Entry& e, const TensorRef& input, ReduceOp reduce_op, double prescale,
                          double postscale, OutputAllocator allocate);

}  // namespace chorus
