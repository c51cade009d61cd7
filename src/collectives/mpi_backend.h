#pragma once
// The MPI backend for host memory.
//
// Reductions do not use MPI's reduction operations. MPI picks its algorithm, and with it
// the order in which ranks' values are combined, by message size, so the same element
// could get different bits fused and alone; and MPI has no 16-bit float types. Instead
// four algorithms evaluate one combination tree that depends on the set size alone
// (kernels/reduce_tree.h), so that an element's bits are the same on every rank, fused or
// alone, whichever algorithm ran:
//  - gather-all: every rank gathers every contribution and evaluates the tree;
//  - direct: a reduce-scatter by point-to-point messages, pipelined in chunks, where the
//    owner of each block evaluates the tree on it as chunks arrive, then every rank sends
//    its block to every other at once (O(P) messages, two rounds);
//  - recursive doubling and recursive halving then doubling (collectives/mpi_tree.h):
//    O(log P) rounds.
// Each call takes the one the cost model finds cheapest for its size and the set's
// (collectives/cost_model.h), unless CHORUS_HOST_ALGORITHM forces one.
//
// A set whose members all run on one host reduces through shared memory instead, where
// every member can map it (collectives/shm_backend.h, offered before this backend). The
// runtime's global set on a uniform layout of several hosts, several ranks each, runs
// its allreduces over two of these instead (collectives/hierarchical_allreduce.h): each
// host's ranks in rank order, then the tree over the hosts.

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/backend.h"
#include "collectives/cost_model.h"
#include "collectives/mpi_tree.h"
#include "collectives/mpi_wait.h"
#include "kernels/host_buffer.h"

namespace chorus {

class MpiBackend final : public Backend {
 public:
  /// Uses `comm` (owned by the caller, alive as long as this backend). `algorithm`: the
  /// reductions' algorithm, kAuto to choose per call. Every wait fails with ABORTED after
  /// `liveness_seconds` (CHORUS_LIVENESS_SECONDS; 0: never), naming the ranks that took no
  /// part (collectives/mpi_wait.h).
  MpiBackend(MPI_Comm comm, HostAlgorithm algorithm, double liveness_seconds);

  const char* name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool allreduce_without_mpi() const override { return size_ == 1; }

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
  // Chunk of the pipelined reduce-scatter.
  static constexpr int64_t kChunkBytes = 256 << 10;

  // Block q, reduced by rank q: counts[q] elements of `count`, the first count % size one
  // larger. In blocks_, valid until the next call.
  const std::vector<int64_t>& blocks(int64_t count);
  Status gather_all_reduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                           kernels::Scale scale);
  Status pipelined_reduce_scatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                                  DataType dtype, ReduceOp op, kernels::Scale scale);
  Status share_blocks(char* out, const std::vector<int64_t>& counts,
                      const std::vector<int64_t>& offsets, int64_t esz);
  char* scratch(std::size_t bytes);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  HostAlgorithm algorithm_;
  WaitBound bound_;
  LinkModel link_;
  std::unique_ptr<MpiTree> tree_;
  // Grows to the largest need and stays: steady-state steps allocate nothing.
  HostBuffer scratch_;
  std::vector<MPI_Request> requests_;
  std::vector<const void*> sources_;
  std::vector<int64_t> blocks_;
};

}  // namespace chorus
