#pragma once
// Everything one process set needs on this rank's GPU: the communication stream, the
// device backend (NCCL, or MPI staged / CUDA-aware, optionally hierarchical), the device
// fusion buffer, the batched copy kernels, and the wait for completion. Created by the
// executor at the set's first CUDA response, which is the same response on every member,
// so the collective setup (agreeing on the path, NCCL's id broadcast) lines up.
// No CUDA header: streams and events travel as void*.
//
// Thread contract: background thread only. One GPU per rank and set: the device of the
// first CUDA tensor; a tensor on another device fails with kInvalidArgument.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/backend.h"
#include "fusion/cuda_fusion.h"
#include "topology/rank_map.h"
#include "topology/topology_groups.h"

namespace chorus {

class NcclBackend;
class StagedGpuBackend;
class HierarchicalBackend;

struct GpuContextSetup {
  Backend* host = nullptr;  ///< the set's MPI backend (id broadcast, staged MPI)
  std::string label;        ///< "global", "set 3": names the set in messages
  bool global_set = false;
  std::size_t fusion_threshold = 0;        ///< bytes of the device fusion buffer
  bool hierarchical_requested = false;     ///< CHORUS_HIERARCHICAL_ALLREDUCE
  const TopologyGroups* groups = nullptr;  ///< local and cross groups, when built
  const RankMap* map = nullptr;
  std::string requested_path;  ///< "", "auto", "nccl" or "mpi"
};

/// Whether the MPI library can take device pointers (Open MPI's MPIX_Query_cuda_support).
bool mpi_is_cuda_aware();

class GpuContext {
 public:
  /// Collective over the set (see above). Logs the chosen path at debug level.
  static StatusOr<std::unique_ptr<GpuContext>> create(const GpuContextSetup& setup, int device);
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
  /// The device fusion buffer (fusion_threshold bytes, allocated once).
  StatusOr<char*> fusion_buffer(std::size_t bytes);
  /// `bytes` zeros in device memory (a joined rank's contribution), written on the stream.
  StatusOr<char*> zeros(std::size_t bytes);
  /// Scratch device memory, grown to the largest need.
  StatusOr<char*> staging(std::size_t bytes);
  /// Waits until the stream's work is done, sleeping between polls (no spinning) and
  /// polling NCCL's asynchronous errors, which become the returned Status.
  Status synchronize(const std::string& during);

 private:
  GpuContext() = default;
  Status choose_backend(const GpuContextSetup& setup);
  StatusOr<char*> grow(void** slot, std::size_t* have, std::size_t bytes);

  int device_ = 0;
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
