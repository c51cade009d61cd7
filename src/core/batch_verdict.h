#pragma once
// One verdict per batch, the same on every member of a process set.
//
// A member's part of a batch can fail where its peers' parts succeed: an input's producer
// that is late, a staging copy that timed out, a scratch or output allocation, a backend
// call that failed on this rank alone. Such a member still makes the batch's collective
// calls where it can, so that no peer waits for it, but its contribution may be wrong; and
// a member whose call itself failed (or ran out of the liveness bound) is out of step with
// the others. Either way no member's handle may complete OK. So after a round's batches ran,
// the set agrees on the outcome of each (Executor::execute):
//  1. an AND across the set of two bits per member (ceil(2P/64) words): one cleared by a
//     member one of whose batches failed on its side, one by a member out of step. All set:
//     every batch stands, nothing more is exchanged. This is the whole cost of a healthy
//     round: one small round on the set's control transport (the host's board for the global
//     set of a job on one host, a few messages otherwise). A round with no batch agrees on
//     nothing.
//  2. Otherwise the failing members' records (batch, code, message, whether the member is
//     out of step) are gathered at the set's rank 0, which chooses what each failed batch's
//     verdict names (choose_failures) and broadcasts it: every member fails that batch with
//     the same Status, naming the ranks and their causes (decide_verdicts); batches no member
//     failed stand.
//     Where the set's rounds go through the host's board, the records go there too, in rounds
//     that share instead of ANDing, and every member chooses from all of them alike: no
//     message is sent, so a trainer thread that runs the round may agree on it as well.
//  3. If any member is out of step, every member stops its runtime with the verdict.
// A member that never comes (stopped, stuck) fails the exchange after the bound, naming it.
// A member whose wait for a peer ran out makes no more calls in that round and comes at once,
// so it is late by at most its own wait's bound (and the roll call after it).

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "chorus/status.h"
#include "core/host_rounds.h"
#include "transport/control_transport.h"

namespace chorus {

/// One member's failure of one batch, as gathered at rank 0.
struct BatchFailure {
  uint32_t batch = 0;        ///< index in the round's batches
  int rank = 0;              ///< the member's rank in the set
  Status status;             ///< its failure
  bool out_of_step = false;  ///< its collective calls did not all complete
  int left_out = 0;          ///< in a chosen failure: the members' failures of the batch not named
};

/// What every member does with a round: each batch's Status (OK where it stands), and
/// whether the set stops (some member is out of step), with the Status it stops with.
struct RoundVerdict {
  std::vector<Status> batches;
  bool stop = false;
  Status stop_status;
};

/// Rank 0's choice, pure: of every member's failures of each failed batch, up to four, in
/// this order: those whose cause is their own (any failure but ABORTED, which is what a
/// member that gave up waiting for others says), then by rank; the first carries how many
/// were left out. The first failure of the first batch that some member is out of step at is
/// marked out_of_step, and no other: the set stops with it.
std::vector<BatchFailure> choose_failures(const std::vector<BatchFailure>& all);

/// Every member's reading of the chosen failures, pure: batch i fails with its first chosen
/// failure's code and one message: `describe[i]` (which names the batch: "allreduce 'w' and
/// 3 more fused tensors"), then each chosen rank, as its rank in the job (`job_ranks`, index
/// = rank in the set; empty: the set's), and its message without a repeat of the batch's
/// name ("failed on rank 2: ...; on rank 0: ..."), then the count left out; the set stops
/// with the marked batch's.
RoundVerdict decide_verdicts(const std::vector<BatchFailure>& chosen,
                             const std::vector<std::string>& describe,
                             const std::vector<int>& job_ranks = {});

/// The wire form of failures and verdicts (gather and broadcast): length-prefixed text.
std::string encode_failures(const std::vector<BatchFailure>& failures);
StatusOr<std::vector<BatchFailure>> decode_failures(const std::string& bytes);

class BatchVerdicts {
 public:
  /// Over the set's control transport (which outlives this). `board`: the same transport
  /// where the set's rounds go through the host's board (core/host_rounds.h), else null.
  /// `liveness_seconds`: CHORUS_LIVENESS_SECONDS (0: wait for ever); `gpu_timeout_seconds`:
  /// CHORUS_GPU_TIMEOUT_SECONDS, which bounds a member's device waits.
  /// `job_ranks`: the set's members as ranks of the job, which its verdicts name (empty:
  /// ranks of the set).
  BatchVerdicts(ControlTransport* control, HostRounds* board, double liveness_seconds,
                double gpu_timeout_seconds, std::string label, std::vector<int> job_ranks = {})
      : control_(control),
        board_(board),
        liveness_seconds_(liveness_seconds),
        gpu_timeout_seconds_(gpu_timeout_seconds),
        label_(std::move(label)),
        job_ranks_(std::move(job_ranks)) {}

  /// Agrees on a round of `mine.size()` batches (the same count on every member): `mine[i]`
  /// is this member's failure of batch i (OK if none); `stop_batch` the batch whose call
  /// failed here, after which this member made no more calls (-1: none); `device`: the round
  /// ran device batches, whose waits the GPU timeout bounds. Fails (ABORTED) when a member
  /// does not come within the bound: as late as its own waits allow (the liveness bound and
  /// the roll call, or twice the GPU timeout), and the liveness bound again.
  /// `describe(i)` names batch i; it is called only when some batch failed.
  StatusOr<RoundVerdict> agree(const std::vector<Status>& mine, int stop_batch,
                               const std::function<std::string(std::size_t)>& describe,
                               bool device);

 private:
  // Waits until `test` is done, for at most `bound` seconds (0: for ever), looking for
  // members known to have exited; names the ones missing when it gives up.
  Status wait_round(const std::function<StatusOr<bool>()>& test, double bound, const char* what);
  // The failures of every member, exchanged by messages: gathered at rank 0, chosen there,
  // and the choice broadcast (the background thread's, which makes every MPI call).
  StatusOr<std::vector<BatchFailure>> exchange(const std::vector<BatchFailure>& own, double bound);
  // The same over the host's board, without a message: every member reads every member's,
  // in as many rounds as the longest needs, and all choose alike.
  StatusOr<std::vector<BatchFailure>> share(const std::vector<BatchFailure>& own, double bound);

  ControlTransport* control_;
  HostRounds* board_;
  double liveness_seconds_;
  double gpu_timeout_seconds_;
  std::string label_;
  std::vector<int> job_ranks_;
  std::vector<uint64_t> bits_;  // reused from round to round
};

}  // namespace chorus
