#pragma once
// The hand-over from the trainer threads to the thread that runs the cycle (core/cycle.h):
// the entries submitted, the start/stop_timeline requests and the stop request, taken
// together at the start of a cycle; and whether Chorus runs, which every submit checks under
// the same lock, so that none lands in a queue that no one will take. Thread-safe.

#include <atomic>
#include <future>
#include <span>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "chorus/status.h"
#include "core/entry.h"

namespace chorus {

class Submissions {
 public:
  /// A start_timeline (path set) or stop_timeline (path empty), answered through `done` by
  /// the thread that takes it.
  struct TimelineRequest {
    std::string path;
    bool mark_cycles = false;
    std::promise<Status> done;
  };
  /// What take() hands to the cycle.
  struct Taken {
    bool stop_asked = false;  ///< this rank asked to stop
    std::vector<TimelineRequest> timeline_requests;
  };

  /// From starting to running: submits are taken from here on.
  void set_running();
  /// Without the lock (the enqueue path asks it first); push() decides under the lock.
  bool running() const { return running_.load(std::memory_order_acquire); }
  /// Why `call` cannot run once Chorus stopped (or before it ran): the failure or the peer's
  /// shutdown that stopped it, or NOT_INITIALIZED after this rank's own shutdown.
  Status stopped(const std::string& call) const;

  /// Appends one submit's entries, adjacent, stamping their enqueue time; false (nothing
  /// taken) when Chorus is not running.
  bool push(std::span<Entry> entries);
  /// Queues a timeline request; false (not queued) when Chorus is not running.
  bool push(TimelineRequest request);
  void request_stop();

  /// Swaps the queue into `fresh` (empty, keeping its capacity for the next swap) and takes
  /// the requests.
  Taken take(std::vector<Entry>* fresh);
  /// Set by a push of entries, cleared by take(); sequentially consistent (see
  /// CycleDriver::drive()).
  bool work_queued() const { return work_queued_.load(std::memory_order_seq_cst); }
  /// A stop or timeline request waits (`requests`), or entries do (`entries`).
  void waiting(bool* requests, bool* entries) const;

  /// Running to stopped, with what later calls are told: `ended` (an error or a peer's
  /// shutdown) unless this rank asked to stop. Answers the timeline requests still queued
  /// with that, and moves the entries still queued into `entries`, for the caller to fail.
  void stop(const Status& ended, std::vector<Entry>* entries);
  /// The final status of the shutdown (set once the background thread finished).
  void set_shutdown_status(Status s);
  Status shutdown_status() const;

 private:
  enum class State { kStarting, kRunning, kStopped };
  Status stopped_locked(const std::string& call) const CHORUS_REQUIRES(mu_);

  mutable Mutex mu_;
  std::vector<Entry> queue_ CHORUS_GUARDED_BY(mu_);
  std::vector<TimelineRequest> timeline_requests_ CHORUS_GUARDED_BY(mu_);
  State state_ CHORUS_GUARDED_BY(mu_) = State::kStarting;
  bool stop_requested_ CHORUS_GUARDED_BY(mu_) = false;
  Status stopped_because_ CHORUS_GUARDED_BY(mu_);
  Status shutdown_status_ CHORUS_GUARDED_BY(mu_);
  std::atomic<bool> work_queued_{false};
  std::atomic<bool> running_{false};  // state_ == kRunning, written with it
};

}  // namespace chorus
