#pragma once
// Chrome-trace timeline (CHORUS_TIMELINE=path, or chorus::start_timeline at run time): one
// row per tensor, one complete event per phase, and optionally a CYCLE_START marker per
// cycle that ran something. Producers (the background thread, trainer threads) append
// under a short lock; a writer thread owned by the Timeline drains and writes. The file is valid
// JSON after every flush: each write puts the closing "]" back at the end, so a job that dies early
// still leaves a file that Perfetto and chrome://tracing load.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "chorus/status.h"

namespace chorus {

enum class TimelinePhase : uint8_t {
  kNegotiate,   // enqueue until the response is agreed
  kQueue,       // agreed until execution starts
  kMemcpyIn,    // packing into the fusion buffer (or prescale)
  kCollective,  // the backend's collective
  kMemcpyOut,   // unpacking / postscale
};
const char* timeline_phase_name(TimelinePhase phase);

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  /// Creates (truncates) `path` and starts the writer thread. `rank` becomes the trace's pid.
  /// `label` names the file in messages: "CHORUS_TIMELINE=<path>" when empty. Fails with
  /// kInvalidArgument naming the label and the OS error.
  static StatusOr<std::unique_ptr<Timeline>> open(const std::string& path, int rank,
                                                  std::string label = {});
  ~Timeline();  // stop()
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  /// Records one phase of one tensor. Thread-safe; never blocks on file I/O. Events recorded
  /// after stop() are ignored; while more than kMaxPending events wait for the writer, new
  /// ones are dropped and counted, and the count is written as a "dropped events" marker.
  void record(std::string_view tensor, TimelinePhase phase, Clock::time_point start,
              Clock::time_point end, std::string_view detail = {});
  /// Records a global "CYCLE_START" instant at `at` (a line across every row, as Horovod's
  /// mark_cycles draws). Thread-safe, same rules as record().
  void mark_cycle(Clock::time_point at);
  /// Writes everything recorded before the call (the file stays valid JSON). Any thread;
  /// returns at once after stop().
  void flush();
  /// Flushes and joins the writer thread, then closes the file. Idempotent, any thread but
  /// the writer.
  void stop();

 private:
  // Events that may wait for the writer before record() drops new ones (about 100 MB of
  // short names): a writer that falls this far behind is stuck on I/O.
  static constexpr std::size_t kMaxPending = std::size_t{1} << 20;

  struct Event {
    std::string tensor;
    TimelinePhase phase;
    int64_t start_us;
    int64_t dur_us;
    std::string detail;
    bool cycle = false;  // a CYCLE_START marker: no tensor, no phase, no duration
  };
  Timeline(int fd, int rank, std::string label, int64_t offset);
  void push(Event event);
  void writer_loop();
  void write_events(const std::vector<Event>& events, uint64_t dropped);

  const int fd_;
  const int rank_;
  const std::string label_;  // names the file in messages
  const Clock::time_point origin_;
  // Where the tail "\n]\n" starts, just past the last event: each batch is written here in
  // one pwrite that ends with a new tail (writer thread only).
  int64_t offset_;
  bool write_failed_ = false;                  // a pwrite failed; write no more (writer only)
  std::unordered_map<std::string, int> rows_;  // tensor -> tid (writer thread only)

  std::mutex mu_;
  std::condition_variable cv_;  // wakes the writer
  std::vector<Event> pending_;  // guarded by mu_
  uint64_t dropped_ = 0;        // guarded by mu_: events refused since the last batch
  bool stop_ = false;           // guarded by mu_
  bool writer_done_ = false;    // guarded by mu_: the writer wrote its last batch
  uint64_t flush_requested_ = 0, flush_done_ = 0;  // guarded by mu_
  std::condition_variable flushed_cv_;             // flush_done_ or writer_done_ changed
  std::once_flag stop_once_;
  std::thread writer_;
};

}  // namespace chorus
