// Names and comparisons of the negotiation messages declared in message.h.
#include "core/message.h"

#include <cstdint>
#include <string>
#include <vector>

namespace chorus {

const char* op_type_name(OpType op) {
  switch (op) {
    case OpType::kAllreduce: return "allreduce";
    case OpType::kAllgather: return "allgather";
    case OpType::kBroadcast: return "broadcast";
    case OpType::kAlltoall: return "alltoall";
    case OpType::kReducescatter: return "reducescatter";
    case OpType::kBarrier: return "barrier";
    case OpType::kJoin: return "join";
    case OpType::kAddProcessSet: return "add_process_set";
    case OpType::kRemoveProcessSet: return "remove_process_set";
  }
  return "unknown";
}

// Status has no operator== of its own (two errors with the same code but different words
// are different decisions), so the comparison spells out every field, status included.
bool operator==(const Response& a, const Response& b) {
  return a.op == b.op && a.name == b.name && a.status.code() == b.status.code() &&
         a.status.message() == b.status.message() && a.dtype == b.dtype &&
         a.reduce_op == b.reduce_op && a.device == b.device && a.shape == b.shape &&
         a.root == b.root && a.prescale == b.prescale && a.postscale == b.postscale &&
         a.first_dims == b.first_dims && a.splits == b.splits && a.group_size == b.group_size &&
         a.group_index == b.group_index && a.group == b.group && a.value == b.value &&
         a.ranks == b.ranks;
}

// Shapes can come off the wire from another rank before the coordinator has checked them,
// so the product is taken in unsigned arithmetic: a negative or overflowing shape gives a
// meaningless number (which the caller's checks reject) instead of undefined behaviour.
int64_t num_elements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return static_cast<int64_t>(n);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  out += ']';
  return out;
}

}  // namespace chorus
