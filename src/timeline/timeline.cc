#include "timeline/timeline.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/json.h"

namespace chorus {
namespace {

// The writer wakes at least this often, so a trace lags the run by at most this much.
constexpr auto kWriterPeriod = std::chrono::milliseconds(100);
// record() wakes the writer early when this many events wait, so that a burst is written
// in batches of about this size instead of piling up for a whole period.
constexpr std::size_t kWakeBatch = 4096;
// Every write leaves this after the last event; the next write starts where it starts.
constexpr std::string_view kTail = "\n]\n";

// Writes all of `data` at `offset`; returns 0 or the errno of the failing pwrite.
int pwrite_all(int fd, std::string_view data, int64_t offset) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    data.remove_prefix(static_cast<std::size_t>(n));
    offset += n;
  }
  return 0;
}

std::string process_name_event(int rank) {
  const std::string r = std::to_string(rank);
  return R"({"name":"process_name","ph":"M","pid":)" + r + R"(,"args":{"name":"rank )" + r +
         R"("}})";
}

}  // namespace

const char* timeline_phase_name(TimelinePhase phase) {
  switch (phase) {
    case TimelinePhase::kNegotiate: return "NEGOTIATE";
    case TimelinePhase::kQueue: return "QUEUE";
    case TimelinePhase::kMemcpyIn: return "MEMCPY_IN";
    case TimelinePhase::kCollective: return "COLLECTIVE";
    case TimelinePhase::kMemcpyOut: return "MEMCPY_OUT";
  }
  return "UNKNOWN";
}

StatusOr<std::unique_ptr<Timeline>> Timeline::open(const std::string& path, int rank,
                                                   std::string label) {
  if (label.empty()) label = "CHORUS_TIMELINE=" + path;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return invalid_argument(label + ": cannot open: " + std::strerror(errno));
  // The file is a complete JSON array from the start: a run that dies before the first
  // batch still leaves a trace that loads.
  const std::string head = "[\n" + process_name_event(rank) + std::string(kTail);
  if (int err = pwrite_all(fd, head, 0); err != 0) {
    ::close(fd);
    return invalid_argument(label + ": cannot write: " + std::strerror(err));
  }
  const auto offset = static_cast<int64_t>(head.size() - kTail.size());
  return std::unique_ptr<Timeline>(new Timeline(fd, rank, std::move(label), offset));
}

Timeline::Timeline(int fd, int rank, std::string label, int64_t offset)
    : fd_(fd), rank_(rank), label_(std::move(label)), origin_(Clock::now()), offset_(offset) {
  writer_ = std::thread([this] { writer_loop(); });
}

Timeline::~Timeline() { stop(); }

void Timeline::record(std::string_view tensor, TimelinePhase phase, Clock::time_point start,
                      Clock::time_point end, std::string_view detail) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  // Copy the strings before taking the lock, so that the lock covers only a move: the
  // background thread records too, and must not wait behind another producer's allocations.
  push(Event{std::string(tensor), phase, duration_cast<microseconds>(start - origin_).count(),
             std::max<int64_t>(0, duration_cast<microseconds>(end - start).count()),
             std::string(detail)});
}

void Timeline::mark_cycle(Clock::time_point at) {
  Event event{};
  event.start_us = std::chrono::duration_cast<std::chrono::microseconds>(at - origin_).count();
  event.cycle = true;
  push(std::move(event));
}

void Timeline::push(Event event) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    if (pending_.size() >= kMaxPending) {
      ++dropped_;
      return;
    }
    pending_.push_back(std::move(event));
    wake = pending_.size() == kWakeBatch;
  }
  if (wake) cv_.notify_one();
}

void Timeline::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) {
    // stop() writes everything; wait for it in case it is still under way on another thread.
    flushed_cv_.wait(lock, [this] { return writer_done_; });
    return;
  }
  const uint64_t ticket = ++flush_requested_;
  cv_.notify_one();
  flushed_cv_.wait(lock, [&] { return flush_done_ >= ticket; });
}

void Timeline::stop() {
  std::call_once(stop_once_, [this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    writer_.join();
    ::close(fd_);
  });
}

void Timeline::writer_loop() {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), "chorus-timeline");
#endif
  std::vector<Event> batch;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait_for(lock, kWriterPeriod, [this] {
      return stop_ || flush_requested_ != flush_done_ || pending_.size() >= kWakeBatch;
    });
    // Everything recorded before the flush requests seen here is in pending_ now: the
    // producers appended under mu_ before flush() took its ticket.
    batch.swap(pending_);  // `batch` was empty: pending_ reuses the last batch's capacity
    const uint64_t dropped = std::exchange(dropped_, 0);
    const uint64_t target = flush_requested_;
    const bool stopping = stop_;
    lock.unlock();

    write_events(batch, dropped);
    batch.clear();

    lock.lock();
    const bool notify = flush_done_ != target || stopping;
    flush_done_ = target;
    writer_done_ = stopping;
    if (notify) flushed_cv_.notify_all();
    if (stopping) return;
  }
}

void Timeline::write_events(const std::vector<Event>& events, uint64_t dropped) {
  if ((events.empty() && dropped == 0) || write_failed_) return;
  std::string out;
  out.reserve(events.size() * 128 + 64);
  const std::string pid = std::to_string(rank_);
  // Every event, the first included, follows a separator: process_name is already there.
  for (const Event& e : events) {
    if (e.cycle) {
      out += ",\n";
      out += R"({"name":"CYCLE_START","ph":"i","s":"g","pid":)" + pid + R"(,"tid":0,"ts":)" +
             std::to_string(e.start_us) + "}";
      continue;
    }
    auto [it, inserted] = rows_.try_emplace(e.tensor, static_cast<int>(rows_.size()) + 1);
    const std::string tid = std::to_string(it->second);
    if (inserted) {
      // A new row: name it after the tensor and keep rows in order of first appearance.
      out += ",\n";
      out += R"({"name":"thread_name","ph":"M","pid":)" + pid + R"(,"tid":)" + tid +
             R"(,"args":{"name":)";
      append_json_string(out, e.tensor);
      out += "}}";
      out += ",\n";
      out += R"({"name":"thread_sort_index","ph":"M","pid":)" + pid + R"(,"tid":)" + tid +
             R"(,"args":{"sort_index":)" + tid + "}}";
    }
    out += ",\n";
    out += R"({"name":")";
    out += timeline_phase_name(e.phase);
    out += R"(","ph":"X","pid":)" + pid + R"(,"tid":)" + tid + R"(,"ts":)" +
           std::to_string(e.start_us) + R"(,"dur":)" + std::to_string(e.dur_us);
    if (!e.detail.empty()) {
      out += R"(,"args":{"detail":)";
      append_json_string(out, e.detail);
      out += '}';
    }
    out += '}';
  }
  if (dropped > 0) {
    const auto now_us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - origin_).count();
    out += ",\n";
    out += R"({"name":"dropped events","ph":"i","s":"p","pid":)" + pid + R"(,"tid":0,"ts":)" +
           std::to_string(now_us) + R"(,"args":{"count":)" + std::to_string(dropped) + "}}";
  }
  const std::size_t body = out.size();
  out += kTail;
  // One pwrite over the old tail: the file holds either the old array or the new one, never
  // a prefix without its "]" (short of the kernel splitting a write to a regular file).
  if (int err = pwrite_all(fd_, out, offset_); err != 0) {
    write_failed_ = true;
    std::fprintf(stderr, "chorus: %s: write failed: %s; the timeline stops here\n", label_.c_str(),
                 std::strerror(err));
    return;
  }
  offset_ += static_cast<int64_t>(body);
}

}  // namespace chorus
