#include "collectives/clock_offset.h"

#include <chrono>
#include <limits>

namespace chorus {

int64_t steady_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

// Sends `out` to `peer`, or receives into `in` from it, and waits.
Status move(Links& links, int peer, const int64_t* out, int64_t* in, int n) {
  const int64_t bytes = n * static_cast<int64_t>(sizeof(int64_t));
  const std::size_t first = links.posted();
  Status s = out != nullptr ? links.post_send(peer, kClockOffsetTag, out, bytes)
                            : links.post_recv(peer, kClockOffsetTag, in, bytes);
  if (s.ok()) s = links.wait(first, 1, bytes);
  links.clear();
  return s;
}

}  // namespace

StatusOr<ClockOffset> measure_clock_offset(Links& links, const ClockReading& clock, int rounds) {
  const int rank = links.rank();
  const int size = links.size();
  // What rank 0 sends each rank at the end: offset, uncertainty, and rank 0's origin.
  int64_t result[3] = {0, 0, 0};
  const int64_t ping = 0;
  if (rank == 0) {
    const int64_t origin = clock();
    for (int peer = 1; peer < size; ++peer) {
      int64_t best_round_trip = std::numeric_limits<int64_t>::max();
      int64_t best_offset = 0;
      for (int i = 0; i < rounds; ++i) {
        const int64_t sent = clock();
        if (Status s = move(links, peer, &ping, nullptr, 1); !s.ok()) return s;
        int64_t theirs = 0;
        if (Status s = move(links, peer, nullptr, &theirs, 1); !s.ok()) return s;
        const int64_t received = clock();
        if (received - sent < best_round_trip) {
          best_round_trip = received - sent;
          best_offset = theirs - (sent + (received - sent) / 2);
        }
      }
      const int64_t answer[3] = {best_offset, (best_round_trip + 1) / 2, origin};
      if (Status s = move(links, peer, answer, nullptr, 3); !s.ok()) return s;
    }
    result[2] = origin;
  } else {
    for (int i = 0; i < rounds; ++i) {
      int64_t pinged = 0;
      if (Status s = move(links, 0, nullptr, &pinged, 1); !s.ok()) return s;
      const int64_t mine = clock();
      if (Status s = move(links, 0, &mine, nullptr, 1); !s.ok()) return s;
    }
    if (Status s = move(links, 0, nullptr, result, 3); !s.ok()) return s;
  }
  ClockOffset out;
  out.offset_ns = result[0];
  out.uncertainty_ns = result[1];
  out.origin_ns = result[2] + result[0];
  return out;
}

}  // namespace chorus
