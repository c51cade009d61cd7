#pragma once
// MPI for GPU memory, over the set's host MPI backend: for builds without NCCL and for
// ranks that share one GPU (NCCL refuses two ranks on a GPU; the NVIDIA MPS pattern).
//
// Reductions are always staged: device -> pinned host buffer -> the host backend's
// rank-ordered reduction -> device, because Chorus reduces on the CPU (mpi_backend.h) and
// so keeps the CPU path's bits. Data movement (allgather, broadcast, alltoall) hands the
// device pointers straight to MPI when `cuda_aware` (Open MPI built with CUDA), else is
// staged the same way.
//
// Every call is synchronous: it waits for the stream (its prior work and its own copies)
// on a blocking-sync event, so the background thread sleeps rather than spins, and it
// returns with the results in device memory.

#include <memory>

#include "collectives/backend.h"

namespace chorus {

class StagedGpuBackend final : public Backend {
 public:
  /// `host` and `stream` (cudaStream_t) belong to the caller and outlive this backend.
  static StatusOr<std::unique_ptr<StagedGpuBackend>> create(Backend& host, void* stream,
                                                            bool cuda_aware);
  ~StagedGpuBackend() override;

  const char* name() const override { return cuda_aware_ ? "mpi-cuda-aware" : "mpi-staged"; }
  bool supports(const Device& device) const override { return device.kind == Device::Kind::kCUDA; }
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
  StagedGpuBackend(Backend& host, void* stream, bool cuda_aware)
      : host_(host), stream_(stream), cuda_aware_(cuda_aware) {}
  // Two pinned buffers (in and out of an alltoall), grown to the largest need.
  StatusOr<char*> pinned(int which, std::size_t bytes);
  Status copy(void* dst, const void* src, std::size_t bytes, bool to_device);
  Status wait();

  Backend& host_;
  void* stream_;
  bool cuda_aware_;
  void* done_ = nullptr;  // cudaEvent_t with blocking sync
  char* pinned_[2] = {nullptr, nullptr};
  std::size_t pinned_bytes_[2] = {0, 0};
};

}  // namespace chorus
