#pragma once
// chorus-trace merge: every rank's timeline in one trace, one process row per rank.
//
// The ranks' files are on one time axis already (their clocks were measured against rank
// 0's at init), so merging puts them together: the metadata first, then every event by
// time. It adds what no single rank knows: on each NEGOTIATE event (a tensor's wait from
// its submission to the agreement), "last_rank", the rank that submitted it last, which the
// others waited for (negotiations(), trace_events.h, says which spans are one collective).

#include <string>
#include <vector>

#include "base/json_value.h"
#include "chorus/status.h"

namespace chorus::trace {

/// Sorts `events` (metadata first, then by time) and marks each NEGOTIATE with last_rank.
void merge_events(std::vector<JsonValue>& events);

/// The events as a trace file's text: a JSON array, one event per line.
std::string trace_text(const std::vector<JsonValue>& events);

/// Reads the timelines of `inputs` and writes their merge to `output`.
Status merge(const std::vector<std::string>& inputs, const std::string& output);

}  // namespace chorus::trace
