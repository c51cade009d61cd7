#include "core/submissions.h"

#include <chrono>

namespace chorus {

void Submissions::set_running() {
  MutexLock lock(mu_);
  state_ = State::kRunning;
  running_.store(true, std::memory_order_release);
}

Status Submissions::stopped(const std::string& call) const {
  MutexLock lock(mu_);
  return stopped_locked(call);
}

Status Submissions::stopped_locked(const std::string& call) const {
  if (stopped_because_.ok())
    return Status(StatusCode::kNotInitialized, call + ": Chorus is not running");
  return Status(stopped_because_.code(), call + ": " + stopped_because_.message());
}

bool Submissions::push(std::span<Entry> entries) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  if (state_ != State::kRunning) return false;
  for (Entry& e : entries) {
    e.enqueued = now;
    queue_.push_back(std::move(e));
  }
  // Sequentially consistent, like the doorbell's ring and CycleDriver::drive()'s reads: a
  // trainer thread that stops driving sees it, or the background thread does.
  work_queued_.store(true, std::memory_order_seq_cst);
  return true;
}

bool Submissions::push(TimelineRequest request) {
  MutexLock lock(mu_);
  if (state_ != State::kRunning) return false;
  timeline_requests_.push_back(std::move(request));
  return true;
}

void Submissions::request_stop() {
  MutexLock lock(mu_);
  stop_requested_ = true;
}

Submissions::Taken Submissions::take(std::vector<Entry>* fresh) {
  Taken taken;
  MutexLock lock(mu_);
  fresh->swap(queue_);
  taken.timeline_requests.swap(timeline_requests_);
  work_queued_.store(false, std::memory_order_relaxed);
  taken.stop_asked = stop_requested_;
  return taken;
}

void Submissions::waiting(bool* requests, bool* entries) const {
  MutexLock lock(mu_);
  *requests = !timeline_requests_.empty() || stop_requested_;
  *entries = !queue_.empty();
}

void Submissions::stop(const Status& ended, std::vector<Entry>* entries) {
  std::vector<TimelineRequest> unanswered;
  Status stopped;
  {
    MutexLock lock(mu_);
    state_ = State::kStopped;
    running_.store(false, std::memory_order_release);
    stopped_because_ =
        !ended.ok() && !stop_requested_
            ? Status(ended.code(), "Chorus has stopped: " + ended.message())
            : Status(StatusCode::kNotInitialized, "Chorus has been shut down on this rank");
    stopped = stopped_because_;
    entries->swap(queue_);
    unanswered.swap(timeline_requests_);
  }
  for (TimelineRequest& q : unanswered) q.done.set_value(stopped);
}

void Submissions::set_shutdown_status(Status s) {
  MutexLock lock(mu_);
  shutdown_status_ = std::move(s);
}

Status Submissions::shutdown_status() const {
  MutexLock lock(mu_);
  return shutdown_status_;
}

}  // namespace chorus
