#pragma once
// The flight recorder: each rank's last N collectives, always on, and the collectives it has
// outstanding, written as one JSON file per rank when something goes wrong, so that what
// every rank was doing can be put side by side afterwards (chorus-trace stall).
//
// A record costs a few copies of small values and one of the name, made when a collective
// finishes, into a ring that never grows: no allocation once the ring has wrapped and names
// fit their strings' capacity.
//
// Thread contract: record() and write() are called under the runtime's progress lock (the
// background thread, or a trainer thread driving the cycle); nothing here locks.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "protocol/message.h"

namespace chorus {

/// The process sets a rank is a member of: id -> their global ranks, in set order.
using SetMembers = std::map<int32_t, std::vector<int>>;

struct FlightRecord {
  int32_t set_id = 0;
  std::string name;
  OpType op = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  int64_t bytes = 0;
  /// Microseconds since the Unix epoch (the system clock, comparable across ranks as far as
  /// their clocks agree); 0: not reached.
  int64_t submitted_us = 0;
  int64_t agreed_us = 0;
  int64_t done_us = 0;
  StatusCode status = StatusCode::kOk;
};

class FlightRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  /// The runtime's ring: a few training steps of a large model's gradients.
  static constexpr std::size_t kCapacity = 1024;

  /// Keeps the last `capacity` (> 0) collectives of `rank`.
  FlightRecorder(int rank, std::size_t capacity);

  /// A collective that finished (done or failed).
  void record(int32_t set_id, const Request& request, Clock::time_point submitted,
              Clock::time_point agreed, Clock::time_point done, StatusCode status);

  /// The records kept, oldest first.
  std::vector<FlightRecord> records() const;

  /// Microseconds since the epoch of a steady-clock time (0 for the epoch of Clock).
  int64_t wall_us(Clock::time_point t) const;

  /// Writes `dir`/chorus-flight.rank<R>.json: the reason, the time, the sets this rank is in,
  /// the records kept, the collectives outstanding (submitted, not finished: done_us 0) and
  /// the stall lines last said. Replaces an earlier file of this rank (written to a temporary name,
  /// then renamed, so a reader never sees half a file). Fails naming the path and the OS error.
  Status write(const std::string& dir, const std::string& reason, const SetMembers& sets,
               const std::vector<FlightRecord>& outstanding,
               const std::vector<std::string>& stall_lines) const;

 private:
  int rank_;
  std::vector<FlightRecord> ring_;
  std::size_t next_ = 0;   // where the next record goes
  std::size_t count_ = 0;  // records kept, at most ring_.size()
  // The two clocks read together once: steady times become wall times by this offset.
  Clock::time_point steady_origin_;
  int64_t wall_origin_us_;
};

/// The records of a flight file as JSON text (what write() puts in the file).
std::string flight_json(int rank, const std::string& reason, int64_t now_us, const SetMembers& sets,
                        const std::vector<FlightRecord>& records,
                        const std::vector<FlightRecord>& outstanding,
                        const std::vector<std::string>& stall_lines);

}  // namespace chorus
