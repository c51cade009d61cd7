#include "handoff_floor.h"

#include <chrono>

#include "harness.h"

namespace chorus::bench {
namespace {

void poll(MPI_Request* request) {
  for (int done = 0; !done;) mpi_check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
}

}  // namespace

HandoffFloor::HandoffFloor() {
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  thread_ = std::thread(&HandoffFloor::serve, this);
}

HandoffFloor::~HandoffFloor() {
  stop_.store(true);
  static float wake = 0;  // never reduced: serve() sees stop_ first
  work_.store(&wake, std::memory_order_release);
  work_.notify_one();
  thread_.join();
  MPI_Comm_free(&comm_);
}

void HandoffFloor::allreduce(float* x) {
  done_.store(false, std::memory_order_relaxed);
  work_.store(x, std::memory_order_release);
  work_.notify_one();
  for (int i = 0; !done_.load(std::memory_order_acquire); ++i) {
    if (i >= 50) std::this_thread::yield();
  }
}

// Idle like Chorus's thread: watch for work for 50 us, yielding, then sleep until woken.
void HandoffFloor::serve() {
  using Clock = std::chrono::steady_clock;
  while (true) {
    float* x = work_.exchange(nullptr, std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    if (x == nullptr) {
      const Clock::time_point until = Clock::now() + std::chrono::microseconds(50);
      while (work_.load(std::memory_order_acquire) == nullptr && Clock::now() < until) {
        std::this_thread::yield();
      }
      work_.wait(nullptr, std::memory_order_acquire);
      continue;
    }
    uint64_t ready = 1;
    MPI_Request request;
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, &ready, 1, MPI_UINT64_T, MPI_BAND, comm_, &request),
              "MPI_Iallreduce(agreement)");
    poll(&request);
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, x, 1, MPI_FLOAT, MPI_SUM, comm_, &request),
              "MPI_Iallreduce(value)");
    poll(&request);
    done_.store(true, std::memory_order_release);
  }
}

}  // namespace chorus::bench
