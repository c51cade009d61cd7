#pragma once
// The seam between the runtime and the libraries that move data. Each process set has one
// Backend for host memory (MPI, with shared-memory reductions on one host) and, once it runs
// a CUDA collective, one for GPU memory that its GpuContext chooses (NCCL, staged MPI or
// CUDA-aware MPI; collectives/gpu_path.h), possibly wrapped in the hierarchical allreduce.
//
// Contract: called only from the thread that runs the runtime's cycles (the background
// thread, or a trainer thread waiting on a handle for a backend whose allreduce makes no
// MPI call: core/cycle.h), one at a time; every member of the set calls the same methods
// in the same order (the negotiated order). Sizes are per rank, in elements
// for reductions and in bytes for data movement.

#include <cstdint>
#include <vector>

#include "chorus/status.h"
#include "chorus/types.h"
#include "kernels/reduce_kernels.h"

namespace chorus {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// True if allreduce makes no MPI, NCCL or CUDA call (it reduces through shared memory),
  /// so that a thread other than the background thread may run it.
  virtual bool allreduce_without_mpi() const { return false; }

  /// recv = scale(send_0 op send_1 op ... op send_{n-1}), combined in rank order for every
  /// element (the same bits whatever the buffer's size or offset). send may equal recv.
  /// `op` is kSum, kMin, kMax or kProduct.
  virtual Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                           kernels::Scale scale) = 0;
  /// Reduces like allreduce, but rank r receives only block r: `counts[r]` elements
  /// starting at the sum of the earlier counts. recv may be this rank's block inside send
  /// (the in-place form that the allreduces built on it use).
  virtual Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                               DataType dtype, ReduceOp op, kernels::Scale scale) = 0;
  /// recv = concatenation of every rank's block; this rank's block (bytes[rank]) is `send`.
  /// send may point at this rank's place inside recv.
  virtual Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) = 0;
  virtual Status broadcast(void* data, int64_t bytes, int root) = 0;
  /// Sends send_bytes[i] consecutive bytes to rank i and receives recv_bytes[i] from it.
  virtual Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                           const std::vector<int64_t>& recv_bytes) = 0;
  virtual Status barrier() = 0;
};

}  // namespace chorus
