#pragma once
// Everything one process set needs on this rank's GPU: the communication stream, the
// device backends and their choice (the hierarchical allreduce, NCCL, the host's staged
// through pinned memory, as the provider registry assembles them: collectives/providers.h),
// the device fusion buffer, the batched copy
// kernels, and the wait for completion. Created by the
// executor at the set's first CUDA response, which is the same response on every member,
// so the collective setup (agreeing on the path, NCCL's id broadcast) lines up.
// No CUDA header: streams and events travel as void*.
//
// Thread contract: background thread only. One GPU per rank (RankDevice), for every set.
//
// Failures: create() either succeeds on every member or fails on every member (each rank's
// own steps are agreed on with one allgather before any collective setup, and each of the
// hierarchy's NCCL communicators, made inside one node or across nodes only, has its
// outcome agreed over the whole set before the next step). No wait is
// unbounded: NCCL's communicator creation and synchronize() end after `timeout`, aborting
// the NCCL communicators, which ends their kernels. After any failure the stream is drained
// before the failure is returned, so that the caller may complete the batch's handles: the
// trainer may free or reuse their tensors at once (fail()).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/backend.h"
#include "collectives/backend_choice.h"
#include "collectives/gpu_path.h"
#include "collectives/providers.h"
#include "collectives/topology_groups.h"
#include "kernels/cuda_fusion.h"
#include "topology/rank_map.h"

namespace chorus {

class NcclBackend;

/// The one GPU a rank's collectives use, in every process set: the device of the first
/// CUDA tensor it submits, fixed from then on (the API pins it at enqueue and refuses
/// tensors on any other device). A rank that runs a GPU collective before submitting one
/// (it joined) pins local_rank modulo the visible devices. Thread-safe.
class RankDevice {
 public:
  /// Pins `device` unless one is pinned already; returns the pinned device.
  int pin(int device) {
    int expected = -1;
    return device_.compare_exchange_strong(expected, device) ? device : expected;
  }

 private:
  std::atomic<int> device_{-1};
};

struct GpuContextSetup {
  /// The set's host backends, each call to the one the host memory's choice picks
  /// (core/host_memory.h): NCCL's id broadcast, and the staged MPI path, whose allreduce
  /// then combines as the host's does.
  Backend* host = nullptr;
  std::string label;  ///< "global", "set 3": names the set in messages
  bool global_set = false;
  std::size_t fusion_threshold = 0;  ///< bytes of the device fusion buffer
  /// CHORUS_HIERARCHICAL_ALLREDUCE: unset or false flat, true on (gpu_hierarchy).
  std::optional<bool> hierarchical_requested;
  /// Local and cross groups (global set only; built when hierarchical_groups_needed), and
  /// the rank map they came from. Owned by the runtime.
  const TopologyGroups* groups = nullptr;
  const RankMap* map = nullptr;
  /// CHORUS_GPU_BACKEND. create() checks that every member asked for the same, and fails
  /// on every member when they differ or when NCCL is asked for and cannot run.
  GpuBackendRequest requested_backend = GpuBackendRequest::kAuto;
  RankDevice* device = nullptr;  ///< the rank's GPU; owned by the runtime
  int local_rank = 0;            ///< for RankDevice's fallback
  /// CHORUS_GPU_TIMEOUT_SECONDS: how long NCCL's communicator creation, and synchronize()'s
  /// wait for the stream, may take before the set's NCCL communicators are aborted.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  /// CHORUS_TEST_SHARED_GPU (GpuPathInputs::shared_gpu_nccl); the same on every rank.
  bool shared_gpu_nccl = false;
  /// The set's ranks in the world, for messages ("ranks [0, 1, 2]").
  std::vector<int> ranks;
};

class GpuContext final : private GpuMaker {
 public:
  /// Collective over the set (see above): fails on every member when it fails on one.
  /// Logs the chosen path at debug level. `inputs`: the ready events (cudaEvent_t) of the
  /// batch that asks for the context. Making a NCCL communicator can wait for this rank's
  /// whole device, and aborting one that is being made waits for that too, so the events
  /// must pass first, within the timeout: a producer that is stuck fails the batch on
  /// every member instead of holding them all.
  static StatusOr<std::unique_ptr<GpuContext>> create(const GpuContextSetup& setup, int device,
                                                      const std::vector<void*>& inputs);
  /// Waits for the stream only while it is healthy; after a failure or with work still
  /// stuck on it, aborts the NCCL communicators instead of waiting for or destroying them.
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device() const { return device_; }
  /// The backend that runs `c` on `dtype` for this set's device tensors: the hierarchical
  /// allreduce where it is on, else the path chosen (BackendChoice). Its calls enqueue on
  /// the stream (NCCL) or complete before returning (MPI); synchronize() covers both.
  Backend& backend(Collective c, DataType dtype) { return choice_->pick(c, dtype); }
  /// "nccl", "mpi (staged ...)", with " + hierarchical allreduce" when on.
  const std::string& description() const { return description_; }

  /// Orders the stream after `event` (a cudaEvent_t; null: nothing to wait for), and notes it
  /// as one of the batch's producers (await_producers). No host wait. `event` must live until
  /// end_batch().
  Status wait_ready(void* event);
  /// Orders the stream after the work queued so far on `stream` (a cudaStream_t; null: the
  /// legacy default stream), where a buffer Chorus is about to write was allocated: a caching
  /// allocator may hand out a block whose previous owner's kernels are still queued there.
  /// `event`, when given, is waited instead. A producer of the batch too. No host wait.
  Status wait_allocated(void* stream, void* event);
  /// Waits on the host, asleep, until the batch's producers (above) have finished, at most
  /// the timeout. The NCCL backend calls it before it enqueues a kernel: a NCCL kernel queued
  /// behind a producer that never finishes could not be aborted (NCCL's abort waits for the
  /// work queued before it), so no kernel is enqueued before its inputs exist.
  Status await_producers();
  /// The batch's steps have all been enqueued: forgets its producers.
  void end_batch();
  /// One batched kernel on the stream (see cuda_fusion.h).
  Status copy(const std::vector<gpu::CopyItem>& items, DataType dtype, kernels::Scale scale);
  /// Zeros `bytes` bytes at `dst` (device) on the stream.
  Status zero(void* dst, std::size_t bytes);
  /// The device fusion buffer: fusion_threshold bytes, allocated by create() so that a
  /// fused batch never fails on one rank for want of memory.
  char* fusion_buffer() { return static_cast<char*>(fusion_); }
  std::size_t fusion_capacity() const { return fusion_capacity_; }
  /// `bytes` zeros in device memory (a joined rank's contribution), written on the stream.
  StatusOr<char*> zeros(std::size_t bytes);
  /// Scratch device memory, grown to the largest need.
  StatusOr<char*> staging(std::size_t bytes);
  /// Copies `bytes` bytes from `src` to `dst`, either of them host memory, on the stream
  /// after the work queued so far, and waits for it (synchronize()).
  Status copy_and_wait(void* dst, const void* src, std::size_t bytes, const std::string& during);
  /// Waits until the stream's work is done, sleeping between polls (no spinning) and
  /// polling NCCL's asynchronous errors, which become the returned Status. Past the
  /// setup's timeout it aborts the NCCL communicators and fails. A failure here leaves the
  /// set unusable (the runtime stops); the stream was drained first (fail()).
  Status synchronize(const std::string& during);
  /// Records `event` (a cudaEvent_t of this device) after the work queued so far.
  Status record(void* event);
  /// synchronize()'s wait, for the work before `event` (recorded by record()) only: the
  /// work queued after it goes on running.
  Status wait(void* event, const std::string& during);
  /// After `failure` (a backend call that failed, or memory this rank could not have),
  /// before the batch's handles complete: aborts the NCCL communicators, whose peers are out
  /// of step, then waits (bounded) until the rest of the stream's work, which reads and
  /// writes the batch's buffers, has finished. Returns `failure`, with a note when the stream
  /// could not be drained. Leaves the set unusable; once failed, returns `failure` at once.
  Status fail(Status failure);

 private:
  GpuContext() = default;
  Status prepare(const GpuContextSetup& setup);
  Status choose_backend(const GpuContextSetup& setup, const Status& prepared);
  // GpuMaker: the backends the registry's GPU providers make (collectives/providers.h).
  std::unique_ptr<Backend> staged(Backend& host) override;
  StatusOr<std::unique_ptr<Backend>> nccl(Backend& host, const std::string& label) override;
  void keep(std::unique_ptr<Backend> made) override { left_.push_back(std::move(made)); }
  void abort_nccl();
  // Waits (bounded) for the stream's queued work; false if it did not finish.
  bool drain();
  // "set 3 (ranks [0, 2])"
  std::string set_name() const;
  StatusOr<char*> grow(void** slot, std::size_t* have, std::size_t bytes);

  int device_ = 0;
  std::chrono::milliseconds timeout_{0};
  std::string label_;
  std::vector<int> ranks_;
  bool failed_ = false;           // a wait or the set-up failed: the device may hold stuck work
  void* stream_ = nullptr;        // cudaStream_t, non-blocking
  void* done_ = nullptr;          // cudaEvent_t
  std::vector<void*> producers_;  // cudaEvent_t: the batch's inputs' and outputs' (borrowed)
  std::vector<void*> marks_;      // cudaEvent_t recorded on outputs' allocation streams
  std::size_t marks_used_ = 0;    // of marks_, in the current batch
  std::unique_ptr<gpu::BatchedCopy> copy_;
  std::vector<NcclBackend*> nccl_;  // every NCCL communicator in use, for error polling
  // The set's GPU backends (they own their NCCL communicators), as the registry assembled;
  // and what an assembly that failed had made (keep()), left undestroyed with the rest.
  std::optional<BackendChoice> choice_;
  std::vector<std::unique_ptr<Backend>> left_;
  std::string description_;
  std::size_t fusion_capacity_ = 0;
  void* fusion_ = nullptr;
  void* zeros_ = nullptr;
  std::size_t zeros_bytes_ = 0;
  void* staging_ = nullptr;
  std::size_t staging_bytes_ = 0;
};

}  // namespace chorus
