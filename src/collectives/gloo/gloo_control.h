#pragma once
// The control transport of a group over Gloo (transport/control_transport.h). The round's AND
// is the recursive doubling MpiControl makes (ranks beyond the largest power of two fold in
// first), over Gloo's unbound buffers. Gloo has no test for a message, and a wait that runs
// out of time poisons the context, so a round cannot be polled: each group has a round
// thread that runs it with blocking waits while test_and() only looks whether it has
// finished. The gather and the broadcast come right after a round that every member
// finished, so they wait on the caller's thread, bounded by the liveness bound.
//
// A round that waits too long, or a gather or broadcast that fails, holds a roll call in the
// job's store, since a member stuck behind the one that is gone looks the same from here: each
// member whose wait ran out sets its key, looks for the others' for kRollCallGrace, and names
// the members whose keys are not there. A round finished on the round thread rings the
// waiting rank (on_round_done).
//
// Thread contract: one thread drives the transport (the runtime's background thread, or a
// trainer thread running a cycle in its stead, never both at once); the round thread is the
// transport's own.

#include <gloo/context.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chorus/rendezvous.h"
#include "collectives/and_schedule.h"
#include "transport/control_transport.h"

namespace chorus {

class GlooControl final : public ControlTransport {
 public:
  /// Where the roll call is held: the job's store, and keys of this group's own.
  struct RollCall {
    std::shared_ptr<Rendezvous> store;
    std::string prefix;
    /// A key of the store where a supervisor that saw ranks of the job end describes them
    /// (an elastic round's "lost", transport/elastic_round.h); empty: none is kept.
    std::string lost_key;
  };

  /// Over `context` (connected, used by nothing else); `job_ranks`: the members as ranks of
  /// the job (index = member). Without a roll call's store, absent() is missing().
  GlooControl(std::shared_ptr<gloo::Context> context, std::vector<int> job_ranks,
              RollCall roll_call = {});
  ~GlooControl() override;

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  int job_rank(int member) const override {
    return job_ranks_.at(static_cast<std::size_t>(member));
  }

  Status start_and(std::vector<uint64_t>* bits) override;
  StatusOr<bool> test_and() override;
  std::vector<int> missing() const override;
  /// What the supervisor's lost key says, once it is set (whatever `ranks`: the job lost a
  /// rank, and every member names it alike); empty before, or without the key.
  std::string exited(const std::vector<int>& ranks) const override;
  std::vector<int> absent() override;
  void announce() override;
  void set_liveness(double seconds) override { liveness_seconds_ = seconds; }
  void on_round_done(std::function<void()> wake) override;

  StatusOr<std::vector<std::string>> gather(const std::string& mine) override;
  Status broadcast(std::string* data) override;

 private:
  std::string here_key(int member) const;
  void round_loop();
  // One step of the round in flight; false where it failed (failure_ says why) or stopped.
  bool run_step(int step);
  // Sends the bits to `send_to` and receives `receive_from`'s into `into` (-1: no such
  // message), waiting with no bound but the stop: the negotiator bounds the round.
  bool exchange(int send_to, int receive_from, uint64_t* into);
  std::chrono::milliseconds bound() const;
  // One message of a gather or a broadcast.
  struct Message {
    bool send;
    int peer;
    uint64_t slot;
    void* data;
    std::size_t bytes;
  };
  // Posts every message, then waits for each, bounded by the liveness bound together.
  Status exchange_all(std::vector<Message>& messages, const char* what);
  // Of `late`, the members that do not answer a roll call in the store.
  std::vector<int> roll_call(std::vector<int> late);

  std::shared_ptr<gloo::Context> context_;
  std::vector<int> job_ranks_;
  RollCall roll_call_;
  std::function<void()> wake_;  // set before the first round, then read by the round thread
  bool announced_ = false;
  AndSchedule schedule_;
  double liveness_seconds_ = 0;

  // The round: the driving thread hands it over in start_and(), the round thread runs it.
  std::mutex mu_;
  std::condition_variable cv_;
  // The caller's bits of the round in flight (the driving thread's alone), and the round
  // thread's copy, which outlives them if the caller goes first (a set torn down mid-round).
  std::vector<uint64_t>* bits_ = nullptr;
  std::vector<uint64_t> round_bits_;
  std::vector<uint64_t> incoming_;
  uint64_t rounds_started_ = 0;
  uint64_t rounds_run_ = 0;
  std::string failure_;                        // a step that failed: the rounds are over
  std::atomic<int> step_{AndSchedule::kDone};  // for missing()
  std::atomic<uint64_t> finished_{0};          // rounds the round thread finished
  bool stop_ = false;
  gloo::transport::UnboundBuffer* waiting_on_[2] = {nullptr, nullptr};  // for the stop
  std::thread thread_;
};

}  // namespace chorus
