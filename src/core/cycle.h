#pragma once
// The cycle of this rank's process sets: take the submissions into their sets, start every
// set's round, wait for the rounds, complete them, execute the responses. It runs in
// phases that any holder of the runtime's progress lock may take up where the last one
// left: the background thread runs whole cycles (run()), waiting for peers between looks;
// a trainer thread waiting on a handle runs the phases that make no MPI call (drive()). In
// a job on one host whose only process set is the global one, the rounds go through the
// host's board and the allreduces of host tensors through shared memory, so a waiting
// trainer thread can run its own collectives, saving two context switches each.
//
// Thread contract: every call but drivable() and trainer_cycles() from the thread that
// holds the runtime's progress lock; those two from any thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "chorus/status.h"
#include "core/autotuner.h"
#include "core/doorbell.h"
#include "core/entry.h"
#include "core/handle_state.h"
#include "core/observability.h"
#include "core/set_table.h"
#include "core/submissions.h"

namespace chorus {

class Cycle {
 public:
  using Clock = std::chrono::steady_clock;

  /// Every pointer is the runtime's and outlives the cycle. `cycle_time`: the background
  /// thread's pause between looks at idle peers (CHORUS_CYCLE_TIME). `autotuner`: null
  /// where CHORUS_AUTOTUNE is off; each cycle that ran ends with it (core/autotuner.h).
  Cycle(SetTable* sets, Submissions* submissions, Doorbells* doorbells,
        Observability* observability, std::chrono::microseconds cycle_time,
        std::unique_ptr<Autotuner> autotuner)
      : sets_(sets),
        submissions_(submissions),
        doorbells_(doorbells),
        observability_(observability),
        cycle_time_us_(cycle_time.count()),
        autotuner_(std::move(autotuner)) {}

  /// The pause between looks at idle peers: CHORUS_CYCLE_TIME, or the autotuner's. Any thread.
  std::chrono::microseconds cycle_time() const {
    return std::chrono::microseconds(cycle_time_us_.load(std::memory_order_relaxed));
  }

  /// No cycle is in flight: the next phase starts one.
  bool at_rest() const { return phase_ == Phase::kBegin; }
  /// Cycles started so far.
  uint64_t started() const { return cycles_; }
  /// Takes the queue into the sets and applies the timeline requests; `stop_asked`: this
  /// rank asked to stop. Returns true if there were entries.
  bool take_queue(bool* stop_asked);
  /// The background thread's cycle, taken up at whichever phase it stands, waiting for the
  /// rounds between looks (`stop_asked`: this rank's final round). `shutdown`: a rank asked
  /// to stop; `productive`: the rounds ran collectives.
  Status run(bool stop_asked, bool* shutdown, bool* productive);
  /// A trainer thread's phases: until `handle` is done, or a phase needs the background
  /// thread (an MPI call), or peers keep a round waiting longer than a short poll.
  Status drive(detail::HandleState& handle);
  /// Whether trainer threads may run phases: every round goes through the host's board (the
  /// global set of a one-host job, alone) and fits there. Recomputed when the sets change,
  /// and cleared when the loop ends. Any thread.
  bool drivable() const { return drivable_.load(std::memory_order_acquire); }
  void update_drivable();
  void stop_driving() { drivable_.store(false, std::memory_order_release); }
  /// Cycles that trainer threads ran to the end. Any thread.
  uint64_t trainer_cycles() const { return trainer_cycles_.load(std::memory_order_relaxed); }

 private:
  // Where the cycle in flight stands: the next phase to run.
  enum class Phase {
    kBegin,     // no cycle in flight: start one (begin)
    kPoll,      // rounds started: poll them until every set's is done (poll)
    kComplete,  // rounds done: complete them (complete)
    kExecute,   // responses known: execute them (execute)
  };

  Status begin(bool stop_asked);
  StatusOr<bool> poll(bool liveness);
  Status complete();
  Status execute(bool* shutdown, bool* productive);
  // True if `phase`, run now, makes no MPI call (nor NCCL or CUDA): a trainer thread may.
  bool runs_without_mpi(Phase phase) const;
  // The autotuner's setting, from the next round on.
  void apply(const TuningSetting& setting);

  SetTable* sets_;
  Submissions* submissions_;
  Doorbells* doorbells_;
  Observability* observability_;
  std::atomic<int64_t> cycle_time_us_;  // cycle_time()
  std::unique_ptr<Autotuner> autotuner_;
  uint64_t cycles_ = 0;  // cycles started
  Phase phase_ = Phase::kBegin;
  Clock::time_point start_;
  bool stop_asked_ = false;  // the cycle in flight is this rank's final one
  // The submissions' entries, taken by whoever runs the cycle; emptied after use, and
  // swapped with the queue, so that both keep their capacity.
  std::vector<Entry> fresh_;
  std::atomic<bool> drivable_{false};
  std::atomic<uint64_t> trainer_cycles_{0};
};

}  // namespace chorus
