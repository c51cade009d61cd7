#pragma once
// What a rank keeps of its own work for people to read: the timeline (opened at init() from
// CHORUS_TIMELINE or by start_timeline, on rank 0 or on every rank, its times on the job's
// axis) with the trainer's row in it, the flight recorder of its last collectives, and the
// stall lines last said, which a flight record carries.
//
// The runtime owns one and tells it what happens (a collective finished, a cycle ended, a
// stall report, a reason to write the record); it hands the active timeline to whoever
// records into it (the sets' executors) through the listener.
//
// Thread contract: trainer_marks() from any thread; everything else from the thread that
// holds the runtime's progress lock. Nothing here locks.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "collectives/world.h"
#include "core/entry.h"
#include "core/flight_recorder.h"
#include "core/submissions.h"
#include "timeline/timeline.h"
#include "timeline/trainer_marks.h"

namespace chorus {

class Observability {
 public:
  using Clock = std::chrono::steady_clock;
  /// Called with the active timeline (null: none) on every change, before the old one stops.
  using TimelineListener = std::function<void(Timeline*)>;
  /// A collective submitted and not finished: its set and its entry.
  struct Pending {
    int32_t set_id;
    const Entry* entry;
  };
  /// Fills the sets this rank is in and its collectives outstanding, for a flight record.
  using Outstanding = std::function<void(SetMembers*, std::vector<Pending>*)>;

  struct Options {
    std::string debug_dir;    ///< CHORUS_DEBUG_DIR: where flight records go
    int64_t timeline_max_mb;  ///< CHORUS_TIMELINE_MAX_MB
    TimelineListener listener;
    Outstanding outstanding;
  };

  explicit Observability(Options options) : options_(std::move(options)) {}
  /// Stops the active timeline without telling the listener, whose recorders may be gone.
  ~Observability();
  Observability(const Observability&) = delete;
  Observability& operator=(const Observability&) = delete;

  /// Once the world is up: this rank, and its clock against rank 0's. Starts the flight
  /// recorder and, where it can, SIGUSR1's request for a record.
  void start(int rank, ClockOffset clock);

  /// Opens `path` (CHORUS_TIMELINE) where this rank writes it: on rank 0, or on every rank
  /// when it holds "{rank}". Fails naming the file.
  Status open_initial_timeline(const std::string& path, bool mark_cycles);
  /// start_timeline and stop_timeline requests, in the order they came: the active timeline
  /// closes before the next one opens (the new path may name the same file), so a failed
  /// start leaves none. Each request's promise gets its outcome.
  void apply(std::vector<Submissions::TimelineRequest> requests);
  /// The loop's end: stops the active timeline, if any (its file is then complete), and puts
  /// SIGUSR1 back. Idempotent.
  void stop();
  /// The active timeline, or null.
  Timeline* timeline() const { return timeline_.get(); }
  /// The timeline's trainer row. Any thread.
  TrainerMarks& trainer_marks() { return trainer_marks_; }
  /// A cycle that ran collectives, begun at `start`: marked when the timeline asks for it.
  void cycle_ran(Clock::time_point start);

  /// A collective of set `set_id` finished with `status`; `agreed`: when its round's
  /// responses were known (none for entries failed outside a round).
  void finished(int32_t set_id, const Entry& entry, Clock::time_point agreed, const Status& status);
  /// A stall report's lines: the next flight records carry them.
  void stalled(std::vector<std::string> lines) { stall_lines_ = std::move(lines); }
  /// Writes this rank's flight record to CHORUS_DEBUG_DIR, `reason` saying why; a failure to
  /// write is logged. Nothing before start().
  void write_flight_record(const std::string& reason);
  /// Writes a flight record if SIGUSR1 arrived since the last look.
  void write_flight_record_if_asked();
  /// A stall reached CHORUS_STALL_SHUTDOWN_SECONDS on set `label`: ends the process with the
  /// stall's class as exit status (protocol/stall_classes.h).
  [[noreturn]] static void end_for_stall(int status, const std::string& label);

 private:
  StatusOr<std::shared_ptr<Timeline>> open(const std::string& path, std::string label);
  // Hands `timeline` (may be null) to the listener and the trainer row, then stops the old
  // one: stop() writes what it holds and closes the file, so the file is complete when the
  // caller learns of it.
  void set_timeline(std::shared_ptr<Timeline> timeline, bool mark_cycles);

  const Options options_;
  int rank_ = -1;
  ClockOffset clock_;
  std::shared_ptr<Timeline> timeline_;
  bool mark_cycles_ = false;  // CYCLE_START marks
  TrainerMarks trainer_marks_;
  std::unique_ptr<FlightRecorder> flight_;
  std::vector<std::string> stall_lines_;  // the last said
  bool signal_installed_ = false;
};

}  // namespace chorus
