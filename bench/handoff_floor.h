#pragma once
// The least a background-thread runtime can cost for one small allreduce, measured without
// Chorus: the caller hands the value to a second thread and waits for it; that thread runs
// the two exchanges every such runtime needs (an agreement round, as Chorus's cache-hit
// bit vector, then the reduction itself) as non-blocking MPI allreduces polled to
// completion, and hands the result back. The caller spins, then yields, and never sleeps
// (Chorus's waiter sleeps after 200 tries); the serving thread idles as Chorus's does. So
// the row it adds to the latency table is a floor: how much of Chorus's latency is its
// design on this machine, and how much is Chorus itself.
//
// Collective: every rank constructs one (its own duplicate of MPI_COMM_WORLD) and calls
// allreduce() in the same order. Requires MPI_THREAD_MULTIPLE.

#include <mpi.h>

#include <atomic>
#include <thread>

namespace chorus::bench {

class HandoffFloor {
 public:
  HandoffFloor();
  ~HandoffFloor();
  HandoffFloor(const HandoffFloor&) = delete;
  HandoffFloor& operator=(const HandoffFloor&) = delete;

  /// Sums `*x` over the ranks through the second thread.
  void allreduce(float* x);

 private:
  void serve();

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::atomic<float*> work_{nullptr};
  std::atomic<bool> done_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace chorus::bench
