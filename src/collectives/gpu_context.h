#pragma once
// Everything one process set needs on this rank's GPU: the communication stream, the
// device backend (NCCL, or MPI staged / CUDA-aware, optionally hierarchical), the device
// fusion buffer, the batched copy kernels, and the wait for completion. Created by the
// executor at the set's first CUDA response, which is the same response on every member,
// so the collective setup (agreeing on the path, NCCL's id broadcast) lines up.
// No CUDA header: streams and events travel as void*.
//
// Thread contract: background thread only. One GPU per rank (RankDevice), for every set.
//
// Failures: create() either succeeds on every member or fails on every member (each rank's
// own steps are agreed on with one allgather before any collective setup). synchronize()
// never waits forever: past `sync_timeout` it aborts the NCCL communicators, which ends
// their kernels, and returns the failure.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/backend.h"
#include "collectives/gpu_path.h"
#include "collectives/topology_groups.h"
#include "kernels/cuda_fusion.h"
#include "topology/rank_map.h"

namespace chorus {

class NcclBackend;
class StagedGpuBackend;
class HierarchicalBackend;

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
  Backend* host = nullptr;  ///< the set's MPI backend (id broadcast, staged MPI)
  std::string label;        ///< "global", "set 3": names the set in messages
  bool global_set = false;
  std::size_t fusion_threshold = 0;  ///< bytes of the device fusion buffer
  /// CHORUS_HIERARCHICAL_ALLREDUCE: unset automatic, true on, false off
  /// (use_hierarchical_allreduce).
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
  /// How long synchronize() waits for the stream before aborting the set's NCCL
  /// communicators and failing.
  std::chrono::milliseconds sync_timeout{std::chrono::minutes(5)};
};

/// Whether the MPI library can take device pointers (Open MPI's MPIX_Query_cuda_support).
bool mpi_is_cuda_aware();

class GpuContext {
 public:
  /// Collective over the set (see above): fails on every member when it fails on one.
  /// Logs the chosen path at debug level.
  static StatusOr<std::unique_ptr<GpuContext>> create(const GpuContextSetup& setup, int device);
  /// Waits for the stream only while it is healthy; after a failure or with work still
  /// stuck on it, aborts the NCCL communicators instead of waiting for or destroying them.
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device() const { return device_; }
  /// The backend for this set's device tensors. Its calls enqueue on the stream (NCCL) or
  /// complete before returning (MPI); synchronize() covers both.
  Backend& backend() { return *backend_; }
  /// "nccl", "mpi (staged ...)", with " + hierarchical allreduce" when on.
  const std::string& description() const { return description_; }

  /// Orders the stream after `event` (a cudaEvent_t; null: nothing to wait for). No host wait.
  Status wait_ready(void* event);
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
  /// Waits until the stream's work is done, sleeping between polls (no spinning) and
  /// polling NCCL's asynchronous errors, which become the returned Status. Past the
  /// setup's sync_timeout it aborts the NCCL communicators and fails. A failure here
  /// leaves the set unusable (the runtime stops).
  Status synchronize(const std::string& during);

 private:
  GpuContext() = default;
  Status prepare(const GpuContextSetup& setup);
  Status choose_backend(const GpuContextSetup& setup, const Status& prepared);
  void abort_nccl();
  StatusOr<char*> grow(void** slot, std::size_t* have, std::size_t bytes);

  int device_ = 0;
  std::chrono::milliseconds sync_timeout_{0};
  bool failed_ = false;     // a synchronize() failed: the stream may hold stuck work
  void* stream_ = nullptr;  // cudaStream_t, non-blocking
  void* done_ = nullptr;    // cudaEvent_t
  std::unique_ptr<gpu::BatchedCopy> copy_;
  std::vector<NcclBackend*> nccl_;  // every NCCL communicator in use, for error polling
  std::unique_ptr<Backend> flat_;
  std::unique_ptr<Backend> local_;
  std::unique_ptr<Backend> cross_;
  std::unique_ptr<Backend> hierarchical_;
  Backend* backend_ = nullptr;
  std::string description_;
  std::size_t fusion_capacity_ = 0;
  void* fusion_ = nullptr;
  void* zeros_ = nullptr;
  std::size_t zeros_bytes_ = 0;
  void* staging_ = nullptr;
  std::size_t staging_bytes_ = 0;
};

}  // namespace chorus
