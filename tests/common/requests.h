#pragma once
// Request builders shared by the unit and in-process tests. Header-only; each returns a
// fresh Request with only the fields a test usually cares about set (rank stays 0: the
// tests that need it set it themselves).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "protocol/message.h"

namespace chorus::testing {

/// An allreduce of `name`, float32 and shape [4] unless told otherwise.
inline Request allreduce(const std::string& name, std::vector<int64_t> shape = {4},
                         DataType dtype = DataType::kFloat32) {
  Request q;
  q.op = OpType::kAllreduce;
  q.name = name;
  q.dtype = dtype;
  q.shape = std::move(shape);
  return q;
}

/// `q` as another operation, the other fields kept (to make ranks disagree on the op).
inline Request with_op(Request q, OpType op) {
  q.op = op;
  return q;
}

/// Member `index` of the grouped allreduce `group`, which has `size` members.
inline Request grouped(const std::string& name, const std::string& group, int size, int index) {
  Request q = allreduce(name);
  q.group = group;
  q.group_size = size;
  q.group_index = index;
  return q;
}

/// A join request, under the name the runtime gives it (api.cc).
inline Request join_request() {
  Request q;
  q.op = OpType::kJoin;
  q.name = "chorus.join";
  return q;
}

}  // namespace chorus::testing
