#pragma once
// MPI for GPU memory, over the set's host MPI backend: for builds without NCCL and for
// ranks that share one GPU (NCCL refuses two ranks on a GPU; the NVIDIA MPS pattern).
//
// Every call is staged: device -> pinned host buffer -> the host backend -> device.
// Reductions because Chorus reduces on the CPU (host_reduce.h) and so keeps the CPU path's
// bits; data movement (allgather, broadcast, alltoall) because the host backend makes
// MPI's non-blocking collectives (MPI_Iallgatherv, MPI_Ibcast, MPI_Ialltoallv: its waits
// are bounded), which Open MPI does not accept device pointers for, even where it is built
// with CUDA (it documents point-to-point and the blocking collectives only).
//
// Every call is synchronous: it waits for the stream (its prior work and its own copies)
// through the `drain` hook (GpuContext::synchronize: sleeps between polls, polls NCCL's
// errors, bounded), and returns with the results in device memory.
//
// A failed device copy never skips the host collective: the call is still made (with
// whatever the staging buffer holds) so that the other members are not left waiting in
// it, and the copy's failure is returned afterwards.

#include <functional>
#include <memory>
#include <vector>

#include "collectives/backend.h"

namespace chorus {

class StagedGpuBackend final : public Backend {
 public:
  /// `host` and `stream` (cudaStream_t) belong to the caller and outlive this backend.
  /// `drain` waits until the stream's work is done (or fails trying).
  StagedGpuBackend(Backend& host, void* stream, std::function<Status()> drain)
      : host_(host), stream_(stream), drain_(std::move(drain)) {}
  ~StagedGpuBackend() override;

  const char* name() const override { return "staged mpi"; }
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }

  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   kernels::Scale scale) override;
  Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op, kernels::Scale scale) override;
  Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) override;
  Status broadcast(void* data, int64_t bytes, int root) override;
  Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes) override;
  Status barrier() override { return host_.barrier(); }

 private:
  // Two host buffers (in and out of an alltoall), grown to the largest need: pinned, or
  // pageable when pinning fails (slower, never a failure).
  char* pinned(int which, std::size_t bytes);
  // Copies between device and host on the stream, then drains it.
  Status to_host(void* dst, const void* src, std::size_t bytes);
  Status to_device(void* dst, const void* src, std::size_t bytes);

  Backend& host_;
  void* stream_;
  std::function<Status()> drain_;
  char* pinned_[2] = {nullptr, nullptr};
  std::size_t pinned_bytes_[2] = {0, 0};
  std::vector<char*> retired_;  // outgrown pinned buffers, freed with the backend
  std::vector<char> pageable_[2];
};

}  // namespace chorus
