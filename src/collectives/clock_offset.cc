#include "collectives/clock_offset.h"

#include <chrono>
#include <limits>

#include "collectives/mpi_check.h"

namespace chorus {

int64_t steady_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StatusOr<ClockOffset> measure_clock_offset(MPI_Comm comm, const ClockReading& clock, int rounds) {
  constexpr int tag = kClockOffsetTag;
  int rank = 0, size = 0;
  CHORUS_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  CHORUS_MPI_CHECK(MPI_Comm_size(comm, &size));
  // What rank 0 sends each rank at the end: offset, uncertainty, and rank 0's origin.
  int64_t result[3] = {0, 0, 0};
  if (rank == 0) {
    const int64_t origin = clock();
    for (int peer = 1; peer < size; ++peer) {
      int64_t best_round_trip = std::numeric_limits<int64_t>::max();
      int64_t best_offset = 0;
      for (int i = 0; i < rounds; ++i) {
        const int64_t sent = clock();
        CHORUS_MPI_CHECK(MPI_Send(nullptr, 0, MPI_BYTE, peer, tag, comm));
        int64_t theirs = 0;
        CHORUS_MPI_CHECK(MPI_Recv(&theirs, 1, MPI_INT64_T, peer, tag, comm, MPI_STATUS_IGNORE));
        const int64_t received = clock();
        if (received - sent < best_round_trip) {
          best_round_trip = received - sent;
          best_offset = theirs - (sent + (received - sent) / 2);
        }
      }
      const int64_t answer[3] = {best_offset, (best_round_trip + 1) / 2, origin};
      CHORUS_MPI_CHECK(MPI_Send(answer, 3, MPI_INT64_T, peer, tag, comm));
    }
    result[2] = origin;
  } else {
    for (int i = 0; i < rounds; ++i) {
      CHORUS_MPI_CHECK(MPI_Recv(nullptr, 0, MPI_BYTE, 0, tag, comm, MPI_STATUS_IGNORE));
      const int64_t mine = clock();
      CHORUS_MPI_CHECK(MPI_Send(&mine, 1, MPI_INT64_T, 0, tag, comm));
    }
    CHORUS_MPI_CHECK(MPI_Recv(result, 3, MPI_INT64_T, 0, tag, comm, MPI_STATUS_IGNORE));
  }
  ClockOffset out;
  out.offset_ns = result[0];
  out.uncertainty_ns = result[1];
  out.origin_ns = result[2] + result[0];
  return out;
}

}  // namespace chorus
