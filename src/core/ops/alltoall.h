#pragma once
// alltoall: rank i sends splits[j] of its rows to rank j and receives rank j's rows for it,
// stacked in source order.

#include "chorus/options.h"
#include "core/ops/op.h"

namespace chorus {

const OpDescriptor& alltoall_op();
/// `set_size`: the process set's size, for the even split of an input without splits.
Status fill_alltoall(Entry& e, const TensorRef& input, const std::vector<int64_t>& splits,
                     int set_size, OutputAllocator allocate);

}  // namespace chorus
