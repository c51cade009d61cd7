#pragma once
// How this rank's steady clock stands against rank 0's, measured once at init so that every
// rank's timeline can be drawn on one time axis (timeline/timeline.h, chorus-trace merge).
//
// Rank 0 asks each other rank in turn for its clock, several times, and keeps the exchange
// that came back soonest: the answer was read between rank 0's send and its receipt, so
// taking the middle errs by at most half that round trip, whatever the network did. Clocks
// that drift apart (different hosts) stay within that bound only near the measurement:
// steady clocks of hosts under NTP drift by microseconds a second at most.

#include <mpi.h>

#include <cstdint>
#include <functional>

#include "chorus/status.h"
#include "collectives/world.h"

namespace chorus {

/// A clock reading in nanoseconds; the runtime passes the steady clock, tests a shifted one.
using ClockReading = std::function<int64_t()>;

/// Measures every rank's offset to rank 0 over `comm` (collective: every rank calls it),
/// `rounds` exchanges per rank, as point-to-point messages with tag kClockOffsetTag: no other
/// message on `comm` may be in flight meanwhile. Fails with the MPI error of a failed call.
StatusOr<ClockOffset> measure_clock_offset(MPI_Comm comm, const ClockReading& clock,
                                           int rounds = 8);

/// The tag of the measurement's messages; distinct from every other tag of Chorus's
/// point-to-point messages (7300-7303), although those travel on other communicators.
inline constexpr int kClockOffsetTag = 7304;

/// The steady clock, as measure_clock_offset takes it.
int64_t steady_clock_ns();

}  // namespace chorus
