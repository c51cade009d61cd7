#pragma once
// chorus-trace stall: why collectives were stuck, from a directory of flight records
// (core/flight_recorder.h, one chorus-flight.rank<R>.json per rank), classified as the
// runtime's stall inspector classifies them live (protocol/stall_classes.h).
//
// For each process set in the records: a tensor that some members have outstanding and
// others do not is stuck; each member's outstanding names and its time since it last
// submitted anything (at the moment it wrote its record) complete the view. A member that
// wrote no record has nothing outstanding as far as the records tell.

#include <string>
#include <vector>

#include "chorus/status.h"

namespace chorus::trace {

struct StallReport {
  std::vector<int> ranks_with_records;
  std::vector<int> ranks_without_records;  ///< members of a set that wrote none
  std::vector<std::string> lines;          ///< one per class found, per set
  int exit_status = 0;  ///< of the first class found (as CHORUS_STALL_SHUTDOWN_SECONDS); 0: none
};

/// Reads every chorus-flight.rank*.json in `dir`; fails when there is none or one is not a
/// flight record.
StatusOr<StallReport> stall_report(const std::string& dir);

/// The report for a reader.
std::string stall_text(const StallReport& report);

}  // namespace chorus::trace
