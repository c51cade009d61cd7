#pragma once
// Requests and responses: what ranks tell the coordinator and what it answers. These are
// plain values; codec.h turns them into bytes and back.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "chorus/types.h"

namespace chorus {

/// The kind of a collective. Stable numbering: it travels in wire messages.
enum class OpType : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
  kAddProcessSet = 7,
  kRemoveProcessSet = 8,
  kReduce = 9,
  /// add_process_set made by the new set's members alone (add_process_set_of_members).
  kAddProcessSetOfMembers = 10,
};
inline constexpr int kNumOpTypes = 11;
/// Whether `op` creates a process set (every rank of the job makes the set when it is agreed).
inline bool creates_process_set(OpType op) {
  return op == OpType::kAddProcessSet || op == OpType::kAddProcessSetOfMembers;
}
const char* op_type_name(OpType op);

/// One rank's description of one collective it wants to run. Every field except `rank`
/// must agree across ranks, under the per-op rules of the coordinator.
struct Request {
  int32_t rank = 0;  ///< sender, in the process set's numbering
  OpType op = OpType::kAllreduce;
  std::string name;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  Device device;
  std::vector<int64_t> shape;
  int32_t root = -1;  ///< broadcast and reduce root (set numbering)
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<int64_t> splits;  ///< alltoall: rows sent to each rank
  std::string group;            ///< grouped collective: key shared by every member
  int32_t group_size = 0;       ///< members in the group (0: not grouped)
  int32_t group_index = 0;      ///< this member's position in the group
  std::vector<int32_t> ranks;   ///< add_process_set: global ranks of the new set
  int32_t target_set = 0;       ///< remove_process_set: the set to remove

  /// Every field, in wire order, with its name: the codec (core/codec.cc) writes, reads and
  /// sizes the message from this list alone. A new field is added here and above.
  template <class F>
  static void fields(F&& f) {
    f("rank", &Request::rank);
    f("op", &Request::op);
    f("name", &Request::name);
    f("dtype", &Request::dtype);
    f("reduce_op", &Request::reduce_op);
    f("device", &Request::device);
    f("shape", &Request::shape);
    f("root", &Request::root);
    f("prescale", &Request::prescale);
    f("postscale", &Request::postscale);
    f("splits", &Request::splits);
    f("group", &Request::group);
    f("group_size", &Request::group_size);
    f("group_index", &Request::group_index);
    f("ranks", &Request::ranks);
    f("target_set", &Request::target_set);
  }
  friend bool operator==(const Request&, const Request&) = default;
};

/// A cached request the sender has been waiting on, reported for the stall inspector.
struct WaitingSlot {
  int32_t slot = 0;
  double waited_seconds = 0;
  template <class F>
  static void fields(F&& f) {
    f("slot", &WaitingSlot::slot);
    f("waited_seconds", &WaitingSlot::waited_seconds);
  }
  friend bool operator==(const WaitingSlot&, const WaitingSlot&) = default;
};

/// Everything one rank sends to the coordinator in one negotiation round.
struct RequestList {
  std::vector<Request> requests;
  std::vector<WaitingSlot> waiting;  ///< cache hits not ready everywhere yet (stall reports)
  double idle_seconds = 0;           ///< since the sender last submitted anything (stall classes)
  friend bool operator==(const RequestList&, const RequestList&) = default;
};

/// The coordinator's decision about one named collective, identical on every rank.
/// An error response (status not ok) fails the tensor on every rank that submitted it.
struct Response {
  OpType op = OpType::kAllreduce;
  std::string name;
  Status status;  ///< not ok: the collective fails everywhere with this status
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  Device device;
  std::vector<int64_t> shape;  ///< agreed shape (allreduce, broadcast, reducescatter)
  int32_t root = -1;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<int64_t> first_dims;  ///< allgather: first dimension on each rank
  std::vector<int64_t> splits;      ///< alltoall: n*n matrix, row = sender, col = receiver
  int32_t group_size = 0;
  int32_t group_index = 0;
  std::string group;
  int32_t last_joined_rank = -1;  ///< join: the rank that joined last
  int32_t new_set_id = -1;        ///< add_process_set: the id the new set gets
  std::vector<int32_t> ranks;     ///< add_process_set: the new set's global ranks
  int32_t target_set = 0;         ///< remove_process_set: the set to remove

  /// Every field, in wire order, with its name (as Request::fields); equality compares
  /// them all.
  template <class F>
  static void fields(F&& f) {
    f("op", &Response::op);
    f("name", &Response::name);
    f("status", &Response::status);
    f("dtype", &Response::dtype);
    f("reduce_op", &Response::reduce_op);
    f("device", &Response::device);
    f("shape", &Response::shape);
    f("root", &Response::root);
    f("prescale", &Response::prescale);
    f("postscale", &Response::postscale);
    f("first_dims", &Response::first_dims);
    f("splits", &Response::splits);
    f("group_size", &Response::group_size);
    f("group_index", &Response::group_index);
    f("group", &Response::group);
    f("last_joined_rank", &Response::last_joined_rank);
    f("new_set_id", &Response::new_set_id);
    f("ranks", &Response::ranks);
    f("target_set", &Response::target_set);
  }
  friend bool operator==(const Response& a, const Response& b);
};

struct ResponseList {
  std::vector<Response> responses;
  /// The stall inspector's classes (protocol/stall_classes.h), one line each, for every rank.
  std::vector<std::string> stall_lines;
  /// Not 0: CHORUS_STALL_SHUTDOWN_SECONDS failed tensors, and every member ends its process
  /// with this status (stall_exit_status()) once it has run these responses.
  int32_t stall_exit_status = 0;
  friend bool operator==(const ResponseList&, const ResponseList&) = default;
};

/// Number of elements of a shape (1 for a scalar shape {}).
int64_t num_elements(const std::vector<int64_t>& shape);
/// The most bytes one tensor may have (2^62): its element count and size in bytes then fit
/// in int64_t and size_t on every platform Chorus builds on.
inline constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 62;

/// Checks what every op's request shares: each enumeration (op, dtype, reduce op, device
/// kind) holds a value this build knows, and the shape has no negative dimension and at most
/// kMaxTensorBytes. Run on every request at submit (one check for every op), and by the
/// coordinator on every rank's request, which may come from a rank built otherwise.
Status check_request(const Request& q);
/// "[3,4]"
std::string shape_string(const std::vector<int64_t>& shape);
/// "[0, 2, 5]": ranks in messages.
std::string ranks_string(const std::vector<int>& ranks);
/// Groups ranks by their value (index = rank; nullopt: left out) and describes a
/// disagreement as "float32 on ranks [0, 1]; float64 on ranks [2]" (values in single quotes
/// with `quote`); empty when at most one distinct value is present.
std::string disagreement(const std::vector<std::optional<std::string>>& value_of_rank,
                         bool quote = false);

}  // namespace chorus
