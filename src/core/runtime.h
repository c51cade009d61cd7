#pragma once
// The runtime: the one object init() creates. It owns the services and the background
// thread that drives them; the public API forwards to it.
//
// Threads: trainer threads call submit() and the accessors; the work runs on the
// background thread ("chorus-bg"), the only thread that calls MPI or NCCL, and on trainer
// threads that drive the cycle while they wait (core/cycle.h).
//
// The services: the submissions that trainer threads hand over (core/submissions.h), what
// any thread may ask of the process sets (core/process_sets.h), the sets as the cycle runs
// them (core/set_table.h), the cycle and who drives it, the background thread or a waiting
// trainer thread (core/cycle_driver.h), and the timeline, flight recorder and stall reports
// (core/observability.h). The runtime sets up the world, the rank map, binding and the
// host's board (runtime_setup.cc), hands the background thread to the driver's loop, and
// tears everything down in order when the loop ends.

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
#include "collectives/topology_groups.h"
#include "collectives/world.h"
#include "collectives/world_choice.h"
#include "core/config.h"
#include "core/cycle_driver.h"
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

class Runtime final {
 public:
  /// Loads the configuration, starts the background thread, and returns once the world and
  /// the global process set are up on this rank (or with the reason they are not). The world
  /// is made on the background thread by `make_world`: an in-memory one for the in-process
  /// tests, whose ranks are threads of one process; unset, the one the configuration and the
  /// launcher choose (collectives/world_choice.h).
  static StatusOr<std::shared_ptr<Runtime>> start(const Options& options,
                                                  WorldFactory make_world = nullptr);
  ~Runtime();

  /// Asks every rank to stop, waits for the background thread, finalizes MPI if Chorus
  /// initialized it. Idempotent.
  Status shutdown();
  /// False once shut down (also when another rank asked for it) or failed.
  bool running() const { return submissions_.running(); }
  /// Why `call` cannot run once Chorus stopped: the failure or the peer's shutdown that
  /// stopped it, or NOT_INITIALIZED after this rank's own shutdown.
  Status stopped(const std::string& call) const { return submissions_.stopped(call); }

  /// The settings init() read (the elastic calls take theirs from here). Any thread.
  const Config& config() const { return config_; }
  /// Where this rank runs, its rank and the job's size; set up before start() returns,
  /// read-only after: any thread.
  const RankMap& rank_map() const { return map_; }
  /// The GPU this rank's collectives use (pinned by its first CUDA tensor). Any thread.
  RankDevice& gpu_device() { return gpu_device_; }
  /// The sets' sizes, this rank's place in them, and the names in flight. Any thread.
  ProcessSets& process_sets() { return process_sets_; }

  /// Hands the entries of one collective (several for a grouped allreduce, sharing one
  /// handle state) to the thread that runs the cycle, moving them out of `entries`.
  Handle submit(std::span<Entry> entries);

  /// start_timeline (`path` not empty): starts a timeline in `path` on rank 0, or on every
  /// rank with "{rank}" in it, closing the active one first (elsewhere, a start of rank 0's
  /// file only closes the rank's own); stop_timeline (`path` empty): stops the active one
  /// (OK when none is). Any thread but the background thread; returns once the background
  /// thread made the change, so a collective submitted afterwards is recorded (or not). Not
  /// collective.
  Status request_timeline(std::string path, bool mark_cycles);
  /// A training step ended on this rank (timeline/trainer_marks.h). Any thread.
  void mark_step() { observability_.trainer_marks().step(); }

  /// Cycles that trainer threads waiting on a handle ran to the end. Any thread.
  uint64_t trainer_cycles() const { return driver_.trainer_cycles(); }

 private:
  explicit Runtime(Config config);

  // The background thread (runtime.cc, runtime_setup.cc).
  void run(const WorldFactory& make_world, std::promise<Status> started)
      CHORUS_EXCLUDES(progress_mu_);
  Status setup(const WorldFactory& make_world) CHORUS_REQUIRES(progress_mu_);

  const Config config_;
  // Written by setup() before start() returns; read-only after.
  RankMap map_;
  RankDevice gpu_device_;
  ProcessSets process_sets_;
  Submissions submissions_;
  // Rung by trainer threads (submit, timeline requests, shutdown) and by the host's other
  // ranks; the background thread sleeps on it. Joined to the host's board by setup().
  Doorbells doorbells_;

  // Held by whichever thread runs the cycle's phases (core/cycle_driver.h), and by the
  // background thread while it sets up and tears down.
  Mutex progress_mu_;
  std::unique_ptr<World> world_ CHORUS_GUARDED_BY(progress_mu_);
  // Built when the hierarchical allreduce may use them (runtime_setup.cc), handed to the
  // global set's executor; destroyed before the world is finalized.
  TopologyGroups topology_groups_ CHORUS_GUARDED_BY(progress_mu_);
  // The timeline, the flight recorder and the stall lines (core/observability.h); started
  // by setup(). Its trainer row is marked by trainer threads, the rest under progress_mu_.
  Observability observability_;
  // The sets as the cycle runs them (core/set_table.h).
  SetTable sets_ CHORUS_GUARDED_BY(progress_mu_);
  // The cycle, run by the background thread's loop or by a waiting trainer thread.
  CycleDriver driver_;
  // The driver as the handles reach it, sharing the runtime's ownership: a handle that
  // drives keeps the runtime alive. Set by start(), read-only after.
  std::weak_ptr<detail::Driver> handle_driver_;

  std::thread thread_;
  // Written by the background thread before start() returns; read by request_timeline.
  std::thread::id bg_thread_id_;
};

}  // namespace chorus
