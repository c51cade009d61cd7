#pragma once
// The control channel of one process set: the few primitives the negotiation needs. MPI
// provides one (collectives/mpi/mpi_world.h), Gloo another (collectives/gloo/gloo_control.h);
// tests provide an in-memory one that runs ranks as threads. Called only from the thread
// that drives the negotiation.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chorus/status.h"

namespace chorus {

class ControlTransport {
 public:
  virtual ~ControlTransport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Member `member` as a rank of the job, the number the launcher and every message use
  /// (a subset's member 0 may be the job's rank 5). Default: the same number.
  virtual int job_rank(int member) const { return member; }
  /// Every member in `members` as a rank of the job.
  std::vector<int> job_ranks(const std::vector<int>& members) const {
    std::vector<int> out;
    out.reserve(members.size());
    for (int m : members) out.push_back(job_rank(m));
    return out;
  }

  /// Starts a bitwise AND of `bits` across every member; every member passes a vector of
  /// the same length. Non-blocking: the round's rendezvous, which a rank enters whenever
  /// it is ready and which must never trap the thread (a peer may be idle for a while).
  /// `bits` must stay alive and untouched until test_and() returns true.
  virtual Status start_and(std::vector<uint64_t>* bits) = 0;
  /// True once `bits` holds the AND of every member's vector.
  virtual StatusOr<bool> test_and() = 0;
  /// True if the round in flight completes as soon as every other member has started it,
  /// with nothing in flight that needs a member's progress (core/host_rounds.h). A waiting
  /// rank may then sleep until its peers announce their arrival (core/doorbell.h) instead
  /// of polling.
  virtual bool completes_on_arrival() const { return false; }

  /// For the liveness report of a round that waits too long: the members whose part of the
  /// round in flight has not reached this rank, directly or through another member. A
  /// transport that cannot tell names every other member.
  virtual std::vector<int> missing() const {
    std::vector<int> others;
    for (int r = 0; r < size(); ++r) {
      if (r != rank()) others.push_back(r);
    }
    return others;
  }
  /// At the liveness deadline, before the round fails: the members that are not waiting in
  /// this round, as exactly as the transport can find out (it may ask the others, taking
  /// seconds). Default: missing().
  virtual std::vector<int> absent() { return missing(); }
  /// Tells every other member that this rank is still here, for a member whose own wait ran
  /// out and asks (MPI's roll call, collectives/mpi/mpi_world.cc). Default: nothing to tell.
  virtual void announce() {}
  /// Of `ranks`, the members known to have exited, described ("rank 2 (pid 4242)"); empty
  /// where none is known to have (a transport that cannot tell).
  virtual std::string exited(const std::vector<int>& ranks) const {
    (void)ranks;
    return {};
  }

  /// A transport that finishes rounds on a thread of its own calls `wake` whenever one
  /// finishes (or fails), so that the rank waiting for it sleeps instead of polling. Set
  /// before the first round.
  virtual void on_round_done(std::function<void()> wake) { (void)wake; }

  /// How long gather() and broadcast() may wait for a member before they fail (ABORTED);
  /// 0: for ever. The negotiator passes its liveness bound.
  virtual void set_liveness(double seconds) { (void)seconds; }

  /// Gathers one message per member at rank 0 (index = rank; empty elsewhere). Blocking:
  /// called only right after an AND completed, when every member is known to be here.
  virtual StatusOr<std::vector<std::string>> gather(const std::string& mine) = 0;
  /// Broadcasts `data` from rank 0 to every member (replacing `data` elsewhere). Blocking,
  /// under the same rule as gather().
  virtual Status broadcast(std::string* data) = 0;
};

}  // namespace chorus
