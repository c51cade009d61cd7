#pragma once
// The coordinator's decision logic: a pure state machine, fed the request lists of every
// rank, that emits responses once a collective is ready everywhere and checks that the
// ranks agree. No threads, no MPI: the negotiator runs it on rank 0 of a process set, and
// tests run it directly.
//
// Order: responses come out in the order collectives became ready, scanning entries in
// the order they first arrived; with the same inputs the output is the same, and only
// rank 0 runs it, so every rank sees one order.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/message.h"
#include "protocol/stall_classes.h"

namespace chorus {

struct StallReport {
  std::vector<std::string> warnings;  ///< one line per stuck tensor, naming missing ranks
  std::vector<Response> failures;     ///< kStalled responses (stall shutdown reached)
  /// Why the tensors warned about or failed are stuck, one line per class, for every rank.
  std::vector<StallFinding> findings;
  /// Not 0 with failures: the exit status of the first class among the failed tensors.
  int exit_status = 0;
};

class Coordinator {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Coordinator(int size);

  /// Adds what `rank` sent in this round. Call for every rank, in rank order.
  void add(int rank, const RequestList& list, Clock::time_point now);
  /// A cached tensor `rank` reported as waiting for `waited_seconds` (stall inspection).
  void add_waiting(int rank, const Response& cached, double waited_seconds);
  /// The responses that became ready, in the order every rank must execute them.
  std::vector<Response> take_ready();
  /// Warnings for tensors stuck longer than `check_seconds` (each repeated at most once per
  /// `check_seconds`), and failures for those stuck longer than `shutdown_seconds` (> 0).
  /// Clears the waiting reports of this round.
  StallReport inspect_stalls(Clock::time_point now, double check_seconds, double shutdown_seconds);

  /// Whether inspect_stalls() has something to say now (lets rank 0 ask for a round).
  bool stall_due(Clock::time_point now, double check_seconds, double shutdown_seconds) const;

  /// Names still waiting for some rank (for tests and debug logs).
  std::vector<std::string> pending_names() const;

 private:
  // The requests that have arrived for one name, one slot per rank.
  struct Arrivals {
    std::vector<std::optional<Request>> by_rank;
    int count = 0;
    Clock::time_point first_seen;
    Clock::time_point last_warned;
    bool warned = false;
  };
  struct Waiting {
    Response cached;
    std::vector<bool> ranks;
    double waited_seconds = 0;
  };

  /// The request whose ranks alone owe one (an op submitted by the ranks it lists), or null.
  const Request* listing(const Arrivals& e) const;
  /// Per rank: its request arrived, or it owes none.
  std::vector<bool> not_owed(const Arrivals& e) const;
  bool complete(const Arrivals& e) const;
  Response decide(const std::string& name, const Arrivals& e) const;
  std::vector<int> missing_ranks(const std::vector<bool>& present) const;

  const int size_;
  std::unordered_map<std::string, Arrivals> table_;
  std::vector<std::string> arrival_;  // names in first-arrival order
  std::vector<bool> joined_;
  std::vector<double> idle_;  // each rank's RequestList::idle_seconds, as last received
  int last_joined_ = -1;
  std::map<std::string, Waiting> waiting_;
  std::map<std::string, Clock::time_point> cached_warned_;  // last warning per cached tensor
  std::vector<Response> ready_;
  int32_t next_set_id_ = 1;
};

/// Checks that the requests (index = rank; empty for a joined rank that contributes zeros)
/// agree under the rules of their op, and builds the response or an error response whose
/// message names the disagreeing ranks and values.
Response decide_response(const std::string& name,
                         const std::vector<std::optional<Request>>& by_rank);

}  // namespace chorus
