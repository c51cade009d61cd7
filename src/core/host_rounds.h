#pragma once
// The control transport of a process set whose ranks are exactly the ranks of one host's
// board (core/doorbell.h): its rounds go through the board, its gathers and broadcasts
// through the set's own transport. A rank publishes its bits in shared memory before it
// rings, so a round completes the moment its last rank arrives, with no message in flight
// that would need its sender to make progress: a waiting rank may sleep until that ring
// (completes_on_arrival). A round whose bits do not fit the board goes through the set's
// transport; the bits have the same length on every rank, so all ranks choose alike.

#include <cstdint>
#include <string>
#include <vector>

#include "core/doorbell.h"
#include "transport/control_transport.h"

namespace chorus {

class HostRounds final : public ControlTransport {
 public:
  /// `inner`: the set's transport, rank i = local rank i on `board`. Both outlive this.
  HostRounds(ControlTransport* inner, Doorbells* board) : inner_(inner), board_(board) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  int job_rank(int member) const override { return inner_->job_rank(member); }
  Status start_and(std::vector<uint64_t>* bits) override;
  StatusOr<bool> test_and() override;
  bool completes_on_arrival() const override { return on_board_; }
  std::vector<int> missing() const override;
  std::vector<int> absent() override;
  void announce() override { inner_->announce(); }
  void set_liveness(double seconds) override { inner_->set_liveness(seconds); }
  std::string exited(const std::vector<int>& ranks) const override;
  StatusOr<std::vector<std::string>> gather(const std::string& mine) override {
    return inner_->gather(mine);
  }
  Status broadcast(std::string* data) override { return inner_->broadcast(data); }

  /// A round that shares instead of ANDing, on the board alone (no message, so a trainer
  /// thread may run it): every member publishes `mine` (at most Doorbells::kRoundWords words,
  /// the same count on every member), and test_share() gives every member's once all have.
  /// Counts as a round like start_and's: every member makes the same rounds in the same order.
  Status start_share(const std::vector<uint64_t>& mine);
  StatusOr<bool> test_share(std::vector<std::vector<uint64_t>>* all);

 private:
  ControlTransport* inner_;
  Doorbells* board_;
  uint64_t round_ = 0;  // rounds on the board so far
  bool on_board_ = false;
  std::vector<uint64_t>* bits_ = nullptr;
  std::size_t shared_words_ = 0;  // the share round's length
};

}  // namespace chorus
