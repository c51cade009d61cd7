#pragma once
// The host-memory backend of a group over Gloo: its reductions are the host algorithms by
// messages over GlooLinks (collectives/host_reduce.h), so they give the bits the MPI backend
// gives for the same set size; data movement (allgather, broadcast, alltoall, barrier) is
// Gloo's own collectives, whose order of moving bytes changes no result. Every call is
// bounded by the liveness bound; a failure names the members as ranks of the job.
// Called from the thread that runs the cycles only, like every Backend.

#include <memory>
#include <vector>

#include "collectives/backend.h"
#include "collectives/cost_model.h"
#include "collectives/gloo/gloo_links.h"
#include "collectives/host_reduce.h"

namespace chorus {

class GlooBackend final : public Backend {
 public:
  /// Over `context` (connected); as GlooLinks for the bound and the job's ranks.
  GlooBackend(std::shared_ptr<gloo::Context> context, HostAlgorithm algorithm,
              double liveness_seconds, std::vector<int> job_ranks = {});

  const char* name() const override { return "gloo"; }
  int rank() const override { return links_.rank(); }
  int size() const override { return links_.size(); }

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
  GlooLinks links_;
  HostReduce reduce_;
};

}  // namespace chorus
