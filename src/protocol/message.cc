// Names and comparisons of the negotiation messages declared in message.h.
#include "protocol/message.h"

#include <algorithm>
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
    case OpType::kReduce: return "reduce";
    case OpType::kAddProcessSetOfMembers: return "add_process_set_of_members";
  }
  return "unknown";
}

// Status has no operator== of its own (two errors with the same code but different words
// are different decisions), so the comparison spells out every field, status included.
namespace {

bool same(const Status& a, const Status& b) {
  return a.code() == b.code() && a.message() == b.message();
}
template <class T>
bool same(const T& a, const T& b) {
  return a == b;
}

}  // namespace

bool operator==(const Response& a, const Response& b) {
  bool equal = true;
  Response::fields([&](const char*, auto member) { equal = equal && same(a.*member, b.*member); });
  return equal;
}

// Shapes can come off the wire from another rank before the coordinator has checked them,
// so the product is taken in unsigned arithmetic: a negative or overflowing shape gives a
// meaningless number (which the caller's checks reject) instead of undefined behaviour.
int64_t num_elements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return static_cast<int64_t>(n);
}

Status check_request(const Request& q) {
  // On every submit: the message is built only on failure.
  auto what = [&] { return std::string(op_type_name(q.op)) + " '" + q.name + "': "; };
  auto unknown = [&](const char* field, int v, int count) {
    return invalid_argument(what() + field + " " + std::to_string(v) +
                            " is not one this build of Chorus knows (0 to " +
                            std::to_string(count - 1) + ")");
  };
  if (static_cast<int>(q.op) >= kNumOpTypes) {
    return unknown("operation", static_cast<int>(q.op), kNumOpTypes);
  }
  if (static_cast<int>(q.dtype) >= kNumDataTypes) {
    return unknown("dtype", static_cast<int>(q.dtype), kNumDataTypes);
  }
  if (static_cast<int>(q.reduce_op) >= kNumReduceOps) {
    return unknown("reduce op", static_cast<int>(q.reduce_op), kNumReduceOps);
  }
  if (q.device.kind != Device::Kind::kCPU && q.device.kind != Device::Kind::kCUDA) {
    return unknown("device kind", static_cast<int>(q.device.kind), 2);
  }
  uint64_t bytes = dtype_size(q.dtype);
  for (int64_t d : q.shape) {
    if (d < 0)
      return invalid_argument(what() + "shape " + shape_string(q.shape) +
                              " has a negative dimension");
    if (d > 0 && bytes > kMaxTensorBytes / static_cast<uint64_t>(d)) {
      return invalid_argument(what() + "shape " + shape_string(q.shape) + " of " +
                              dtype_name(q.dtype) + " holds more than 2^62 bytes");
    }
    bytes *= static_cast<uint64_t>(d);
  }
  return {};
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

std::string ranks_string(const std::vector<int>& ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::string disagreement(const std::vector<std::optional<std::string>>& value_of_rank, bool quote) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < static_cast<int>(value_of_rank.size()); ++r) {
    if (!value_of_rank[r]) continue;
    const std::string& v = *value_of_rank[r];
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == v; });
    if (it == groups.end()) {
      groups.push_back({v, {r}});
    } else {
      it->second.push_back(r);
    }
  }
  if (groups.size() <= 1) return {};
  std::string out;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const std::string v = quote ? "'" + groups[i].first + "'" : groups[i].first;
    out += (i ? "; " : "") + v + " on ranks " + ranks_string(groups[i].second);
  }
  return out;
}

}  // namespace chorus
