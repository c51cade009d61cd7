#include "timeline/timeline.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/file_io.h"
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

// The file's first events: the process's name (with how its clock was aligned) and the
// trainer row's name, each but the first after ",\n".
std::string head_events(int rank, const std::string& clock_label) {
  const std::string r = std::to_string(rank);
  std::string out =
      R"({"name":"process_name","ph":"M","pid":)" + r + R"(,"args":{"name":"rank )" + r + R"("}})";
  if (!clock_label.empty()) {
    out += ",\n";
    out += R"({"name":"process_labels","ph":"M","pid":)" + r + R"(,"args":{"labels":)";
    append_json_string(out, clock_label);
    out += "}}";
  }
  out += ",\n";
  out += R"({"name":"thread_name","ph":"M","pid":)" + r +
         R"(,"tid":0,"args":{"name":"trainer: steps and waits"}})";
  return out;
}

// A row's metadata: its name and its place (rows in order of first appearance).
void append_row_names(std::string& out, const std::string& pid, const std::string& tensor,
                      int tid) {
  const std::string t = std::to_string(tid);
  out += ",\n";
  out +=
      R"({"name":"thread_name","ph":"M","pid":)" + pid + R"(,"tid":)" + t + R"(,"args":{"name":)";
  append_json_string(out, tensor);
  out += "}}";
  out += ",\n";
  out += R"({"name":"thread_sort_index","ph":"M","pid":)" + pid + R"(,"tid":)" + t +
         R"(,"args":{"sort_index":)" + t + "}}";
}

// Appends the events of `events` (each after ",\n") but the rows' names, which a rewritten
// file has once, at its start.
void append_without_row_names(std::string& out, std::string_view events) {
  constexpr std::string_view kNameRow = ",\n{\"name\":\"thread_name\",";
  constexpr std::string_view kSortRow = ",\n{\"name\":\"thread_sort_index\",";
  while (!events.empty()) {
    std::size_t end = events.find(",\n", 1);
    if (end == std::string_view::npos) end = events.size();
    const std::string_view event = events.substr(0, end);
    if (!event.starts_with(kNameRow) && !event.starts_with(kSortRow)) out += event;
    events.remove_prefix(end);
  }
}

}  // namespace

const char* timeline_phase_name(TimelinePhase phase) {
  switch (phase) {
    case TimelinePhase::kNegotiate: return "NEGOTIATE";
    case TimelinePhase::kQueue: return "QUEUE";
    case TimelinePhase::kMemcpyIn: return "MEMCPY_IN";
    case TimelinePhase::kCollective: return "COLLECTIVE";
    case TimelinePhase::kMemcpyOut: return "MEMCPY_OUT";
    case TimelinePhase::kStep: return "STEP";
    case TimelinePhase::kWait: return "WAIT";
  }
  return "UNKNOWN";
}

bool timeline_on_every_rank(const std::string& path) {
  return path.find("{rank}") != std::string::npos;
}

std::string timeline_path_for(const std::string& path, int rank) {
  std::string out;
  std::size_t from = 0;
  for (std::size_t at; (at = path.find("{rank}", from)) != std::string::npos; from = at + 6) {
    out.append(path, from, at - from);
    out += std::to_string(rank);
  }
  out.append(path, from);
  return out;
}

StatusOr<std::unique_ptr<Timeline>> Timeline::open(const std::string& path, Options options) {
  if (options.label.empty()) options.label = "CHORUS_TIMELINE=" + path;
  options.max_bytes = std::max<int64_t>(options.max_bytes, kMinMaxBytes);
  // Read and write: a rewrite (rewrite_with) reads the newest events back.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return invalid_argument(options.label + ": cannot open: " + std::strerror(errno));
  // The file is a complete JSON array from the start: a run that dies before the first
  // batch still leaves a trace that loads.
  std::string head = head_events(options.rank, options.clock_label);
  const std::string text = "[\n" + head + std::string(kTail);
  if (int err = pwrite_all(fd, text, 0); err != 0) {
    ::close(fd);
    return invalid_argument(options.label + ": cannot write: " + std::strerror(err));
  }
  return std::unique_ptr<Timeline>(new Timeline(fd, path, std::move(options), std::move(head)));
}

Timeline::Timeline(int fd, std::string path, Options options, std::string head)
    : fd_(fd),
      path_(std::move(path)),
      options_(std::move(options)),
      head_(std::move(head)),
      offset_(static_cast<int64_t>(2 + head_.size())),
      events_begin_(offset_) {
  writer_ = std::thread([this] { writer_loop(); });
}

Timeline::~Timeline() { stop(); }

int64_t Timeline::since_origin_us(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - options_.origin).count();
}

void Timeline::record(std::string_view tensor, TimelinePhase phase, Clock::time_point start,
                      Clock::time_point end, std::string_view detail) {
  // Copy the strings before taking the lock, so that the lock covers only a move: the
  // background thread records too, and must not wait behind another producer's allocations.
  const int64_t begin = since_origin_us(start);
  push(Event{std::string(tensor), phase, begin, std::max<int64_t>(0, since_origin_us(end) - begin),
             std::string(detail)});
}

void Timeline::record_trainer(TimelinePhase phase, Clock::time_point start, Clock::time_point end,
                              std::string_view detail) {
  const int64_t begin = since_origin_us(start);
  push(Event{{},
             phase,
             begin,
             std::max<int64_t>(0, since_origin_us(end) - begin),
             std::string(detail),
             Event::Row::kTrainer});
}

void Timeline::mark_cycle(Clock::time_point at) {
  Event event{};
  event.start_us = since_origin_us(at);
  event.row = Event::Row::kCycle;
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
  const std::string pid = std::to_string(options_.rank);
  // Every event, the first included, follows a separator: the head is already there.
  for (const Event& e : events) {
    if (e.row == Event::Row::kCycle) {
      out += ",\n";
      out += R"({"name":"CYCLE_START","ph":"i","s":"g","pid":)" + pid + R"(,"tid":0,"ts":)" +
             std::to_string(e.start_us) + "}";
      continue;
    }
    int tid = 0;
    if (e.row == Event::Row::kTensor) {
      auto [it, inserted] = rows_.try_emplace(e.tensor, static_cast<int>(rows_.size()) + 1);
      tid = it->second;
      if (inserted) {
        row_order_.push_back(&it->first);
        append_row_names(out, pid, e.tensor, tid);
      }
    }
    out += ",\n";
    out += R"({"name":")";
    out += timeline_phase_name(e.phase);
    out += R"(","ph":"X","pid":)" + pid + R"(,"tid":)" + std::to_string(tid) + R"(,"ts":)" +
           std::to_string(e.start_us) + R"(,"dur":)" + std::to_string(e.dur_us);
    if (!e.detail.empty()) {
      out += R"(,"args":{"detail":)";
      append_json_string(out, e.detail);
      out += '}';
    }
    out += '}';
  }
  if (dropped > 0) {
    const int64_t now_us = since_origin_us(Clock::now());
    out += ",\n";
    out += R"({"name":"dropped events","ph":"i","s":"p","pid":)" + pid + R"(,"tid":0,"ts":)" +
           std::to_string(now_us) + R"(,"args":{"count":)" + std::to_string(dropped) + "}}";
  }
  int err = 0;
  if (offset_ + static_cast<int64_t>(out.size() + kTail.size()) > options_.max_bytes) {
    err = rewrite_with(out);
  } else {
    const std::size_t body = out.size();
    out += kTail;
    // One pwrite over the old tail: the file holds either the old array or the new one,
    // never a prefix without its "]" (short of the kernel splitting a write to a regular
    // file).
    err = pwrite_all(fd_, out, offset_);
    if (err == 0) offset_ += static_cast<int64_t>(body);
  }
  if (err != 0) {
    write_failed_ = true;
    std::fprintf(stderr, "chorus: %s: write failed: %s; the timeline stops here\n",
                 options_.label.c_str(), std::strerror(err));
  }
}

std::string Timeline::row_names() const {
  std::string out;
  const std::string pid = std::to_string(options_.rank);
  for (std::size_t i = 0; i < row_order_.size(); ++i) {
    append_row_names(out, pid, *row_order_[i], static_cast<int>(i) + 1);
  }
  return out;
}

int Timeline::rewrite_with(std::string_view batch) {
  // The new file: head, every row's name, a marker, then the newest events that fit in half
  // the cap (a quarter at least, however many rows there are), the batch's newest first.
  // Cuts fall before a ",\n": every event is one line, since names and details are escaped.
  ++rewrites_;
  const std::string pid = std::to_string(options_.rank);
  std::string text = "[\n" + head_ + row_names();
  text += ",\n";
  text += R"({"name":"older events dropped","ph":"i","s":"p","pid":)" + pid + R"(,"tid":0,"ts":)" +
          std::to_string(since_origin_us(Clock::now())) + R"(,"args":{"cap_bytes":)" +
          std::to_string(options_.max_bytes) + R"(,"rewrites":)" + std::to_string(rewrites_) + "}}";
  const int64_t begin = static_cast<int64_t>(text.size());
  const int64_t budget = std::max(options_.max_bytes / 2 - begin, options_.max_bytes / 4);
  if (static_cast<int64_t>(batch.size()) > budget) {
    const std::size_t cut = batch.find(",\n", batch.size() - static_cast<std::size_t>(budget));
    batch.remove_prefix(cut == std::string_view::npos ? batch.size() : cut);
  } else {
    const int64_t keep =
        std::min(budget - static_cast<int64_t>(batch.size()), offset_ - events_begin_);
    const int64_t from = offset_ - keep;
    std::string old(static_cast<std::size_t>(keep), '\0');
    if (int err = pread_all(fd_, old.data(), old.size(), from); err != 0) return err;
    const std::size_t cut = from == events_begin_ ? 0 : old.find(",\n");
    if (cut != std::string::npos) append_without_row_names(text, std::string_view(old).substr(cut));
  }
  append_without_row_names(text, batch);
  const int64_t offset = static_cast<int64_t>(text.size());
  text += kTail;
  int fd = -1;
  if (int err = replace_file(path_, text, &fd); err != 0) return err;
  ::close(fd_);
  fd_ = fd;
  offset_ = offset;
  events_begin_ = begin;
  return 0;
}

}  // namespace chorus
