#pragma once
// The runtime's configuration: one immutable struct, read once at init() from Options and
// the CHORUS_* environment (or the HOROVOD_* variable of the same meaning, for job scripts
// written for Horovod), through one table with a row per setting. This file pair is the
// only reader of those variables; the topology code reads the launcher's own
// (topology/launcher_view.cc) and CUDA_VISIBLE_DEVICES (topology/binding.cc).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chorus/options.h"
#include "chorus/status.h"
#include "collectives/cost_model.h"
#include "collectives/gpu_path.h"
#include "collectives/world_choice.h"
#include "core/tuning_search.h"
#include "topology/cpu_plan.h"

namespace chorus {

/// Named settings, as {variable, value}.
using Settings = std::vector<std::pair<std::string, std::string>>;

/// What this build of the library offers, for the settings that depend on it.
struct BuildFeatures {
  bool nccl = false;  ///< built with NCCL (CHORUS_WITH_NCCL)
  /// The features of the library this is compiled into.
  static BuildFeatures current();
};

struct Config;

/// One setting: the row of Config::table() that load() reads, describe() and agreed()
/// write, and the documentation's tables are checked against (tests/unit/config_test.cc).
struct SettingRow {
  const char* variable;  ///< CHORUS_X
  const char* horovod;   ///< read when `variable` is unset or empty; nullptr: none
  const char* accepted;  ///< the accepted form, as error messages state it
  bool agreed;           ///< every rank must have the same value (init() checks)
  /// Sets the field from a non-empty value of the variable `name` (`accepted`: this row's).
  Status (*parse)(const std::string& name, const std::string& raw, const char* accepted, Config& c);
  /// Sets the field from Options, where they set it (`name`: the variable it stands for).
  Status (*take)(const std::string& name, const Options& o, Config& c);
  /// Whether the field's value is in range.
  bool (*valid)(const Config& c);
  /// The value as describe() and agreed() write it (doubles exactly, "%.17g").
  std::string (*show)(const Config& c);
  /// Turns a value of the Horovod variable into one `parse` reads ("" for unset); nullptr:
  /// the same. Where that is not the value itself read as Chorus reads it (HOROVOD_CYCLE_TIME=0),
  /// it says why in `why`, and load() notes it (Config::horovod_notes).
  std::string (*from_horovod)(const std::string& raw, std::string* why);
};

/// A HOROVOD_* variable that is no row's Horovod name: the others that horovod.torch 0.28.1
/// reads at run time, and the build-time choices that Horovod's images leave set. Job scripts
/// carry them, so none fails load(), whatever its value: each one set is noted
/// (Config::horovod_notes). The list is Config::horovod_variables(); docs/python.md's table
/// is checked against it (tests/unit/config_horovod_test.cc).
struct HorovodVariable {
  const char* variable;  ///< HOROVOD_X
  /// Where its value is an integer > 0 (how Horovod reads a flag): the settings it stands
  /// for, as {CHORUS_X, value}, each read where CHORUS_X is unset, before that row's own
  /// Horovod name. Empty: it has no effect in Chorus.
  std::vector<std::pair<const char*, const char*>> sets;
  /// Why it has no effect, or what its settings mean: the note's text after the variable.
  const char* why;
};

struct Config {
  using Getenv = std::function<const char*(const char*)>;

  /// The largest CHORUS_FUSION_THRESHOLD: a fusion buffer of this size is allocated when a
  /// batch needs it, and one far beyond any useful size would fail there instead of at init.
  static constexpr int64_t kMaxFusionThreshold = int64_t{1} << 32;
  /// The largest number of seconds any setting takes (a week).
  static constexpr double kMaxSeconds = 7 * 24 * 3600;

  /// The default CHORUS_FUSION_THRESHOLD of a set on one host: 512 KiB, the fastest of
  /// 256 KiB..64 MiB in bench/allreduce_bench's sweep there: fusion pays for small tensors
  /// (many calls become one), while copying tensors of hundreds of KB costs more than their
  /// own call, and a buffer that stays in cache pipelines better than one huge buffer.
  static constexpr int64_t kFusionThresholdOneHost = 512 << 10;
  /// The default of a set across hosts: every fusion buffer pays a round over the network,
  /// so fewer, larger buffers pay (the sweeps across fake hosts in docs/scaling.md).
  static constexpr int64_t kFusionThresholdAcrossHosts = 4 << 20;

  /// CHORUS_FUSION_THRESHOLD, bytes: most bytes packed into one fusion buffer; 0 turns
  /// fusion off; at most kMaxFusionThreshold. Unset (or "auto"): the set's default,
  /// fusion_threshold_for(). Agreed as written, so "auto" on one rank and a number on another
  /// fail init() even where the number is the default.
  std::optional<int64_t> fusion_threshold_bytes;
  /// The threshold of a set whose ranks are all on one host, or not (`across_hosts`).
  int64_t fusion_threshold_for(bool across_hosts) const {
    if (fusion_threshold_bytes) return *fusion_threshold_bytes;
    return across_hosts ? kFusionThresholdAcrossHosts : kFusionThresholdOneHost;
  }
  /// CHORUS_CYCLE_TIME, milliseconds: how often an idle background thread takes part in a
  /// negotiation round so that peers waiting on it (join, stall reports, shutdown) progress.
  /// A thread with fresh work never waits for it. Default 5 ms: each idle round costs CPU
  /// that the trainer needs, while only join, stall reports and shutdown wait on idle
  /// rounds (the measurements behind it: docs/performance.md).
  double cycle_time_ms = 5.0;
  /// CHORUS_CACHE_CAPACITY: responses remembered per process set; 0 turns the cache off.
  int64_t cache_capacity = 1024;
  /// CHORUS_TIMELINE: path of a Chrome-trace file to write; empty: no timeline. Rank 0
  /// writes it; a path with "{rank}" is every rank's (timeline/timeline.h).
  std::string timeline_path;
  /// CHORUS_TIMELINE_MAX_MB: the most a timeline file holds, in MiB; the oldest events go
  /// first.
  int64_t timeline_max_mb = 64;
  /// CHORUS_TIMELINE_MARK_CYCLES: 1 marks each cycle that ran a collective in the timeline
  /// that init() opens (CHORUS_TIMELINE), as start_timeline(path, true) does in the one it
  /// opens.
  bool timeline_mark_cycles = false;
  /// CHORUS_DEBUG_DIR: where each rank writes its flight record (core/flight_recorder.h).
  std::string debug_dir = ".";
  /// CHORUS_STALL_CHECK_SECONDS: warn about tensors some ranks submitted and others did not
  /// after this long; 0 turns the check off.
  double stall_check_seconds = 60.0;
  /// CHORUS_STALL_SHUTDOWN_SECONDS: fail such tensors on every rank after this long, and end
  /// the job with the stall's exit status; 0: never (warn for ever). Default 10 minutes, as
  /// a DDP job's watchdog: a job whose ranks wait on different tensors never recovers, and
  /// one that ends frees its allocation for a fixed run.
  double stall_shutdown_seconds = 600.0;
  /// CHORUS_LIVENESS_SECONDS: how long a rank waits in a negotiation round for the others
  /// before it fails every pending and later collective, naming the ranks that did not
  /// arrive (dead, or with their background thread stuck); 0: wait for ever. Every rank's
  /// background thread takes part in a round at least every cycle time, busy or not, so a
  /// round waits this long only for a rank that stopped. Default 60 s: longer than any
  /// single collective of a training step, so that the deadline never fires on a slow one.
  double liveness_seconds = 60.0;
  /// CHORUS_GPU_TIMEOUT_SECONDS: the longest wait for one GPU step: a NCCL communicator's
  /// creation, or a batch's device work (its inputs' producers, the copies and the NCCL
  /// call). Past it the set's NCCL communicators are aborted, which ends their kernels, and
  /// the collective fails on this rank naming it and the set's ranks. NCCL does not report a
  /// peer that never joins a collective, so without this bound such a wait never ends.
  /// Default 300 s: a batch waits for its producers' kernels, which may queue far behind.
  double gpu_timeout_seconds = 300.0;
  /// CHORUS_TEST_SHARED_GPU: for tests only, unsupported for training. 1: ranks of a set that
  /// share one GPU still use NCCL, each rank seen by NCCL as a host of its own (every rank
  /// must set a different NCCL_HOSTID), so that NCCL at n > 1 runs on a machine with one GPU.
  bool test_shared_gpu = false;
  /// CHORUS_TEST_FAIL_COLLECTIVE: for tests only. The name of a collective whose backend
  /// call fails on this rank as a failed NCCL or MPI call would, after the device work on
  /// its buffers was queued; empty: none.
  std::string test_fail_collective;
  /// CHORUS_TEST_FAIL_PART: for tests only. The name of a collective whose batch this rank
  /// takes part in but whose own part fails (as a late input, a timed-out staging copy or an
  /// output that cannot be had would), so that the set's verdict fails it on every member;
  /// empty: none.
  std::string test_fail_part;
  /// CHORUS_TEST_FAIL_AT_COMMIT: for tests only. "HOST:NUMBER": in an elastic job's first
  /// launch, once every node stored commit NUMBER, the ranks on HOST remove their node's
  /// store and kill themselves (a lost host); "HOST:NUMBER:hang": their training threads
  /// hang there instead (a stalled rank); "HOST:NUMBER:stop": their processes stop
  /// (SIGSTOP). Several, separated by commas. Empty: none (core/elastic.cc).
  std::string test_fail_at_commit;
  /// CHORUS_TEST_FAIL_RESTORE: for tests only. In an elastic job's second launch (or second
  /// round, resetting in place), the ranks on this host kill themselves once they have
  /// received the newest commit.
  std::string test_fail_restore;
  /// CHORUS_HIERARCHICAL_ALLREDUCE: allreduces of the global set reduce inside each node,
  /// then across nodes. Unset (or "auto"): on host memory where the layout allows it, flat on
  /// GPU memory; 1: on wherever the layout allows it (on NCCL, NCCL at both levels); 0: off
  /// (use_hierarchical_host_allreduce in collectives/hierarchical_allreduce.h, gpu_hierarchy in
  /// collectives/gpu_path.h).
  std::optional<bool> hierarchical_allreduce;
  /// CHORUS_SHARED_MEMORY: 1 (default): a set whose ranks all run on one host, and each
  /// host's ranks under the hierarchical allreduce, reduce through shared memory
  /// (collectives/shm/shm_backend.h), combining in rank order; 0: by MPI messages, in the tree
  /// order of sets across hosts (collectives/host_reduce.h), with CHORUS_HOST_ALGORITHM's
  /// choice of algorithm. Data movement is MPI's either way.
  bool shared_memory = true;
  /// CHORUS_LOG_LEVEL: trace, debug, info, warn, error, critical or off.
  std::string log_level = "warn";
  /// CHORUS_BIND: none, core or numa. Whether each rank (and its background thread) is
  /// bound to CPUs of its own; off by default since mpirun and srun may bind already.
  BindMode bind = BindMode::kNone;
  /// CHORUS_ELASTIC_JOB: the elastic job whose commits this rank stores and restores
  /// (include/chorus/elastic.h); chorusrun sets it for a supervised job. Empty: none, and
  /// commits stay in the process.
  std::string elastic_job;
  /// CHORUS_ELASTIC_DIR: the node-local directory holding each job's commit stores.
  std::string elastic_dir = "/dev/shm";
  /// CHORUS_ELASTIC_KEEP: the commits each node keeps, newest first.
  int64_t elastic_keep = 2;
  /// CHORUS_ELASTIC_SUPERVISOR: where chorusrun answers whether hosts were added
  /// (launch/hosts_notice.h), "a,b:port"; empty: not supervised.
  std::string elastic_supervisor;
  /// CHORUS_ELASTIC_HOSTS_VERSION: the hosts' version this launch started at; a newer one
  /// from the supervisor means hosts were added.
  int64_t elastic_hosts_version = 0;
  /// CHORUS_ELASTIC_LAUNCH: which launch of the elastic job this is, from 1; 0: not launched
  /// by chorusrun.
  int64_t elastic_launch = 0;
  /// CHORUS_ELASTIC_RENDEZVOUS: where an elastic job on the Gloo world asks chorusrun which
  /// round each start of Chorus joins, "a,b:port" (transport/elastic_round.h); empty: the job
  /// is not one. Set by chorusrun --gloo.
  std::string elastic_rendezvous;
  /// CHORUS_ELASTIC_WORKER: this process's id in that job. Set by chorusrun --gloo.
  std::string elastic_worker;
  /// CHORUS_GPU_BACKEND: auto, nccl or mpi. Which transport GPU collectives use: auto
  /// chooses NCCL when the build has it and every rank of the set has its own GPU, MPI
  /// otherwise; nccl and mpi force one (choose_gpu_path in collectives/gpu_path.h). nccl
  /// in a build without NCCL fails load().
  GpuBackendRequest gpu_backend = GpuBackendRequest::kAuto;
  /// CHORUS_HOST_ALGORITHM: auto, gather, direct, doubling or halving. How host-memory
  /// reductions of a set across hosts move data: auto chooses per call by the cost model
  /// (collectives/cost_model.h); the others force one, for measurements. Every algorithm
  /// combines in the same order, so the choice never changes a result's bits.
  HostAlgorithm host_algorithm = HostAlgorithm::kAuto;
  /// CHORUS_AUTOTUNE (HOROVOD_AUTOTUNE): 1 samples the settings that change no result
  /// during the job's first steps and keeps the best (core/autotuner.h). Agreed.
  bool autotune = false;
  /// CHORUS_AUTOTUNE_LOG (HOROVOD_AUTOTUNE_LOG): the CSV of the samples and the winner,
  /// written by rank 0, or by every rank where the path holds "{rank}"; empty: none.
  std::string autotune_log;
  /// CHORUS_AUTOTUNE_WARMUP_SAMPLES: samples taken and dropped before the first scored one
  /// (the first steps allocate and warm caches). Default 3, as Horovod's. Agreed.
  int64_t autotune_warmup_samples = 3;
  /// CHORUS_AUTOTUNE_STEPS_PER_SAMPLE: training steps per sample, a step ending where a
  /// collective's name comes back. Default 10, as Horovod's. Agreed.
  int64_t autotune_steps_per_sample = 10;
  /// CHORUS_AUTOTUNE_SAMPLES_PER_SETTING: samples of each setting, whose scores are averaged.
  /// Default 1. Agreed.
  int64_t autotune_samples_per_setting = 1;
  /// CHORUS_AUTOTUNE_MAX_SETTINGS (HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES): the most settings
  /// sampled before the best so far is kept. Default 20, as Horovod's. Agreed.
  int64_t autotune_max_settings = 20;
  /// CHORUS_AUTOTUNE_SEARCH: coordinate or grid (core/tuning_search.h). Agreed.
  TuningSearchKind autotune_search = TuningSearchKind::kCoordinate;
  /// CHORUS_CONTROLLER: auto, mpi or gloo. What carries the job's world: auto takes MPI where
  /// an MPI launcher started the job, Gloo where it has a store to meet in (torchrun's
  /// variables, or Options::rendezvous) and none did (collectives/world_choice.h).
  Controller controller = Controller::kAuto;
  /// CHORUS_GLOO_IFACE: the network interface of a Gloo world; empty: the address this host
  /// reaches MASTER_ADDR by.
  std::string gloo_iface;
  /// CHORUS_STORE_PORT: the port rank 0 serves a Gloo job's store on; 0: MASTER_PORT + 1
  /// (torchrun's agent, or torch's own store, holds MASTER_PORT).
  int64_t store_port = 0;
  /// Options::rendezvous: the store a Gloo world meets in, where the program gives one.
  std::shared_ptr<Rendezvous> rendezvous;

  /// What load() read of the HOROVOD_* variables that is not the plain value of a setting's
  /// Horovod name, one line each, naming the variable and its value: each variable of
  /// horovod_variables() that is set (it has no effect, or the settings it stands for), and each
  /// Horovod value read as another (HOROVOD_CYCLE_TIME=0). init() logs them on rank 0 at info
  /// level: none changes a result, and a job's ranks share their environment.
  std::vector<std::string> horovod_notes;

  /// Reads `options`, falling back to the environment (through `getenv_fn`: CHORUS_X, then
  /// what a variable of horovod_variables() says of it, then its Horovod name), then to the
  /// defaults. A malformed or out-of-range value of a setting, or one that `build` cannot
  /// honour, fails with kInvalidArgument naming the variable, the value and the accepted form;
  /// a variable of horovod_variables() never fails.
  static StatusOr<Config> load(const Options& options, const Getenv& getenv_fn,
                               const BuildFeatures& build = BuildFeatures::current());
  /// load() with the process environment.
  static StatusOr<Config> load(const Options& options);

  /// Every setting as "CHORUS_X=value", space-separated on one line, for the debug log.
  std::string describe() const;
  /// The settings that shape what ranks do together, as {variable, value}: they must be the
  /// same on every rank, which init() checks (core/runtime_setup.cc). The others (cycle
  /// time, timeline, log level, binding) are each rank's own.
  Settings agreed() const;

  /// Every setting, in the order describe() writes them.
  static const std::vector<SettingRow>& table();
  /// The HOROVOD_* variables that are no row's Horovod name, in docs/python.md's order.
  static const std::vector<HorovodVariable>& horovod_variables();
};

}  // namespace chorus
