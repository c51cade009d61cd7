#pragma once
// broadcast: the root's tensor, in place on every rank.

#include "chorus/options.h"
#include "core/ops/op.h"

namespace chorus {

const OpDescriptor& broadcast_op();
Status fill_broadcast(Entry& e, const TensorRef& tensor, int root);

}  // namespace chorus
