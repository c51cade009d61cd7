#pragma once
// An in-memory ControlTransport: N ranks as threads of one process, sharing a Hub.
//
// - start_and()/test_and() are non-blocking, like MPI_Iallreduce(BAND): an AND round
//   completes once all N ranks started it. Each rank counts its own rounds (a generation),
//   so a fast rank that starts round k+1 never mixes its bits into round k.
// - gather()/broadcast() are blocking rendezvous, also matched by per-rank generations.
//   They wait at most the Hub's timeout, then fail (and abort the hub), so a protocol bug
//   makes a test fail instead of hanging it.
// - The Hub counts completed rounds of each kind, so a test can tell whether a negotiation
//   round needed a gather (the coordinator) or was settled by the cache bits alone.
//
// Thread safety: one InMemoryTransport per rank, used by that rank's thread only; the Hub is
// shared and locks internally.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "transport/control_transport.h"

namespace chorus::testing {

class Hub {
 public:
  explicit Hub(int size, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  int size() const { return size_; }
  /// Completed AND rounds, gathers and broadcasts (each counted once, not once per rank).
  int64_t and_rounds() const;
  int64_t gathers() const;
  int64_t broadcasts() const;

  /// Fails every blocked and later call with `why` (a rank gave up; the others must too).
  void abort(const std::string& why);
  bool aborted() const;

 private:
  friend class InMemoryTransport;

  struct AndRound {
    std::vector<uint64_t> acc;
    int arrived = 0;
    int consumed = 0;
    std::string error;  // non-empty: ranks passed vectors of different lengths
  };
  struct GatherRound {
    std::vector<std::string> messages;
    int arrived = 0;
    int left = 0;  // ranks that have not picked up the result yet
  };
  struct BroadcastRound {
    std::string data;
    bool posted = false;
    int left = 0;
  };

  // Waits on cv_ until `ready()` or the timeout; false on timeout or abort.
  template <class Pred>
  bool wait(std::unique_lock<std::mutex>& lock, Pred ready);

  const int size_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, AndRound> ands_;
  std::map<uint64_t, GatherRound> gathers_;
  std::map<uint64_t, BroadcastRound> broadcasts_;
  int64_t and_count_ = 0;
  int64_t gather_count_ = 0;
  int64_t broadcast_count_ = 0;
  std::string abort_reason_;
};

class InMemoryTransport : public ControlTransport {
 public:
  InMemoryTransport(Hub* hub, int rank) : hub_(hub), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }

  Status start_and(std::vector<uint64_t>* bits) override;
  StatusOr<bool> test_and() override;
  StatusOr<std::vector<std::string>> gather(const std::string& mine) override;
  Status broadcast(std::string* data) override;

 private:
  Hub* hub_;
  const int rank_;
  uint64_t and_gen_ = 0;
  uint64_t gather_gen_ = 0;
  uint64_t broadcast_gen_ = 0;
  std::vector<uint64_t>* in_flight_ = nullptr;  // the bits of the AND this rank started
};

}  // namespace chorus::testing
