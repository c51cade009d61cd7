#pragma once
// The runtime: the one object init() creates. It owns every subsystem (MPI world, process
// sets with their negotiators and executors, timeline) and the background thread that
// drives them; the public API forwards to it.
//
// Threads: trainer threads call submit() and the accessors; the work runs on the
// background thread ("chorus-bg"), the only thread that calls MPI or NCCL.
//
// A cycle (take the queue, start the rounds, wait for them, complete them, execute the
// responses) runs under progress_mu_, in phases that any holder of the lock may take up
// where the last one left. A trainer thread waiting on a handle (Handle::wait) may take the
// lock when the background thread does not hold it, and run the phases that make no MPI
// call: in a job on one host whose only process set is the global one, the rounds go
// through the host's board and the allreduces of host tensors through shared memory
// (collectives/shm_reducer.h). It stops where a phase would need MPI (a coordinator
// exchange, another kind of collective, a process set change, shutdown), when peers keep a
// round waiting, or when its handle is done, and leaves the rest to the background thread,
// which it rings. This
// saves two context switches per collective (to the background thread and back), which
// on a host whose cores all run trainers is most of a small collective's time.

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

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
#include "core/name_set.h"
#include "core/negotiator.h"
#include "timeline/timeline.h"
#include "topology/rank_map.h"

namespace chorus {

class Runtime final : public detail::Driver, public std::enable_shared_from_this<Runtime> {
 public:
  using Clock = std::chrono::steady_clock;

  struct SetInfo {
    int size = 0;   ///< ranks in the set
    int rank = -1;  ///< this rank's index in the set, -1 if not a member
  };

  /// Makes the world on the background thread: MPI's (init_mpi_world) for a job, an
  /// in-memory one for the in-process tests, whose ranks are threads of one process.
  using WorldFactory = std::function<StatusOr<std::unique_ptr<World>>()>;

  /// Loads the configuration, starts the background thread, and returns once the world and
  /// the global process set are up on this rank (or with the reason they are not).
  static StatusOr<std::unique_ptr<Runtime>> start(const Options& options,
                                                  WorldFactory make_world = init_mpi_world);
  ~Runtime();

  /// Asks every rank to stop, waits for the background thread, finalizes MPI if Chorus
  /// initialized it. Idempotent.
  Status shutdown();
  /// False once shut down (also when another rank asked for it) or failed.
  bool running() const;
  /// Why `call` cannot run once Chorus stopped: the failure or the peer's shutdown that
  /// stopped it, or NOT_INITIALIZED after this rank's own shutdown.
  Status stopped(const std::string& call) const;

  const RankMap& rank_map() const { return map_; }
  /// The GPU this rank's collectives use (pinned by its first CUDA tensor). Any thread.
  RankDevice& gpu_device() { return gpu_device_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const Config& config() const { return config_; }

  /// Hands the entries of one collective (several for a grouped allreduce, sharing one
  /// handle state) to the background thread, moving them out of `entries`.
  Handle submit(std::span<Entry> entries);
  std::optional<SetInfo> set_info(int32_t id) const;
  /// running() and set_info(id) under one lock (the enqueue path); false if not running.
  bool running_set_info(int32_t id, std::optional<SetInfo>* info) const;
  /// "chorus.allreduce.7" in the global set, "chorus.set3.allreduce.7" in set 3: a counter per
  /// op and process set on this rank, so that a set's unnamed collectives match across its
  /// members whatever the other sets do.
  std::string generate_name(OpType op, int32_t set_id);

  /// Starts a timeline in `path` on rank 0 (other ranks: nothing to do, returns OK), closing
  /// the active one first, or stops the active one (OK when none is). Any thread but the
  /// background thread; returns once the background thread made the change, so a collective
  /// submitted afterwards is recorded (or not). Not collective.
  Status start_timeline(const std::string& path, bool mark_cycles);
  Status stop_timeline();

  /// Cycles that trainer threads waiting on a handle ran to the end (see above). Any thread.
  uint64_t trainer_cycles() const { return trainer_cycles_.load(std::memory_order_relaxed); }

  /// Handle's hooks (detail::Driver): runs cycles on the calling thread while it may (see
  /// above); wakes the background thread for work this thread's submit left to it.
  void drive(detail::HandleState& handle) override;
  void wake() override;

 private:
  struct SetState {
    int32_t id = 0;
    std::unique_ptr<Group> group;
    std::unique_ptr<ControlTransport> host_rounds;  // set when its rounds use the board
    ControlTransport* control = nullptr;            // host_rounds, or the group's
    std::unique_ptr<Negotiator> negotiator;
    std::unique_ptr<Executor> executor;
    EntryTable entries;
  };
  enum class State { kStarting, kRunning, kStopped };
  // Where the cycle in flight stands: the next phase to run.
  enum class Phase {
    kBegin,     // no cycle in flight: start one (begin_cycle)
    kPoll,      // rounds started: poll them until every set's is done (poll_rounds)
    kComplete,  // rounds done: complete them (complete_rounds)
    kExecute,   // responses known: execute them (execute_rounds)
  };
  // A start_timeline (path set) or stop_timeline (path empty) waiting for the thread that
  // runs the cycle, which takes them with the queue and answers through `done`.
  struct TimelineRequest {
    std::string path;
    bool mark_cycles = false;
    std::promise<Status> done;
  };

  explicit Runtime(Config config) : config_(std::move(config)) {}
  void run(const WorldFactory& make_world, std::promise<Status> started);
  Status setup(const WorldFactory& make_world);
  Status agree(const Status& local, const std::string& step, const Settings& settings);
  Status setup_topology(const std::vector<std::string>& names);
  StatusOr<std::unique_ptr<SetState>> make_set(int32_t id, const std::vector<int>& ranks);
  Status setup_doorbells();
  void loop();
  std::chrono::microseconds cycle_time() const {
    return std::chrono::microseconds(static_cast<int64_t>(config_.cycle_time_ms * 1000));
  }
  bool wait_for_work(std::chrono::microseconds timeout, bool pending, uint64_t cycles);
  Status cycle(bool stop_asked, bool* shutdown, bool* productive);
  bool take_queue(bool* stop_asked);
  bool pending() const;
  Status begin_cycle(bool stop_asked);
  StatusOr<bool> poll_rounds(bool liveness);
  Status complete_rounds();
  Status execute_rounds(bool* shutdown, bool* productive);
  void update_drivable();
  Status drive_phases(detail::HandleState& handle);
  void accept(std::vector<Entry>& fresh);
  Status duplicate_name(const Request& q) const;
  Status apply_set_changes(const std::vector<Response>& changes);
  void finish(SetState& set, Entry& entry, const Status& status);
  void release(Entry& entry, const Status& status);
  void fail_all(const Status& status);
  Status request_timeline(std::string path, bool mark_cycles);
  void apply_timeline_requests(std::vector<TimelineRequest> requests);
  void set_timeline(std::unique_ptr<Timeline> timeline, bool mark_cycles);
  Status stopped_locked(const std::string& call) const;  // mu_ held

  const Config config_;
  RankMap map_;
  // Background thread; built when the hierarchical allreduce may use them (setup_topology),
  // handed to the global set's executor; destroyed before MPI is finalized.
  TopologyGroups topology_groups_;
  RankDevice gpu_device_;
  int rank_ = -1;
  int size_ = -1;
  std::unique_ptr<World> world_;        // background thread
  std::unique_ptr<Timeline> timeline_;  // progress; rank 0 only
  bool mark_cycles_ = false;            // progress: timeline_ gets CYCLE_START marks
  // Held by whichever thread runs the cycle's phases (see above); it guards the members
  // marked "progress", which before setup ends and after the loop only the background
  // thread touches.
  std::mutex progress_mu_;
  std::map<int32_t, std::unique_ptr<SetState>> sets_;  // progress
  uint64_t cycles_ = 0;                                // progress: cycles started
  Phase phase_ = Phase::kBegin;                        // progress
  Clock::time_point cycle_start_;                      // progress: when the cycle began
  bool cycle_stop_asked_ = false;                      // progress: the cycle asks to stop
  // Progress: the queue's entries, taken by whoever runs the cycle; emptied after use, and
  // swapped with the queue, so that both keep their capacity.
  std::vector<Entry> fresh_;
  Status trainer_failure_;  // progress: a phase failed on a trainer thread; the loop ends
  // Written under progress_mu_: trainer threads may run cycles (see update_drivable()).
  std::atomic<bool> drivable_{false};
  std::atomic<bool> driving_{false};  // a trainer thread holds progress_mu_
  // A trainer thread left work for the background thread (a cycle in flight, requests
  // pending, or a queue), and rang its doorbell.
  std::atomic<bool> handed_over_{false};
  // Cycles that a trainer thread finished; written under progress_mu_.
  std::atomic<uint64_t> trainer_cycles_{0};
  // Rung by trainer threads (submit, timeline requests, shutdown) and by the host's other
  // ranks; the background thread sleeps on it.
  Doorbells doorbells_;

  mutable std::mutex mu_;  // guards everything below
  std::vector<Entry> queue_;
  std::vector<TimelineRequest> timeline_requests_;
  std::map<int32_t, SetInfo> set_info_;
  // The names of the collectives submitted and not yet finished, per process set: a name
  // joins at submit() and leaves just before its handle completes (release()).
  std::unordered_map<int32_t, NameSet> names_in_flight_;
  State state_ = State::kStarting;
  bool stop_requested_ = false;
  Status stopped_because_;
  Status shutdown_status_;
  std::thread thread_;
  // Written by the background thread before start() returns; read by request_timeline.
  std::thread::id bg_thread_id_;
  std::atomic<bool> work_queued_{false};  // set by submit(), cleared when the queue is taken

  std::array<std::atomic<uint64_t>, kNumOpTypes> name_counters_{};  // the global set's
  std::mutex set_names_mu_;
  std::unordered_map<int32_t, std::array<uint64_t, kNumOpTypes>> set_name_counters_;
};

}  // namespace chorus
