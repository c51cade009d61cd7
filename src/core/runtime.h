#pragma once
// The runtime: the one object init() creates. It owns every subsystem (the world, process
// sets with their negotiators and executors, timeline) and the background thread that
// drives them; the public API forwards to it.
//
// Threads: trainer threads call submit() and the accessors; the work runs on the
// background thread ("chorus-bg"), the only thread that calls MPI or NCCL.
//
// The parts: the submissions that trainer threads hand over (core/submissions.h), what any
// thread may ask of the process sets (core/process_sets.h), and the cycle with the state it
// owns, here. A cycle (take the submissions, start the rounds, wait for them, complete
// them, execute the responses) runs under progress_mu_, in phases that any holder of the
// lock may take up where the last one left. A trainer thread waiting on a handle
// (Handle::wait) may take the lock when the background thread does not hold it, and run
// the phases that make no MPI call (runs_without_mpi): in a job on one host whose only
// process set is the global one, the rounds go through the host's board and the allreduces
// of host tensors through shared memory (collectives/shm_reducer.h). It stops where a
// phase would need MPI (a coordinator exchange, another kind of collective, a process set
// change, shutdown), when peers keep a round waiting, or when its handle is done, and
// leaves the rest to the background thread, which it rings. This saves two context
// switches per collective (to the background thread and back), which on a host whose
// cores all run trainers is most of a small collective's time.

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "chorus/handle.h"
#include "chorus/options.h"
#include "collectives/mpi_world.h"
#include "collectives/topology_groups.h"
#include "collectives/world.h"
#include "core/config.h"
#include "core/doorbell.h"
#include "core/entry.h"
#include "core/entry_table.h"
#include "core/executor.h"
#include "core/handle_state.h"
#include "core/init_agreement.h"
#include "core/negotiator.h"
#include "core/observability.h"
#include "core/process_sets.h"
#include "core/set_table.h"
#include "core/submissions.h"
#include "topology/rank_map.h"

namespace chorus {

class Runtime final : public detail::Driver, public std::enable_shared_from_this<Runtime> {
 public:
  using Clock = std::chrono::steady_clock;
  /// Makes the world on the background thread: MPI's (init_mpi_world) for a job, an
  /// in-memory one for the in-process tests, whose ranks are threads of one process.
  using WorldFactory = std::function<StatusOr<std::unique_ptr<World>>(const WorldOptions&)>;

  /// Loads the configuration, starts the background thread, and returns once the world and
  /// the global process set are up on this rank (or with the reason they are not).
  static StatusOr<std::unique_ptr<Runtime>> start(const Options& options,
                                                  WorldFactory make_world = init_mpi_world);
  ~Runtime();

  /// Asks every rank to stop, waits for the background thread, finalizes MPI if Chorus
  /// initialized it. Idempotent.
  Status shutdown();
  /// False once shut down (also when another rank asked for it) or failed.
  bool running() const { return submissions_.running(); }
  /// Why `call` cannot run once Chorus stopped: the failure or the peer's shutdown that
  /// stopped it, or NOT_INITIALIZED after this rank's own shutdown.
  Status stopped(const std::string& call) const { return submissions_.stopped(call); }

  // Set up before start() returns, read-only after: any thread.
  const RankMap& rank_map() const { return map_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const Config& config() const { return config_; }
  /// The GPU this rank's collectives use (pinned by its first CUDA tensor). Any thread.
  RankDevice& gpu_device() { return gpu_device_; }
  /// The sets' sizes, this rank's place in them, and the names in flight. Any thread.
  ProcessSets& process_sets() { return process_sets_; }

  /// Hands the entries of one collective (several for a grouped allreduce, sharing one
  /// handle state) to the thread that runs the cycle, moving them out of `entries`.
  Handle submit(std::span<Entry> entries);

  /// Starts a timeline in `path` on rank 0, or on every rank with "{rank}" in it, closing
  /// the active one first (elsewhere, a start of rank 0's file only closes the rank's own),
  /// or stops the active one (OK when none is). Any thread but the background thread;
  /// returns once the background thread made the change, so a collective submitted
  /// afterwards is recorded (or not). Not collective.
  Status start_timeline(const std::string& path, bool mark_cycles);
  Status stop_timeline();
  /// A training step ended on this rank (timeline/trainer_marks.h). Any thread.
  void mark_step() { observability_.trainer_marks().step(); }

  /// Cycles that trainer threads waiting on a handle ran to the end (see above). Any thread.
  uint64_t trainer_cycles() const { return trainer_cycles_.load(std::memory_order_relaxed); }

  /// Handle's hooks (detail::Driver): runs cycles on the calling thread while it may (see
  /// above); wakes the background thread for work this thread's submit left to it.
  void drive(detail::HandleState& handle) override;
  void wake() override;
  void waited(Clock::time_point since) override { observability_.trainer_marks().waited(since); }

 private:
  // Where the cycle in flight stands: the next phase to run.
  enum class Phase {
    kBegin,     // no cycle in flight: start one (begin_cycle)
    kPoll,      // rounds started: poll them until every set's is done (poll_rounds)
    kComplete,  // rounds done: complete them (complete_rounds)
    kExecute,   // responses known: execute them (execute_rounds)
  };

  explicit Runtime(Config config);

  // The background thread (runtime.cc, runtime_setup.cc).
  void run(const WorldFactory& make_world, std::promise<Status> started)
      CHORUS_EXCLUDES(progress_mu_);
  Status setup(const WorldFactory& make_world) CHORUS_REQUIRES(progress_mu_);
  Status agree(const Status& local, const std::string& step, const Settings& settings)
      CHORUS_REQUIRES(progress_mu_);
  Status setup_topology(const std::vector<std::string>& names) CHORUS_REQUIRES(progress_mu_);
  Status setup_doorbells() CHORUS_REQUIRES(progress_mu_);
  void loop() CHORUS_EXCLUDES(progress_mu_);
  std::chrono::microseconds cycle_time() const {
    return std::chrono::microseconds(static_cast<int64_t>(config_.cycle_time_ms * 1000));
  }
  bool wait_for_work(std::chrono::microseconds timeout, bool pending, uint64_t cycles)
      CHORUS_EXCLUDES(progress_mu_);
  Status cycle(bool stop_asked, bool* shutdown, bool* productive) CHORUS_REQUIRES(progress_mu_);

  // The cycle's phases, run by whichever thread holds progress_mu_ (runtime_cycle.cc).
  bool take_queue(bool* stop_asked) CHORUS_REQUIRES(progress_mu_);
  Status begin_cycle(bool stop_asked) CHORUS_REQUIRES(progress_mu_);
  StatusOr<bool> poll_rounds(bool liveness) CHORUS_REQUIRES(progress_mu_);
  Status complete_rounds() CHORUS_REQUIRES(progress_mu_);
  Status execute_rounds(bool* shutdown, bool* productive) CHORUS_REQUIRES(progress_mu_);
  /// The capability query: true if `phase`, run now, makes no MPI call (nor NCCL or CUDA),
  /// so that a trainer thread may run it (drive_phases).
  bool runs_without_mpi(Phase phase) const CHORUS_REQUIRES(progress_mu_);
  void update_drivable() CHORUS_REQUIRES(progress_mu_);
  Status drive_phases(detail::HandleState& handle) CHORUS_REQUIRES(progress_mu_);
  Status request_timeline(std::string path, bool mark_cycles);

  const Config config_;
  // Written by setup() before start() returns; read-only after.
  RankMap map_;
  int rank_ = -1;
  int size_ = -1;
  RankDevice gpu_device_;
  ProcessSets process_sets_;
  Submissions submissions_;
  // Rung by trainer threads (submit, timeline requests, shutdown) and by the host's other
  // ranks; the background thread sleeps on it. Joined to the host's board by setup().
  Doorbells doorbells_;

  // Held by whichever thread runs the cycle's phases (see above), and by the background
  // thread while it sets up and after its loop.
  Mutex progress_mu_;
  std::unique_ptr<World> world_ CHORUS_GUARDED_BY(progress_mu_);
  // Built when the hierarchical allreduce may use them (setup_topology), handed to the
  // global set's executor; destroyed before the world is finalized.
  TopologyGroups topology_groups_ CHORUS_GUARDED_BY(progress_mu_);
  // The timeline, the flight recorder and the stall lines (core/observability.h); started
  // by setup(). Its trainer row is marked by trainer threads, the rest under progress_mu_.
  Observability observability_;
  // The sets as the cycle runs them (core/set_table.h).
  SetTable sets_ CHORUS_GUARDED_BY(progress_mu_);
  uint64_t cycles_ CHORUS_GUARDED_BY(progress_mu_) = 0;  // cycles started
  Phase phase_ CHORUS_GUARDED_BY(progress_mu_) = Phase::kBegin;
  Clock::time_point cycle_start_ CHORUS_GUARDED_BY(progress_mu_);
  bool cycle_stop_asked_ CHORUS_GUARDED_BY(progress_mu_) = false;  // the cycle asks to stop
  // The submissions' entries, taken by whoever runs the cycle; emptied after use, and
  // swapped with the queue, so that both keep their capacity.
  std::vector<Entry> fresh_ CHORUS_GUARDED_BY(progress_mu_);
  // A phase failed on a trainer thread; the loop ends.
  Status trainer_failure_ CHORUS_GUARDED_BY(progress_mu_);
  // Written under progress_mu_ (update_drivable): trainer threads may run cycles.
  std::atomic<bool> drivable_{false};
  std::atomic<bool> driving_{false};  // a trainer thread holds progress_mu_
  // A trainer thread left work for the background thread (a cycle in flight, requests
  // pending, or a queue), and rang its doorbell.
  std::atomic<bool> handed_over_{false};
  // Cycles that a trainer thread finished; written under progress_mu_.
  std::atomic<uint64_t> trainer_cycles_{0};

  std::thread thread_;
  // Written by the background thread before start() returns; read by request_timeline.
  std::thread::id bg_thread_id_;
};

}  // namespace chorus
