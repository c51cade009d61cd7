#pragma once
// What a collective is, in one place: each op's file in this folder (allreduce.cc,
// broadcast.cc, ...) holds one OpDescriptor with its agreement rule, whether it caches, how
// it batches and how it runs on one rank, beside the checks its public entry point makes
// (api.cc) and the plans of op_plan.h. The coordinator, the response cache, the negotiator,
// the executor and the API ask the descriptor instead of switching on the op.
//
// Adding an op: its number in protocol/message.h, a file here with its descriptor and its
// request filler, a line in op_table.cc, its entry point in chorus.h and api.cc, the adapter
// wrappers, and tests (docs/architecture.md counts them on `reduce`).

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "collectives/backend.h"
#include "core/entry.h"
#include "core/tensor_memory.h"
#include "protocol/message.h"

namespace chorus {

class HostMemory;

/// One agreed response and this rank's entry for it (null: this rank has none; it joined
/// and contributes zeros).
struct Job {
  const Response* response;
  Entry* entry;
};

/// The requests of one named collective, one per rank of the set (absent: the rank joined),
/// as the coordinator hands them to the op's rule, with the checks the rules share. Each
/// check returns false and sets message() when the present ranks disagree, as "ranks
/// disagree on shape: [4] on ranks [0, 1]; [5] on ranks [2]".
class Agreement {
 public:
  Agreement(const std::vector<std::optional<Request>>& by_rank, const Request& first)
      : by_rank_(by_rank), first_(first) {}

  const Request& first() const { return first_; }
  /// Rank r's request; only for an op that every rank submits (none runs joined but allreduce).
  const Request& of(int r) const { return *by_rank_[r]; }
  int size() const { return static_cast<int>(by_rank_.size()); }
  const std::string& message() const { return message_; }

  /// Every present rank gives the same `value` for `what`.
  bool same(const char* what, const std::function<std::string(const Request&)>& value);
  bool same_shape();
  /// The reduce op and both scale factors.
  bool same_reduction();
  /// The group the tensor belongs to (ops that come grouped).
  bool same_group();
  /// The dimensions after the first (ops whose ranks give different row counts).
  bool same_rows();
  /// The root rank, which must also lie inside the set.
  bool same_root();
  /// A failure of the op's own rule, described by `why`.
  void fail(std::string why) { message_ = std::move(why); }

 private:
  const std::vector<std::optional<Request>>& by_rank_;
  const Request& first_;
  std::string message_;
};

/// How an op's responses form the executor's batches (fusion/planner.h).
enum class Batching {
  kAlone,        ///< each response is a batch of its own
  kFused,        ///< fuses with responses of the same reduction (one fused allreduce)
  kGroupOnHost,  ///< a host tensor of a group fuses with its group (OpDescriptor::run_group)
};

/// One response's execution on this rank (OpDescriptor::run), on the memory its tensors live
/// in. The failure discipline: this rank's own failure (an output it cannot allocate, an
/// event it cannot wait on) is kept in `local`, and the backend call is still made, so that
/// the other members never wait for this rank; the backend's failure, or memory this rank
/// cannot have to call it with, goes in `s`: the rank is out of step. Either way the set's
/// verdict fails the batch on every member (Executor::execute), and `s` stops the runtime.
struct OpRun {
  using Clock = std::chrono::steady_clock;

  TensorMemory& memory;
  Backend& backend;
  const Response& r;
  Entry* entry;             ///< null: this rank joined (allreduce only)
  Status s;                 ///< the backend's failure or the device's
  Status local;             ///< this rank's own failure
  Clock::time_point begun;  ///< when the backend call began (after the input's staging)

  void keep(Status st) {
    if (local.ok() && !st.ok()) local = std::move(st);
  }
  /// The pointer, or null with the failure kept in `s`: memory this rank cannot have leaves
  /// it nothing to pass to the call, which it does not make. It is then out of step: the
  /// other members' waits end at the liveness bound (or NCCL's timeout), and the set's verdict
  /// stops every member naming this rank and the allocation (core/batch_verdict.h).
  char* have(StatusOr<char*> p);
  /// The entry's output of `shape` (`bytes` bytes), written only after its allocation; when
  /// this rank cannot allocate it, scratch to receive into (the failure kept in `local`).
  void* output(const std::vector<int64_t>& shape, std::size_t bytes);
  void began() { begun = Clock::now(); }
};

/// The host members of one group, fused into one backend call (OpDescriptor::run_group).
/// Every member of the set runs the same batch, so every rank builds the same layout.
struct GroupRun {
  using Clock = std::chrono::steady_clock;
  using Finish = std::function<void(Entry&, const Status&)>;
  using Trace = std::function<void(const std::string&, Clock::time_point, Clock::time_point)>;

  HostMemory& host;
  const std::vector<Job>& batch;
  const Finish& finish;
  const Trace& trace;  ///< the member's collective phase on the timeline
};

struct OpDescriptor {
  OpType op;
  /// The backend call its execution makes, which picks the backend (BackendChoice).
  Collective collective = Collective::kBarrier;
  /// Carries a tensor: its dtype and device type must agree across ranks.
  bool carries_data = true;
  /// Runs while some ranks have joined (they contribute zeros); any other op fails then.
  bool runs_with_joined = false;
  /// Submitted by the ranks its request lists (Request::ranks) alone, not by every rank of
  /// the set it is negotiated in: the coordinator waits for those.
  bool submitted_by_listed_ranks = false;
  /// Its agreed response is cached by name, so that a repeat skips the coordinator.
  bool cached = false;
  /// Its output's shape is known only once the ranks agreed, so a CUDA tensor needs an
  /// allocator for it (options.allocate).
  bool output_sized_by_agreement = false;
  /// The coordinator's rule: whether the ranks' requests agree as the op needs (false with
  /// a.message() set), filling the response's op-specific fields from them.
  bool (*agree)(Agreement& a, Response& resp) = nullptr;
  /// How its responses batch; for kGroupOnHost, `run_group` runs the fused members.
  Batching (*batching)(const Response& r) = nullptr;
  /// Its execution on this rank; null for the ops the process-set table applies.
  void (*run)(OpRun& run) = nullptr;
  Status (*run_group)(GroupRun& group) = nullptr;
};

/// The descriptor of `op`, a value protocol/message.h defines (check_request).
const OpDescriptor& op_descriptor(OpType op);

/// The output of `e` of `shape`: from the caller's allocator (checked against the request's
/// dtype and the agreed shape) or owned by the handle; the entry and its handle keep it.
StatusOr<TensorRef> allocate_output(Entry& e, const std::vector<int64_t>& shape);

}  // namespace chorus
