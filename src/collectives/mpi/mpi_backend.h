#pragma once
// The MPI backend for host memory: the set's own communicator. Its reductions are the
// host algorithms by messages (collectives/host_reduce.h) over MPI's point-to-point calls
// (collectives/mpi/mpi_links.h), which fix each element's combination order by the set's size
// alone; data movement uses MPI's non-blocking collectives. Every wait is bounded
// (collectives/mpi/mpi_wait.h).
//
// A set whose members all run on one host reduces through shared memory instead, where
// every member can map it (collectives/shm/shm_backend.h, offered before this backend). The
// runtime's global set on a uniform layout of several hosts, several ranks each, runs
// its allreduces over two of these instead (collectives/hierarchical_allreduce.h): each
// host's ranks in rank order, then the tree over the hosts.

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/backend.h"
#include "collectives/cost_model.h"
#include "collectives/host_reduce.h"
#include "collectives/mpi/mpi_links.h"
#include "collectives/mpi/mpi_wait.h"

namespace chorus {

class MpiBackend final : public Backend {
 public:
  /// Uses `comm` (owned by the caller, alive as long as this backend). `algorithm`: the
  /// reductions' algorithm, kAuto to choose per call. Every wait fails with ABORTED after
  /// `liveness_seconds` (CHORUS_LIVENESS_SECONDS; 0: never), naming the ranks that took no
  /// part (collectives/mpi/mpi_wait.h).
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
  void set_host_algorithm(HostAlgorithm algorithm) override { reduce_.set_algorithm(algorithm); }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  WaitBound bound_;
  MpiLinks links_;
  HostReduce reduce_;
};

}  // namespace chorus
