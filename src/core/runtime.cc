#include "core/runtime.h"

#include <pthread.h>
#include <sys/prctl.h>

#include <algorithm>

#include "collectives/backoff.h"
#include "core/logging.h"

namespace chorus {
namespace {

// How long shutdown waits for the other ranks to take part in the final round before
// leaving without them (a rank that died or hangs must not hang the others' exit).
constexpr auto kShutdownGrace = std::chrono::seconds(10);

// After a cycle that ran something, the trainer usually submits again within
// microseconds (the next layer's gradient, the next step); watching the queue for a
// short while avoids a futex sleep and wake-up on each of those.
constexpr auto kWatchAfterWork = std::chrono::microseconds(50);

// Waiting for the other ranks in a round: pauses up to kRoundPause, and after kPatience of
// pauses up to kPatientPause (Backoff).
constexpr auto kRoundPause = std::chrono::microseconds(200);
constexpr auto kPatience = std::chrono::microseconds(2000);
constexpr auto kPatientPause = std::chrono::microseconds(1000);

std::chrono::microseconds micros(double ms) {
  return std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
}

}  // namespace

StatusOr<std::unique_ptr<Runtime>> Runtime::start(const Options& options) {
  StatusOr<Config> config = Config::load(options);
  if (!config.ok()) return config.status();
  std::unique_ptr<Runtime> rt(new Runtime(std::move(config).value()));
  std::promise<Status> started;
  std::future<Status> ready = started.get_future();
  rt->thread_ = std::thread(&Runtime::run, rt.get(), std::move(started));
  Status s = ready.get();
  if (!s.ok()) {
    rt->thread_.join();
    return s;
  }
  return rt;
}

Runtime::~Runtime() { shutdown(); }

Status Runtime::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
  }
  doorbells_.ring();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_status_;
}

bool Runtime::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ == State::kRunning;
}

std::optional<Runtime::SetInfo> Runtime::set_info(int32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = set_info_.find(id);
  if (it == set_info_.end()) return std::nullopt;
  return it->second;
}

bool Runtime::running_set_info(int32_t id, std::optional<SetInfo>* info) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kRunning) return false;
  auto it = set_info_.find(id);
  if (it != set_info_.end()) *info = it->second;
  return true;
}

std::string Runtime::generate_name(OpType op, int32_t set_id) {
  if (set_id == 0) {
    const uint64_t n = name_counters_[static_cast<int>(op)].fetch_add(1);
    return std::string("chorus.") + op_type_name(op) + "." + std::to_string(n);
  }
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(set_names_mu_);
    n = set_name_counters_[set_id][static_cast<int>(op)]++;
  }
  return "chorus.set" + std::to_string(set_id) + "." + op_type_name(op) + "." + std::to_string(n);
}

Handle Runtime::submit(std::span<Entry> entries) {
  std::shared_ptr<detail::HandleState> handle = entries.front().handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kRunning) {
      return Handle(detail::HandleState::failed(
          stopped_because_.ok() ? Status(StatusCode::kNotInitialized, "Chorus is not running")
                                : stopped_because_));
    }
    const int32_t set = entries.front().set_id;
    if (!set_info_.count(set)) {
      return Handle(detail::HandleState::failed(
          invalid_argument("process set " + std::to_string(set) + " does not exist")));
    }
    // Entries of one submit stay adjacent in the queue: accept() takes them as a unit.
    for (Entry& e : entries) {
      e.enqueued = Clock::now();
      queue_.push_back(std::move(e));
    }
    work_queued_.store(true, std::memory_order_release);
  }
  doorbells_.ring();
  return Handle(std::move(handle));
}

Status Runtime::start_timeline(const std::string& path, bool mark_cycles) {
  if (path.empty()) return invalid_argument("start_timeline: the file path is empty");
  return request_timeline(path, mark_cycles);
}

Status Runtime::stop_timeline() { return request_timeline({}, false); }

// Only rank 0 writes a timeline, so the other ranks answer at once; like rank 0, they refuse
// when Chorus is not running.
Status Runtime::request_timeline(std::string path, bool mark_cycles) {
  const std::string what = path.empty() ? "stop_timeline: " : "start_timeline: ";
  if (std::this_thread::get_id() == bg_thread_id_) {
    return failed_precondition(what + "called on Chorus's background thread");
  }
  std::future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kRunning) {
      return stopped_because_.ok()
                 ? Status(StatusCode::kNotInitialized, what + "Chorus is not running")
                 : Status(stopped_because_.code(), what + stopped_because_.message());
    }
    if (rank_ != 0) return {};
    TimelineRequest request;
    request.path = std::move(path);
    request.mark_cycles = mark_cycles;
    done = request.done.get_future();
    timeline_requests_.push_back(std::move(request));
  }
  doorbells_.ring();
  return done.get();
}

void Runtime::run(std::promise<Status> started) {
  pthread_setname_np(pthread_self(), "chorus-bg");
  bg_thread_id_ = std::this_thread::get_id();
  // Short sleeps in the poll loop should last what they ask for, not the default 50 us slack.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  Status s = setup();
  if (!s.ok()) {
    sets_.clear();
    topology_groups_ = {};
    if (world_) world_->finalize();
    started.set_value(s);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::kRunning;
  }
  started.set_value(Status());
  loop();
}

void Runtime::loop() {
  const auto cycle_time = micros(config_.cycle_time_ms);
  const auto min_backoff = std::chrono::microseconds(20);
  auto backoff = min_backoff;
  bool productive = false;
  Status ended;
  // False after a failed round: MPI may then hold requests that never complete, and
  // finalizing could hang, so MPI is left to the process's exit.
  bool mpi_usable = true;
  // Swapped with the queue each cycle and emptied after use, so that both keep their
  // capacity: no reallocation as a step's tensors arrive.
  std::vector<Entry> fresh;
  while (true) {
    bool pending = false;
    for (auto& [id, set] : sets_) pending = pending || set->negotiator->pending() > 0;
    std::vector<TimelineRequest> timeline_requests;
    bool stop_asked;
    if (productive && !pending) {
      const Clock::time_point until = Clock::now() + kWatchAfterWork;
      while (!work_queued_.load(std::memory_order_acquire) && Clock::now() < until) {
        std::this_thread::yield();
      }
    }
    // Idle: take part in a round every cycle time. Waiting on peers after a round that
    // ran nothing: back off up to the cycle time.
    if (!(pending && productive)) wait_for_work(pending ? backoff : cycle_time, pending);
    {
      std::lock_guard<std::mutex> lock(mu_);
      fresh.swap(queue_);
      timeline_requests.swap(timeline_requests_);
      work_queued_.store(false, std::memory_order_relaxed);
      stop_asked = stop_requested_;
    }
    backoff = fresh.empty() && !productive ? std::min(backoff * 2, cycle_time) : min_backoff;
    // Before the fresh entries: what was submitted after start_timeline returned is recorded.
    apply_timeline_requests(std::move(timeline_requests));
    accept(fresh);
    fresh.clear();
    bool shutdown = false;
    Status s = cycle(stop_asked, &shutdown, &productive);
    if (!s.ok()) {
      log().error("background loop stopped: {}", s.to_string());
      ended = s;
      mpi_usable = false;
      break;
    }
    if (shutdown) {
      ended = Status(StatusCode::kAborted,
                     stop_asked ? "Chorus was shut down while the collective was in flight"
                                : "another rank called chorus::shutdown(); Chorus has stopped");
      break;
    }
  }
  fail_all(ended);
  std::vector<TimelineRequest> unanswered;
  Status stopped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::kStopped;
    stopped_because_ = ended.code() == StatusCode::kAborted && !stop_requested_
                           ? ended
                           : Status(StatusCode::kNotInitialized, "Chorus has been shut down");
    stopped = stopped_because_;
    unanswered.swap(timeline_requests_);
  }
  for (TimelineRequest& q : unanswered) q.done.set_value(stopped);
  if (timeline_) timeline_->stop();
  sets_.clear();
  topology_groups_ = {};
  Status fin = mpi_usable ? world_->finalize() : ended;
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_status_ = fin;
}

// Sleeps until this rank has something to do: new work, a timeline request or a stop (each
// rings its doorbell), `timeout`, or, while it holds requests that wait for its peers, a
// peer on this host that started the next cycle: that peer waits for this rank, and may
// bring what the requests wait for. A rank with nothing pending ignores such a peer: joining
// its round early would only make it start another.
void Runtime::wait_for_work(std::chrono::microseconds timeout, bool pending) {
  const Clock::time_point until = Clock::now() + timeout;
  const uint32_t wake = pending ? Doorbells::kOwnWork | Doorbells::kPeers : Doorbells::kOwnWork;
  while (true) {
    const uint32_t seen = doorbells_.seq();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!queue_.empty() || !timeline_requests_.empty() || stop_requested_) return;
    }
    if (pending && doorbells_.peer_ahead(cycles_)) return;
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now());
    if (left.count() <= 0) return;
    doorbells_.wait(seen, left, wake);
  }
}

// Takes the queue's entries into their sets. The entries of one submit (a grouped
// allreduce's members share a handle) are checked and taken all or nothing. Duplicate
// names are caught here, on the background thread, which owns the table of what is in
// flight: the trainer's enqueue stays free of it. The table owns each entry from here on;
// the negotiator reads the entry's request in place.
void Runtime::accept(std::vector<Entry>& fresh) {
  const Clock::time_point now = Clock::now();
  for (std::size_t begin = 0; begin < fresh.size();) {
    std::size_t end = begin + 1;
    while (end < fresh.size() && fresh[end].handle == fresh[begin].handle) ++end;
    auto it = sets_.find(fresh[begin].set_id);
    Status refused;
    if (it == sets_.end() || !it->second) {
      refused = invalid_argument("process set " + std::to_string(fresh[begin].set_id) +
                                 " was removed before the collective ran");
    } else if (end - begin > 1) {
      refused = check_unique_names(*it->second, fresh, begin, end);
    }
    for (std::size_t i = begin; i < end; ++i) {
      Entry& e = fresh[i];
      if (refused.ok()) {
        if (Entry* placed = it->second->entries.insert(e)) {
          it->second->negotiator->submit(placed->request, now);
          continue;
        }
        refused = duplicate_name(e.request);  // one entry alone: `e` was not moved from
      }
      e.handle->finish(refused);
    }
    begin = end;
  }
}

Status Runtime::duplicate_name(const Request& q) const {
  return invalid_argument(std::string(op_type_name(q.op)) + " '" + q.name +
                          "': a collective with this name is already in flight on rank " +
                          std::to_string(rank_) +
                          "; names must be unique among in-flight collectives");
}

// The members of one grouped submit, fresh[begin, end): refused as a whole if a name is in
// flight already or appears twice among them.
Status Runtime::check_unique_names(const SetState& set, const std::vector<Entry>& fresh,
                                   std::size_t begin, std::size_t end) const {
  for (std::size_t i = begin; i < end; ++i) {
    const Request& q = fresh[i].request;
    bool twice = set.entries.contains(q.name);
    for (std::size_t j = begin; j < i && !twice; ++j) twice = fresh[j].request.name == q.name;
    if (twice) return duplicate_name(q);
  }
  return {};
}

Status Runtime::cycle(bool stop_asked, bool* shutdown, bool* productive) {
  const Clock::time_point start = Clock::now();
  bool eager = stop_asked;
  for (auto& [id, set] : sets_) eager = eager || set->negotiator->pending() > 0;
  for (auto& [id, set] : sets_) {
    if (Status s = set->negotiator->start(id == 0 && stop_asked, start); !s.ok()) return s;
  }
  // After the rounds started (their bits on the board), so that a peer woken by the ring
  // finds them.
  doorbells_.announce(++cycles_);
  // Rounds that complete when the last peer arrives, all of whose peers ring on arrival.
  bool rung = true;
  for (auto& [id, set] : sets_) rung = rung && set->control->completes_on_arrival();
  // A rank with nothing of its own pending skips the spin: it only keeps idle peers company.
  // When the rounds are rung, the wait sleeps until a peer rings (the cycle time bounds it:
  // stop requests and the shutdown grace are checked). Otherwise pauses grow to 200 us;
  // after 2 ms of waiting (a peer still in its backward pass, say) to 1 ms, so that a long
  // wait wakes the thread less often; a ring from a peer on this host still ends a pause
  // early.
  const auto cycle_time = micros(config_.cycle_time_ms);
  Backoff poller(std::min(cycle_time, kRoundPause), eager, std::min(cycle_time, kPatientPause),
                 kPatience);
  while (true) {
    const uint32_t seen = doorbells_.seq();
    bool done = true;
    for (auto& [id, set] : sets_) {
      if (!set->negotiator->in_round()) continue;
      StatusOr<bool> finished = set->negotiator->poll();
      if (!finished.ok()) return finished.status();
      done = done && *finished;
    }
    if (done) break;
    if (stop_asked && Clock::now() - start > kShutdownGrace) {
      return Status(StatusCode::kAborted,
                    "shutdown: other ranks did not answer within 10 s; leaving without them");
    }
    const std::chrono::microseconds pause = poller.next();
    if (pause.count() > 0) doorbells_.wait(seen, rung ? cycle_time : pause, Doorbells::kPeers);
  }
  // The blocking part of each round, in ascending set id on every rank (see negotiator.h).
  for (auto& [id, set] : sets_) {
    if (Status s = set->negotiator->complete(Clock::now()); !s.ok()) return s;
  }
  const Clock::time_point agreed = Clock::now();
  *productive = false;
  std::vector<Response> changes;
  for (auto& [id, set] : sets_) {
    const Negotiator::Round& round = set->negotiator->round();
    if (id == 0) *shutdown = round.shutdown;
    *productive = *productive || !round.responses.empty();
    for (const auto& r : round.responses) {
      if (r->status.ok() &&
          (r->op == OpType::kAddProcessSet || r->op == OpType::kRemoveProcessSet)) {
        changes.push_back(*r);
      }
    }
    SetState* state = set.get();
    Status s = set->executor->execute(round.responses, set->entries, agreed,
                                      [&](Entry& e, const Status& st) { finish(*state, e, st); });
    if (!s.ok()) return s;
  }
  if (*productive && mark_cycles_) timeline_->mark_cycle(start);
  return apply_set_changes(changes);
}

// Requests in the order they came. The active timeline is closed before the next one opens,
// also when that then fails: the new path may name the same file, which must not have two
// writers. A failed start thus leaves no timeline.
void Runtime::apply_timeline_requests(std::vector<TimelineRequest> requests) {
  for (TimelineRequest& q : requests) {
    set_timeline(nullptr, false);
    Status s;
    if (!q.path.empty()) {
      StatusOr<std::unique_ptr<Timeline>> tl =
          Timeline::open(q.path, rank_, "start_timeline(" + q.path + ")");
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

// Hands `timeline` (may be null) to every executor, then stops the old one: stop() writes
// what it holds and closes the file, so the file is complete when the caller learns of it.
void Runtime::set_timeline(std::unique_ptr<Timeline> timeline, bool mark_cycles) {
  for (auto& [id, set] : sets_) set->executor->set_timeline(timeline.get());
  if (timeline_) timeline_->stop();
  timeline_ = std::move(timeline);
  mark_cycles_ = timeline_ != nullptr && mark_cycles;
}

void Runtime::finish(SetState& set, Entry& entry, const Status& status) {
  entry.handle->finish(status);
  set.entries.erase(entry);
}

void Runtime::fail_all(const Status& status) {
  for (auto& [id, set] : sets_) {
    while (!set->entries.empty()) finish(*set, set->entries.any(), status);
  }
  std::vector<Entry> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued.swap(queue_);
  }
  for (Entry& e : queued) e.handle->finish(status);
}

}  // namespace chorus
