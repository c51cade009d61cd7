#pragma once
// The seam between the runtime and the libraries that move data. Each backend says which
// collectives it serves (serves()); the provider registry (collectives/providers.h) makes a
// process set's backends for one memory and offers them, in its one order, to one
// BackendChoice (collectives/backend_choice.h), which gives every batch the first that
// serves it. Host memory: the hierarchical allreduce where the layout allows it, shared
// memory for a set on one host (collectives/shm/shm_backend.h), then the set's own group
// (MPI or Gloo); GPU memory, once the set runs a CUDA collective: the hierarchical allreduce,
// NCCL where the set's agreed path is NCCL, then the host's, staged through pinned memory
// (collectives/gpu_path.h).
//
// Each collective it does not override fails as not served: a backend implements what it
// serves and nothing else.
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
#include "collectives/cost_model.h"
#include "kernels/reduce_kernels.h"

namespace chorus {

/// The calls a Backend makes, each one a method below.
enum class Collective : uint8_t {
  kAllreduce,
  kReducescatter,
  kAllgather,
  kBroadcast,
  kAlltoall,
  kBarrier,
};
inline constexpr int kNumCollectives = 6;
const char* collective_name(Collective c);

/// The blocks an allreduce of `count` elements is reduced in, block q by rank q of `parts`:
/// count / parts elements each, the first count % parts one more. The MPI and shared-memory
/// providers split alike.
void even_blocks(int64_t count, int parts, std::vector<int64_t>* blocks);

class Backend {
 public:
  virtual ~Backend() = default;

  /// Its name in the log: "mpi", "nccl", "hierarchical", ...
  virtual const char* name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Whether it runs `c` on `dtype` (in the memory it was made for). A backend serves
  /// every collective unless it says otherwise; the ones it does not serve are never called
  /// (BackendChoice), and fail if they are.
  virtual bool serves(Collective c, DataType dtype) const {
    (void)c;
    (void)dtype;
    return true;
  }
  /// True if allreduce makes no MPI, NCCL or CUDA call (it reduces through shared memory),
  /// so that a thread other than the background thread may run it.
  virtual bool allreduce_without_mpi() const { return false; }
  /// Reductions from now on move data by `algorithm` (kAuto: chosen per call by the cost
  /// model), where the backend reduces by messages (collectives/host_reduce.h); the others
  /// have no such choice and ignore it. Every algorithm combines in the same order, so the
  /// choice never changes a result. Called between collectives, by the thread that runs them;
  /// every member of the set must make the same call before the same collective.
  virtual void set_host_algorithm(HostAlgorithm algorithm) { (void)algorithm; }

  /// recv = scale(send_0 op send_1 op ... op send_{n-1}), combined in rank order for every
  /// element (the same bits whatever the buffer's size or offset). send may equal recv.
  /// `op` is kSum, kMin, kMax or kProduct.
  virtual Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                           kernels::Scale scale);
  /// Reduces like allreduce, but rank r receives only block r: `counts[r]` elements
  /// starting at the sum of the earlier counts. recv may be this rank's block inside send
  /// (the in-place form that the allreduces built on it use).
  virtual Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                               DataType dtype, ReduceOp op, kernels::Scale scale);
  /// recv = concatenation of every rank's block; this rank's block (bytes[rank]) is `send`.
  /// send may point at this rank's place inside recv.
  virtual Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes);
  virtual Status broadcast(void* data, int64_t bytes, int root);
  /// Sends send_bytes[i] consecutive bytes to rank i and receives recv_bytes[i] from it.
  virtual Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                           const std::vector<int64_t>& recv_bytes);
  virtual Status barrier();

 protected:
  /// What a collective it does not serve returns.
  Status not_served(Collective c) const;
};

}  // namespace chorus
