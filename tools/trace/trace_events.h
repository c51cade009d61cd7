#pragma once
// What chorus-trace reads: Chorus timelines (timeline/timeline.h), one per rank or merged,
// as their JSON events and as the complete events the analyses use.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_value.h"
#include "chorus/status.h"

namespace chorus::trace {

/// The whole text of `path`; fails naming the path and the OS error.
StatusOr<std::string> read_text(const std::string& path);
/// Writes `text` to `path` whole: a temporary file renamed over it.
Status write_text(const std::string& path, const std::string& text);

/// The events of timeline files, in file order; fails naming a file that is not a JSON array
/// of objects, or a rank (pid) that two files hold.
StatusOr<std::vector<JsonValue>> load_events(const std::vector<std::string>& paths);

/// A complete event ("ph":"X") of one rank's timeline.
struct Span {
  int rank = 0;
  std::string row;    ///< the tensor's name; empty on the trainer row (tid 0)
  std::string phase;  ///< NEGOTIATE, QUEUE, MEMCPY_IN, COLLECTIVE, MEMCPY_OUT, STEP, WAIT
  int64_t begin_us = 0;
  int64_t end_us = 0;
  std::string detail;
};

/// The complete events of `events`, each with its row's name (from the thread_name events).
std::vector<Span> spans_of(const std::vector<JsonValue>& events);

/// The collectives behind NEGOTIATE spans: the runtime numbers its process set's collectives
/// alike on every rank ("collective K" in the span's detail), so a tensor's spans with the
/// same K are one collective, whatever each file dropped or started late. Each group holds
/// indices into `spans`, one per rank that has it.
std::vector<std::vector<std::size_t>> negotiations(const std::vector<Span>& spans);
/// Of one negotiation group, the span of the rank that submitted last (the latest begin).
std::size_t last_submitted(const std::vector<Span>& spans, const std::vector<std::size_t>& group);

/// An object's string member; empty where it has none.
std::string string_member(const JsonValue& object, std::string_view key);
/// An object's integer member (a number read as int64); 0 where it has none.
int64_t integer_member(const JsonValue& object, std::string_view key);
/// The pid of an event; -1 where it has none.
int pid_of(const JsonValue& event);

}  // namespace chorus::trace
