#pragma once
// Who runs the cycle (core/cycle.h), and when: the background thread's loop, which sleeps
// until there is work and then runs whole cycles, and trainer threads that wait on a handle
// and run the phases that make no MPI call themselves (detail::Driver). Both take the
// runtime's progress lock for it; a trainer thread only when no one holds it.
//
// It also decides when a trainer's submit wakes the background thread: a thread that waits
// for each collective right after submitting it runs that collective in its wait, and
// waking the background thread would only take its core. Should the wait not come next,
// the thread's next submit, wait or poll rings instead (wake()); a thread that does none of
// those leaves the work to the background thread's next look, within the cycle time.
//
// Thread contract: loop() on the background thread alone; submitted(), drive(), wake() and
// waited() on trainer threads; trainer_cycles() on any.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "base/mutex.h"
#include "chorus/status.h"
#include "core/cycle.h"
#include "core/doorbell.h"
#include "core/handle_state.h"
#include "core/observability.h"
#include "core/set_table.h"
#include "core/submissions.h"

namespace chorus {

class CycleDriver final : public detail::Driver {
 public:
  using Clock = std::chrono::steady_clock;

  /// Every pointer is the runtime's and outlives the driver; `progress_mu` is the lock
  /// that whoever runs the cycle holds. `cycle_time`: CHORUS_CYCLE_TIME; `autotuner`: the
  /// cycle's (null where CHORUS_AUTOTUNE is off).
  CycleDriver(Mutex* progress_mu, SetTable* sets, Submissions* submissions, Doorbells* doorbells,
              Observability* observability, std::chrono::microseconds cycle_time,
              std::unique_ptr<Autotuner> autotuner);

  /// How the loop ended: the failure or shutdown that stopped it, and whether MPI may still
  /// be called (false after a failed round: requests may be left that never complete).
  struct Ended {
    Status status;
    bool mpi_usable = true;
  };
  /// The background thread's loop, from a world set up to its end: runs cycles until a
  /// shutdown or a failure, then calls `teardown` with the progress lock held and trainer
  /// threads kept out. Takes and releases the lock itself.
  void loop(const std::function<void(const Ended&)>& teardown) CHORUS_EXCLUDES(*progress_mu_);

  /// The calling trainer thread queued the entries of `handle`: rings the background
  /// thread unless this thread is expected to run them in its wait (see above).
  void submitted(const detail::HandleState* handle);

  // detail::Driver, for trainer threads.
  void drive(detail::HandleState& handle) override;
  void wake() override;
  void waited(Clock::time_point since) override { observability_->trainer_marks().waited(since); }

  /// Cycles that trainer threads waiting on a handle ran to the end. Any thread.
  uint64_t trainer_cycles() const { return cycle_.trainer_cycles(); }

 private:
  // Sleeps until there is work, `timeout`, or (`pending`) a peer on this host ahead of
  // `cycles`; false if the timeout ended it (cycle_driver.cc).
  bool wait_for_work(std::chrono::microseconds timeout, bool pending, uint64_t cycles)
      CHORUS_EXCLUDES(*progress_mu_);

  Mutex* const progress_mu_;
  SetTable* const sets_ CHORUS_PT_GUARDED_BY(*progress_mu_);
  Submissions* const submissions_;
  Doorbells* const doorbells_;
  Observability* const observability_;
  // Its phases run under the progress lock, which is its contract rather than an
  // annotation, since trainer threads ask it, without the lock, whether they may drive it.
  Cycle cycle_;
  // A phase failed on a trainer thread; the loop ends.
  Status trainer_failure_ CHORUS_GUARDED_BY(*progress_mu_);
  std::atomic<bool> driving_{false};  // a trainer thread holds the progress lock
  // A trainer thread left work for the background thread (a cycle in flight, requests
  // pending, or a queue), and rang its doorbell.
  std::atomic<bool> handed_over_{false};
};

}  // namespace chorus
