#pragma once
// How this rank's steady clock stands against rank 0's, measured once at init so that every
// rank's timeline can be drawn on one time axis (timeline/timeline.h, chorus-trace merge).
//
// Rank 0 asks each other rank in turn for its clock, several times, and keeps the exchange
// that came back soonest: the answer was read between rank 0's send and its receipt, so
// taking the middle errs by at most half that round trip, whatever the network did. Clocks
// that drift apart (different hosts) stay within that bound only near the measurement:
// steady clocks of hosts under NTP drift by microseconds a second at most.

#include <cstdint>
#include <functional>

#include "chorus/status.h"
#include "collectives/links.h"
#include "collectives/world.h"

namespace chorus {

/// A clock reading in nanoseconds; the runtime passes the steady clock, tests a shifted one.
using ClockReading = std::function<int64_t()>;

/// Measures every member's offset to member 0 over `links` (collective: every member calls
/// it), `rounds` exchanges per member, as messages with tag kClockOffsetTag: no other message
/// of `links` may be in flight meanwhile. Fails where a message does (the links' bound).
StatusOr<ClockOffset> measure_clock_offset(Links& links, const ClockReading& clock, int rounds = 8);

/// The tag of the measurement's messages; distinct from every other tag of Chorus's
/// point-to-point messages (7300-7303), although those travel on other communicators.
inline constexpr int kClockOffsetTag = 7304;

/// The steady clock, as measure_clock_offset takes it.
int64_t steady_clock_ns();

}  // namespace chorus
