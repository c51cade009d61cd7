#pragma once
// The checks the public entry points make on the caller's thread (api.cc and each op's
// request filler in this folder): each failure names the collective, the tensor's role and
// the value at fault.

#include <string>

#include "chorus/types.h"
#include "core/entry.h"
#include "protocol/message.h"

namespace chorus {

/// "allreduce 'grad.w': ", the start of every message about one collective.
std::string what(OpType op, const std::string& name);
/// A known dtype, no negative dimension, data behind a non-empty shape, and a device this
/// build and process can run collectives on. `role`: "input", "output", "tensor".
Status check_tensor(OpType op, const std::string& name, const char* role, const TensorRef& t);
/// An input split or gathered along its first dimension: check_tensor, and one dimension
/// at least.
Status check_rows(OpType op, const std::string& name, const TensorRef& input);
/// A finite scale factor; `which`: "prescale" or "postscale".
Status check_scale(OpType op, const std::string& name, const char* which, double v);
/// A reduce op the collective runs on `dtype`: Adasum is an allreduce of floating-point
/// tensors only.
Status check_reduce_op(OpType op, const std::string& name, ReduceOp reduce, DataType dtype);
/// The request's dtype, shape and device from `t`.
void describe_tensor(Request& q, const TensorRef& t);

}  // namespace chorus
