#pragma once
// Runs one process set's agreed responses on this rank: fuses what the planner groups,
// packs, calls the backend, unpacks, and finishes the entries. Called by the thread that
// runs the runtime's cycles: the background thread, or a waiting trainer thread for
// responses that runs_without_mpi() accepts (core/runtime.h).
// Every member of the set runs the same responses in the same order, so the backend calls
// line up across ranks; a rank without an entry for an allreduce (it joined) contributes
// zeros.

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "collectives/backend.h"
#include "collectives/gpu_context.h"
#include "core/entry.h"
#include "core/entry_table.h"
#include "fusion/buffer_manager.h"
#include "kernels/host_buffer.h"
#include "timeline/timeline.h"

namespace chorus {

class Executor {
 public:
  using Finish = std::function<void(Entry&, const Status&)>;
  using Clock = std::chrono::steady_clock;
  /// One agreed response and this rank's entry for it (null: this rank has none; it joined
  /// and contributes zeros), looked up once per round.
  struct Job {
    const Response* response;
    Entry* entry;
  };

  /// `fusion_threshold`: bytes per fusion buffer (0: no fusion). `timeline` may be null.
  Executor(Backend* backend, std::size_t fusion_threshold, Timeline* timeline);
  ~Executor();

  /// What the set's GPU context is built from at its first CUDA response (label, the
  /// rank's device, topology for the hierarchical allreduce, path override). The runtime
  /// calls it when it makes the set; without it: the set's own backend, flat, on
  /// cuda:0. Call before the first execute().
  void set_gpu_setup(const GpuContextSetup& setup);
  /// Where the phases of later responses are recorded (null: nowhere). Between execute()
  /// calls: start_timeline/stop_timeline switch it there.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }

  /// Executes `responses` in order. `entries` maps names to this rank's entries; `finish`
  /// is called once for every entry a response names (then the caller drops it).
  /// `agreed`: when the round that produced the responses finished (timeline).
  /// Returns a non-ok Status only for a failure that leaves the ranks out of step (a
  /// backend error); per-tensor errors go to the entries.
  Status execute(const std::vector<std::shared_ptr<const Response>>& responses, EntryTable& entries,
                 Clock::time_point agreed, const Finish& finish);
  /// True if executing `responses` makes no MPI, NCCL or CUDA call: each one is on host
  /// memory and failed, or is an allreduce on a backend that reduces without MPI.
  bool runs_without_mpi(const std::vector<std::shared_ptr<const Response>>& responses) const;

 private:
  Status run_allreduce_batch(const std::vector<Job>& batch, Clock::time_point agreed,
                             const Finish& finish);
  Status run_single(const Response& r, Entry* e, const Finish& finish);
  // The host members of one grouped allgather or reducescatter, fused (executor_grouped.cc).
  Status run_grouped_allgather(const std::vector<Job>& batch, const Finish& finish);
  Status run_grouped_reducescatter(const std::vector<Job>& batch, const Finish& finish);
  StatusOr<TensorRef> output_for(Entry& e, const std::vector<int64_t>& shape);
  char* zeros(std::size_t bytes);
  void trace(const std::string& name, TimelinePhase phase, Clock::time_point start,
             Clock::time_point end);
  // CUDA responses (executor_gpu.cc): one batch of the plan, fused or alone, on the set's
  // GPU context, synchronized before the entries finish.
  Status run_gpu_batch(const std::vector<Job>& batch, Clock::time_point agreed,
                       const Finish& finish);
  Status run_gpu_fused(GpuContext& g, const std::vector<Job>& batch, Clock::time_point agreed,
                       const Finish& finish);
  Status run_gpu_single(GpuContext& g, const Response& r, Entry* e, const Finish& finish);
  StatusOr<GpuContext*> gpu_for();

  Backend* backend_;
  FusionBuffer fusion_;
  Timeline* timeline_;
  HostBuffer zeros_;    // a joined rank's contribution
  HostBuffer staging_;  // prescaled input of a reducescatter; fused grouped members
  GpuContextSetup gpu_setup_;
  // Created at the first CUDA response. A shared_ptr because its deleter is bound where the
  // context is made (CUDA builds only): a build without CUDA never needs ~GpuContext.
  std::shared_ptr<GpuContext> gpu_;
};

}  // namespace chorus
