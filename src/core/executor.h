#pragma once
// Runs one process set's agreed responses on this rank: fuses what the planner groups,
// packs, calls the backend, unpacks, and finishes the entries. Each op's own execution is
// its descriptor's (core/ops/op.h), for host and CUDA tensors alike, over the memory they
// live in (core/tensor_memory.h); the executor fuses, orders and completes. Called by the
// thread that runs the runtime's cycles: the background thread, or a waiting trainer thread for
// responses that runs_without_mpi() accepts (core/cycle.h).
// Every member of the set runs the same responses in the same order, so the backend calls
// line up across ranks; a rank without an entry for an allreduce (it joined) contributes
// zeros.

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "collectives/backend.h"
#include "collectives/gpu_context.h"
#include "core/batch_verdict.h"
#include "core/entry.h"
#include "core/entry_table.h"
#include "core/host_memory.h"
#include "core/ops/op.h"
#include "core/tensor_memory.h"
#include "timeline/timeline.h"

namespace chorus {

class Executor {
 public:
  using Finish = std::function<void(Entry&, const Status&)>;
  using Clock = std::chrono::steady_clock;
  using Job = chorus::Job;  ///< looked up once per round

  /// `host`: the set's backends for host memory. `fusion_capacity`: bytes of each fusion
  /// buffer, the most a fused batch may hold (0: no fusion); the fusion limit starts there.
  /// `timeline` may be null.
  Executor(BackendChoice host, std::size_t fusion_capacity, Timeline* timeline);
  ~Executor();

  /// Later rounds fuse at most `bytes` per batch (0: no fusion), up to the buffers' capacity
  /// (CHORUS_FUSION_THRESHOLD; the autotuner varies it, core/autotuner.h). Between execute()
  /// calls; every member of the set must make the same call before the same round, since
  /// each plans its batches alone.
  void set_fusion_limit(std::size_t bytes) {
    fusion_limit_ = std::min(bytes, host_.fusion_capacity());
  }
  std::size_t fusion_limit() const { return fusion_limit_; }
  /// Later collectives on host memory (and the GPU's staged through it) reduce by
  /// `algorithm` (Backend::set_host_algorithm); same contract as set_fusion_limit().
  void set_host_algorithm(HostAlgorithm algorithm) {
    host_.backends().set_host_algorithm(algorithm);
  }
  /// Whether the host algorithm changes anything here: false where the set's reductions go
  /// through shared memory (every member on one host), which moves no messages.
  bool host_algorithm_applies() const { return !host_.backends().offered_by("shared memory"); }

  /// What the set's GPU context is built from at its first CUDA response (label, the
  /// rank's device, topology for the hierarchical allreduce, path override). The runtime
  /// calls it when it makes the set; without it: the set's own backend, flat, on
  /// cuda:0. Call before the first execute().
  void set_gpu_setup(const GpuContextSetup& setup);
  /// Where the phases of later responses are recorded (null: nowhere). Between execute()
  /// calls: start_timeline/stop_timeline switch it there.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  /// CHORUS_TEST_FAIL_COLLECTIVE (tests only): the backend call of the batch holding the
  /// collective `call` fails on this rank (core/injected_failure.h); CHORUS_TEST_FAIL_PART:
  /// this rank's own part of the batch holding `part` fails after it took part. Empty: none.
  void set_injected_failure(std::string call, std::string part) {
    injected_failure_ = std::move(call);
    injected_part_ = std::move(part);
  }
  /// Where each round's batches are agreed on (core/batch_verdict.h): the set's control
  /// transport and, where its rounds go through the host's board, the board's (both outlive
  /// the executor; `board` may be null), CHORUS_LIVENESS_SECONDS, CHORUS_GPU_TIMEOUT_SECONDS,
  /// the set's label and its members' ranks in the job. Without it (an executor tested
  /// alone) each rank's outcomes stand.
  void set_verdicts(ControlTransport* control, HostRounds* board, double liveness_seconds,
                    double gpu_timeout_seconds, std::string label, std::vector<int> job_ranks) {
    verdicts_ =
        std::make_unique<BatchVerdicts>(control, board, liveness_seconds, gpu_timeout_seconds,
                                        std::move(label), std::move(job_ranks));
  }

  /// Executes `responses` in order. `entries` maps names to this rank's entries; `finish`
  /// is called once for every entry a response names (then the caller drops it), once the
  /// set agreed on every batch's outcome (BatchVerdicts): a batch that failed on any member
  /// fails on every member with one verdict. A rank whose own part of a batch failed still
  /// makes every batch's calls; one whose call failed makes no more calls.
  /// `agreed`: when the round that produced the responses finished (timeline).
  /// Returns a non-ok Status when some member is out of step (its call failed): the same on
  /// every member, which all stop; or when the verdict could not be agreed (a member never
  /// came: verdict_reached() is false), this rank's view. Per-tensor errors go to the entries.
  Status execute(const std::vector<std::shared_ptr<const Response>>& responses, EntryTable& entries,
                 Clock::time_point agreed, const Finish& finish);
  /// Whether the last execute() ended with the set's verdict, whatever it said: false when a
  /// member never came to it (it exited or is stuck).
  bool verdict_reached() const { return verdict_reached_; }
  /// True if executing `responses` makes no MPI, NCCL or CUDA call: each one is on host
  /// memory and failed, or is an allreduce on a backend that reduces without MPI.
  bool runs_without_mpi(const std::vector<std::shared_ptr<const Response>>& responses) const;
  /// After a failure that stops the runtime (`why`): the set's GPU communicators are aborted
  /// and its stream drained, so that tearing the set down waits for no peer.
  void abandon_device(const Status& why);

 private:
  // One batch of the plan on `m`: a fused allreduce, or one response alone. Synchronized
  // before the entries finish, or, after a failure, ended (TensorMemory::fail).
  Status run_batch(TensorMemory& m, const std::vector<Job>& batch, Clock::time_point agreed,
                   const Finish& finish);
  Status run_fused_allreduce(TensorMemory& m, const std::vector<Job>& batch,
                             Clock::time_point agreed, const Finish& finish);
  Status run_single(TensorMemory& m, const Response& r, Entry* e, const Finish& finish);
  // CHORUS_TEST_FAIL_PART's failure for the collective `name`, or OK.
  Status injected_part(const std::string& name) const;
  // Completes the device's batches still in flight, in order (TensorMemory::deferred).
  Status settle_device();
  void trace(const std::string& name, TimelinePhase phase, Clock::time_point start,
             Clock::time_point end, std::string_view detail = {});
  // The set's GPU memory, made with its GPU context at the first CUDA batch, `batch`, once
  // its inputs are produced (executor_gpu.cc; a build without CUDA fails).
  StatusOr<TensorMemory*> device_memory(const std::vector<Job>& batch);

  HostMemory host_;
  std::size_t fusion_limit_;  // set_fusion_limit()
  Timeline* timeline_;
  // The set's responses run so far: the same sequence on every member, so that the k-th
  // collective's NEGOTIATE on each rank's timeline is recognised as one (chorus-trace).
  uint64_t responses_run_ = 0;
  std::vector<gpu::CopyItem> copy_in_;   // a fused batch's packing
  std::vector<gpu::CopyItem> copy_out_;  // and unpacking
  GpuContextSetup gpu_setup_;
  std::string injected_failure_;
  std::string injected_part_;
  std::unique_ptr<BatchVerdicts> verdicts_;
  // The round's handles, held until the verdict (execute): each entry with what its batch
  // gave it, and the batch's index.
  struct Pending {
    Entry* entry;
    Status status;
    std::size_t batch;
  };
  std::vector<Pending> pending_;
  std::deque<Finish> finishers_;  // one per batch of the round, alive until the verdict
  Status batch_local_;            // the batch run last: this rank's own failure
  std::vector<Status> mine_;      // the round's batches as this rank saw them (execute)
  bool verdict_reached_ = true;   // verdict_reached()
  std::unique_ptr<TensorMemory> device_;
};

}  // namespace chorus
