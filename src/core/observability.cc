#include "core/observability.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/logging.h"
#include "core/debug_signal.h"

namespace chorus {

void Observability::start(int rank, ClockOffset clock) {
  rank_ = rank;
  clock_ = clock;
  flight_ = std::make_unique<FlightRecorder>(rank_, FlightRecorder::kCapacity);
  signal_installed_ = install_flight_signal();
  if (signal_installed_) log().debug("SIGUSR1 writes the flight record");
}

Observability::~Observability() {
  if (timeline_) timeline_->stop();
  if (signal_installed_) remove_flight_signal();
}

void Observability::stop() {
  set_timeline(nullptr, false);
  if (signal_installed_) remove_flight_signal();
  signal_installed_ = false;
}

Status Observability::open_initial_timeline(const std::string& path, bool mark_cycles) {
  if (path.empty() || (rank_ != 0 && !timeline_on_every_rank(path))) return {};
  StatusOr<std::shared_ptr<Timeline>> tl = open(path, {});
  if (!tl.ok()) return tl.status();
  set_timeline(std::move(tl).value(), mark_cycles);
  return {};
}

void Observability::apply(std::vector<Submissions::TimelineRequest> requests) {
  for (Submissions::TimelineRequest& q : requests) {
    set_timeline(nullptr, false);
    Status s;
    if (!q.path.empty()) {
      StatusOr<std::shared_ptr<Timeline>> tl = open(q.path, "start_timeline(" + q.path + ")");
      if (tl.ok()) {
        set_timeline(std::move(tl).value(), q.mark_cycles);
        log().info("timeline started: {}{}", q.path, q.mark_cycles ? " (marking cycles)" : "");
      } else {
        s = tl.status();
      }
    }
    q.done.set_value(s);
  }
}

void Observability::cycle_ran(Clock::time_point start) {
  if (mark_cycles_) timeline_->mark_cycle(start);
}

StatusOr<std::shared_ptr<Timeline>> Observability::open(const std::string& path,
                                                        std::string label) {
  Timeline::Options options;
  options.rank = rank_;
  options.label = std::move(label);
  options.origin = Clock::time_point(std::chrono::nanoseconds(clock_.origin_ns));
  options.max_bytes = options_.timeline_max_mb << 20;
  if (rank_ != 0) {
    options.clock_label = fmt::format("clock {:+.1f} us from rank 0's (within {:.1f} us)",
                                      static_cast<double>(clock_.offset_ns) / 1e3,
                                      static_cast<double>(clock_.uncertainty_ns) / 1e3);
  }
  StatusOr<std::unique_ptr<Timeline>> tl = Timeline::open(timeline_path_for(path, rank_), options);
  if (!tl.ok()) return tl.status();
  return std::shared_ptr<Timeline>(std::move(tl).value());
}

void Observability::set_timeline(std::shared_ptr<Timeline> timeline, bool mark_cycles) {
  if (options_.listener) options_.listener(timeline.get());
  trainer_marks_.set(timeline);
  if (timeline_) timeline_->stop();
  timeline_ = std::move(timeline);
  mark_cycles_ = timeline_ != nullptr && mark_cycles;
}

void Observability::finished(int32_t set_id, const Entry& entry, Clock::time_point agreed,
                             const Status& status) {
  if (flight_) {
    flight_->record(set_id, entry.request, entry.enqueued, agreed, Clock::now(), status.code());
  }
}

void Observability::write_flight_record(const std::string& reason) {
  if (!flight_) return;
  SetMembers members;
  std::vector<Pending> pending;
  if (options_.outstanding) options_.outstanding(&members, &pending);
  std::vector<FlightRecord> outstanding;
  for (const Pending& p : pending) {
    const Request& q = p.entry->request;
    FlightRecord r;
    r.set_id = p.set_id;
    r.name = q.name;
    r.op = q.op;
    r.dtype = q.dtype;
    r.bytes = num_elements(q.shape) * static_cast<int64_t>(dtype_size(q.dtype));
    r.submitted_us = flight_->wall_us(p.entry->enqueued);
    outstanding.push_back(std::move(r));
  }
  std::sort(
      outstanding.begin(), outstanding.end(),
      [](const FlightRecord& a, const FlightRecord& b) { return a.submitted_us < b.submitted_us; });
  if (Status s = flight_->write(options_.debug_dir, reason, members, outstanding, stall_lines_);
      !s.ok()) {
    log().error("{}", s.message());
  } else {
    log().info("flight record written to {} ({})", options_.debug_dir, reason);
  }
}

void Observability::write_flight_record_if_asked() {
  if (flight_record_asked()) write_flight_record("SIGUSR1");
}

// CHORUS_STALL_SHUTDOWN_SECONDS failed stuck tensors of a set this rank belongs to, every
// member ran those failures in this round, and every member now ends its process with the
// stall's class as exit status (protocol/stall_classes.h), so that the launcher ends the job and
// reports why. _Exit: the trainer's threads may still be running, and static destructors
// under them would crash instead of exiting with the status.
void Observability::end_for_stall(int status, const std::string& label) {
  log().critical(
      "stall inspector ({}): CHORUS_STALL_SHUTDOWN_SECONDS reached; ending the process with "
      "exit status {}",
      label, status);
  log().flush();
  std::fflush(nullptr);
  std::_Exit(status);
}

}  // namespace chorus
