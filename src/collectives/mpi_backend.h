#pragma once
// The MPI backend for host memory.
//
// Reductions do not use MPI's reduction operations. MPI picks its algorithm, and with it
// the order in which ranks' values are combined, by message size, so the same element
// could get different bits fused and alone; and MPI has no 16-bit float types. Instead:
//  - small messages: every rank gathers every contribution and combines them in rank order;
//  - large messages: a reduce-scatter by point-to-point messages, pipelined in chunks,
//    where the owner of each block combines the ranks' values in rank order as chunks
//    arrive (reduce_kernels), then every rank sends its block to every other at once.
// Both give every element the value ((x0 op x1) op x2) ..., identical on every rank and
// independent of fusion. A set whose members all run on one host reduces through shared
// memory instead (collectives/shm_reducer.h), with the same blocks and the same bits.

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/backend.h"
#include "collectives/shm_reducer.h"
#include "kernels/host_buffer.h"

namespace chorus {

class ControlTransport;

class MpiBackend final : public Backend {
 public:
  /// Uses `comm` (owned by the caller, alive as long as this backend).
  explicit MpiBackend(MPI_Comm comm);

  /// Reduces through shared memory from now on, if every member could map it; otherwise
  /// (`why` says why) stays on MPI. Every member must run on this host. Collective over
  /// `control`, a transport over the same ranks in the same order.
  Status join_host(ControlTransport& control, std::string* why);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool allreduce_without_mpi() const override { return size_ == 1 || shm_ != nullptr; }

  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   kernels::Scale scale) override;
  Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op, kernels::Scale scale) override;
  Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) override;
  Status broadcast(void* data, int64_t bytes, int root) override;
  Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes) override;
  Status barrier() override;

 private:
  // Below this many bytes gathered per rank, reductions gather everything in one call.
  static constexpr int64_t kGatherAllBytes = 64 << 10;
  // Chunk of the pipelined reduce-scatter.
  static constexpr int64_t kChunkBytes = 256 << 10;

  // Block q, reduced by rank q: counts[q] elements of `count`, the first count % size one
  // larger. In blocks_, valid until the next call.
  const std::vector<int64_t>& blocks(int64_t count);
  Status gather_all_reduce(const void* send, void* recv, int64_t offset, int64_t count,
                           int64_t total, DataType dtype, ReduceOp op, kernels::Scale scale);
  Status pipelined_reduce_scatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                                  DataType dtype, ReduceOp op, kernels::Scale scale);
  Status share_blocks(char* out, const std::vector<int64_t>& counts,
                      const std::vector<int64_t>& offsets, int64_t esz);
  char* scratch(std::size_t bytes);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  // Grows to the largest need and stays: steady-state steps allocate nothing.
  HostBuffer scratch_;
  std::vector<MPI_Request> requests_;
  std::vector<const void*> sources_;
  std::vector<int64_t> blocks_;
  std::unique_ptr<ShmReducer> shm_;  // set by join_host
};

}  // namespace chorus
