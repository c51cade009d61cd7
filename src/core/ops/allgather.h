#pragma once
// allgather: every rank ends with every rank's rows stacked in rank order; the ranks may give
// different first dimensions. Host members of a group fuse into one allgatherv.

#include "chorus/options.h"
#include "core/ops/op.h"

namespace chorus {

const OpDescriptor& allgather_op();
Status fill_allgather(Entry& e, const TensorRef& input, OutputAllocator allocate);

}  // namespace chorus
