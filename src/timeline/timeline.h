#pragma once
// Chrome-trace timeline (CHORUS_TIMELINE=path, or chorus::start_timeline at run time): one
// row per tensor, one complete event per phase, a row for the trainer's steps and waits,
// and optionally a CYCLE_START marker per cycle that ran something. Producers (the
// background thread, trainer threads) append under a short lock; a writer thread owned by
// the Timeline drains and writes. The file is valid JSON after every flush: each write puts
// the closing "]" back at the end, so a job that dies early still leaves a file that
// Perfetto and chrome://tracing load.
//
// Bounded twice: events waiting for the writer (kMaxPending; beyond it new ones are
// dropped and counted), and the file (max_bytes): a write that would pass the cap first
// rewrites the file with only its newest half, under a temporary name renamed over it, so
// the file is whole at every moment. (The rows' names open every rewrite: a cap too small
// for them still keeps a quarter of it for events, and the file then passes the cap.)
//
// Times count from the origin the caller passes. The runtime passes the instant every rank
// shares (collectives/clock_offset.h), so that every rank's file is on one time axis and
// chorus-trace merge only has to put them together.

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
  kStep,        // trainer row: a training step, from the previous step mark to this one
  kWait,        // trainer row: a trainer thread blocked on a handle
};
const char* timeline_phase_name(TimelinePhase phase);

/// Whether `path` names a file per rank ("{rank}" in it) rather than rank 0's alone.
bool timeline_on_every_rank(const std::string& path);
/// `path` with every "{rank}" replaced by `rank`.
std::string timeline_path_for(const std::string& path, int rank);

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    int rank = 0;       ///< the trace's pid
    std::string label;  ///< names the file in messages; empty: "CHORUS_TIMELINE=<path>"
    Clock::time_point origin = Clock::now();  ///< time 0 of the trace
    int64_t max_bytes = int64_t{64} << 20;    ///< the file's cap (at least 64 KiB)
    std::string clock_label;  ///< how the origin was found, shown with the process's name
  };

  /// Creates (truncates) `path` and starts the writer thread. Fails with kInvalidArgument
  /// naming the label and the OS error.
  static StatusOr<std::unique_ptr<Timeline>> open(const std::string& path, Options options);
  ~Timeline();  // stop()
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  /// Records one phase of one tensor. Thread-safe; never blocks on file I/O. Events recorded
  /// after stop() are ignored; while more than kMaxPending events wait for the writer, new
  /// ones are dropped and counted, and the count is written as a "dropped events" marker.
  void record(std::string_view tensor, TimelinePhase phase, Clock::time_point start,
              Clock::time_point end, std::string_view detail = {});
  /// Records one step or wait on the trainer row (kStep, kWait), same rules as record().
  void record_trainer(TimelinePhase phase, Clock::time_point start, Clock::time_point end,
                      std::string_view detail = {});
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
  // The smallest cap: room for the head, the rows' names and some events.
  static constexpr int64_t kMinMaxBytes = int64_t{64} << 10;

  struct Event {
    std::string tensor;
    TimelinePhase phase;
    int64_t start_us;
    int64_t dur_us;
    std::string detail;
    enum class Row : uint8_t { kTensor, kTrainer, kCycle } row = Row::kTensor;
  };
  Timeline(int fd, std::string path, Options options, std::string head);
  int64_t since_origin_us(Clock::time_point t) const;
  void push(Event event);
  void writer_loop();
  void write_events(const std::vector<Event>& events, uint64_t dropped);
  // Writes `batch` (events, each after ",\n") past the newest half of the file's events, as
  // a new file renamed over the old one. Returns 0 or the errno of what failed.
  int rewrite_with(std::string_view batch);
  // The metadata of every row seen so far, each after ",\n".
  std::string row_names() const;

  int fd_;  // writer thread only, after the constructor
  const std::string path_;
  const Options options_;
  // The file's first events (the process's name and label, the trainer row's name), without
  // the opening "[": every rewrite starts with them.
  const std::string head_;
  // Where the tail "\n]\n" starts, just past the last event: each batch is written here in
  // one pwrite that ends with a new tail (writer thread only).
  int64_t offset_;
  int64_t events_begin_;       // where the events after the head and row names begin (writer only)
  uint64_t rewrites_ = 0;      // writer thread only
  bool write_failed_ = false;  // a write failed; write no more (writer only)
  std::unordered_map<std::string, int> rows_;  // tensor -> tid (writer thread only)
  std::vector<const std::string*> row_order_;  // rows_'s keys by tid - 1 (writer thread only)

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
