#include "collectives/mpi_wait.h"

#include <chrono>

#include "collectives/backoff.h"
#include "collectives/mpi_check.h"

namespace chorus {

Status wait_all(int n, MPI_Request* requests, int64_t bytes) {
  // The clock is read every kClockEvery tests: a read costs about as much as a test.
  constexpr int kClockEvery = 16;
  const auto spin_until = poll_deadline(bytes);
  bool spinning = true;
  Backoff backoff(std::chrono::microseconds(50), /*eager=*/false);
  for (int done = 0, tests = 1;; tests += spinning ? 1 : 0) {
    CHORUS_MPI_CHECK(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return {};
    if (spinning && tests % kClockEvery == 0) {
      spinning = std::chrono::steady_clock::now() < spin_until;
    }
    if (!spinning) backoff.pause();
  }
}

}  // namespace chorus
