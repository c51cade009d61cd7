#include "core/runtime.h"

#include <pthread.h>
#include <sys/prctl.h>

#include <algorithm>
#include <exception>
#include <new>

#include "base/logging.h"
#include "collectives/backoff.h"

namespace chorus {
namespace {

// After a cycle that ran something, the trainer usually submits again within
// microseconds (the next layer's gradient, the next step); watching the queue for a
// short while avoids a futex sleep and wake-up on each of those.
constexpr auto kWatchAfterWork = std::chrono::microseconds(50);

// CHORUS_CYCLE_TIME: how long the background thread sleeps between cycles without work.
std::chrono::microseconds cycle_time(const Config& config) {
  return std::chrono::microseconds(static_cast<int64_t>(config.cycle_time_ms * 1000));
}

// What a trainer thread did last, to tell whether it waits for each collective right after
// submitting it.
struct ThreadPattern {
  const detail::HandleState* last_submit = nullptr;
  int submits_since_wait = 0;
  bool waits_at_once = false;  // its last wait was for its one submit since the wait before
  bool ring_owed = false;      // its last submit left the background thread asleep
};
thread_local ThreadPattern t_pattern;

// Runs a cycle's work, turning what it throws (an allocation that failed, above all) into a
// Status: the runtime then stops and fails every handle, instead of the process aborting.
template <class F>
Status guarded(F&& work) {
  try {
    return work();
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kInternal,
                  "out of memory: an allocation of Chorus's background work failed "
                  "(a fusion buffer, or the output of a collective)");
  } catch (const std::exception& e) {
    return internal_error(std::string("Chorus's background work threw: ") + e.what());
  }
}

}  // namespace

StatusOr<std::unique_ptr<Runtime>> Runtime::start(const Options& options, WorldFactory make_world) {
  StatusOr<Config> config = Config::load(options);
  if (!config.ok()) return config.status();
  std::unique_ptr<Runtime> rt(new Runtime(std::move(config).value()));
  std::promise<Status> started;
  std::future<Status> ready = started.get_future();
  rt->thread_ = std::thread(&Runtime::run, rt.get(), std::move(make_world), std::move(started));
  Status s = ready.get();
  if (!s.ok()) {
    rt->thread_.join();
    return s;
  }
  return rt;
}

Runtime::~Runtime() { shutdown(); }

Status Runtime::shutdown() {
  submissions_.request_stop();
  doorbells_.ring();
  if (thread_.joinable()) thread_.join();
  return submissions_.shutdown_status();
}

Handle Runtime::submit(std::span<Entry> entries) {
  std::shared_ptr<detail::HandleState> handle = entries.front().handle;
  handle->driver = weak_from_this();
  ThreadPattern& t = t_pattern;
  // A thread that waits for each collective right after submitting it runs it in that
  // wait; waking the background thread would only take its core. Should the wait not come
  // next, the thread's next submit, wait or poll rings (wake()); a thread that does none of
  // those leaves the work to the background thread's next look, within the cycle time.
  const bool defer = t.waits_at_once && t.submits_since_wait == 0 && cycle_.drivable();
  for (const Entry& e : entries) {
    if (Status s = check_request(e.request); !s.ok()) {
      return Handle(detail::HandleState::failed(std::move(s)));
    }
  }
  if (Status s = process_sets_.claim(entries, rank_); !s.ok()) {
    return Handle(detail::HandleState::failed(std::move(s)));
  }
  // Entries of one submit stay adjacent in the queue: SetTable::accept takes them as a unit.
  if (!submissions_.push(entries)) {
    // Chorus stopped: the entries stay with the caller, their names leave flight.
    for (const Entry& e : entries) process_sets_.release(e);
    return Handle(detail::HandleState::failed(stopped(op_type_name(entries.front().request.op))));
  }
  if (!defer || t.ring_owed) doorbells_.ring();
  t.ring_owed = defer;
  t.last_submit = handle.get();
  ++t.submits_since_wait;
  return Handle(std::move(handle));
}

void Runtime::wake() {
  ThreadPattern& t = t_pattern;
  // A thread that polls or waits with a timeout runs nothing itself: its submits ring.
  t.waits_at_once = false;
  if (!t.ring_owed) return;
  t.ring_owed = false;
  doorbells_.ring();
}

void Runtime::drive(detail::HandleState& handle) {
  ThreadPattern& t = t_pattern;
  const bool owed = t.ring_owed;
  t.waits_at_once = &handle == t.last_submit && t.submits_since_wait == 1;
  t.submits_since_wait = 0;
  t.ring_owed = false;
  if (!cycle_.drivable()) {
    if (owed) doorbells_.ring();
    return;
  }
  if (!progress_mu_.try_lock()) {
    if (owed) doorbells_.ring();
    return;
  }
  driving_.store(true, std::memory_order_seq_cst);
  if (Status s = guarded([&] {
        progress_mu_.assert_held();
        // After a trainer thread's failure the loop ends: no thread drives any more.
        return trainer_failure_.ok() ? cycle_.drive(handle) : Status();
      });
      !s.ok()) {
    log().error("a cycle run by a waiting trainer thread failed: {}", s.to_string());
    trainer_failure_ = s;
  }
  const bool left = !cycle_.at_rest() || sets_.pending() || !trainer_failure_.ok();
  // Cleared before the queue is looked at: a submit that the background thread ignored
  // while this thread drove is then seen here, or that thread sees it itself.
  driving_.store(false, std::memory_order_seq_cst);
  const bool queued = submissions_.work_queued();
  progress_mu_.unlock();
  if (left || queued) {
    handed_over_.store(true, std::memory_order_release);
    doorbells_.ring();
  }
}

// The observability service reaches the sets through two closures, both called under
// progress_mu_ (the service's thread contract): the executors follow the active timeline,
// and a flight record lists the sets and their entries outstanding.
Runtime::Runtime(Config config)
    : config_(std::move(config)),
      observability_(
          {config_.debug_dir, config_.timeline_max_mb,
           [this](Timeline* timeline) {
             progress_mu_.assert_held();
             for (auto& [id, set] : sets_) set->executor->set_timeline(timeline);
           },
           [this](SetMembers* members, std::vector<Observability::Pending>* pending) {
             progress_mu_.assert_held();
             for (const auto& [id, set] : sets_) {
               (*members)[id] = set->ranks;
               const int32_t set_id = id;  // a structured binding is not captured
               set->entries.for_each([&](const Entry& e) { pending->push_back({set_id, &e}); });
             }
           }}),
      sets_(&process_sets_, &observability_),
      cycle_(&sets_, &submissions_, &doorbells_, &observability_, cycle_time(config_)) {}

// Only rank 0 writes a timeline unless its path holds "{rank}": elsewhere a start of rank
// 0's file is a stop, since any rank may have a file of its own from an earlier start (a
// switch closes the old file everywhere). Every rank refuses when Chorus is not running.
Status Runtime::request_timeline(std::string path, bool mark_cycles) {
  if (std::this_thread::get_id() == bg_thread_id_) {
    return failed_precondition(std::string(path.empty() ? "stop_timeline" : "start_timeline") +
                               ": called on Chorus's background thread");
  }
  const std::string call = path.empty() ? "stop_timeline" : "start_timeline";
  if (!running()) return stopped(call);
  // A start of rank 0's file elsewhere closes this rank's own file, if it has one.
  if (rank_ != 0 && !path.empty() && !timeline_on_every_rank(path)) path.clear();
  Submissions::TimelineRequest request;
  request.path = std::move(path);
  request.mark_cycles = mark_cycles;
  std::future<Status> done = request.done.get_future();
  if (!submissions_.push(std::move(request))) return stopped(call);
  doorbells_.ring();
  return done.get();
}

void Runtime::run(const WorldFactory& make_world, std::promise<Status> started) {
  pthread_setname_np(pthread_self(), "chorus-bg");
  bg_thread_id_ = std::this_thread::get_id();
  // Short sleeps in the poll loop should last what they ask for, not the default 50 us slack.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  {
    MutexLock progress(progress_mu_);
    Status s = setup(make_world);
    if (!s.ok()) {
      sets_.close(s, false);
      topology_groups_ = {};
      if (world_) world_->finalize();
      started.set_value(s);
      return;
    }
  }
  submissions_.set_running();
  started.set_value(Status());
  loop();
}

void Runtime::loop() {
  const auto cycle = cycle_time(config_);
  const auto min_backoff = std::chrono::microseconds(20);
  auto backoff = min_backoff;
  // This thread's last cycle ran something. Cycles that trainer threads ran do not count:
  // watching for their next submit would only take the core they run on.
  bool productive = false;
  Status ended;
  // False after a failed round: MPI may then hold requests that never complete, and
  // finalizing could hang, so MPI is left to the process's exit.
  bool mpi_usable = true;
  progress_mu_.lock();
  cycle_.update_drivable();
  while (true) {
    bool stop_asked = false;
    if (cycle_.at_rest() && trainer_failure_.ok()) {
      // Between cycles: trainer threads may run one while this thread waits for work.
      const bool was_pending = sets_.pending();
      const uint64_t cycles = cycle_.started();
      progress_mu_.unlock();
      if (productive && !was_pending) {
        const Clock::time_point until = Clock::now() + kWatchAfterWork;
        while (!submissions_.work_queued() && Clock::now() < until) {
          std::this_thread::yield();
        }
      }
      // Idle: take part in a round every cycle time. Waiting on peers after a round that
      // ran nothing: back off up to the cycle time.
      bool woken = true;
      if (!(was_pending && productive)) {
        woken = wait_for_work(was_pending ? backoff : cycle, was_pending, cycles);
      }
      progress_mu_.lock();
      handed_over_.store(false, std::memory_order_relaxed);
      // A trainer thread may have left a cycle midway: the queue waits for the next one.
      if (cycle_.at_rest()) {
        const bool took = cycle_.take_queue(&stop_asked);
        backoff = !took && !productive ? std::min(backoff * 2, cycle) : min_backoff;
        // Woken for work that a trainer thread ran meanwhile: nothing is left to do.
        if (woken && !took && !stop_asked && !sets_.pending() && trainer_failure_.ok()) {
          productive = false;
          continue;
        }
      }
    }
    bool shutdown = false;
    Status s = trainer_failure_;
    if (s.ok()) {
      s = guarded([&] {
        progress_mu_.assert_held();
        return cycle_.run(stop_asked, &shutdown, &productive);
      });
    }
    if (!s.ok()) {
      log().error("background loop stopped: {}", s.to_string());
      ended = s;
      mpi_usable = false;
      observability_.write_flight_record("the runtime stopped: " + s.to_string());
      break;
    }
    if (shutdown) {
      ended = Status(StatusCode::kAborted,
                     stop_asked ? "Chorus was shut down while the collective was in flight"
                                : "another rank called chorus::shutdown(), which stops every rank");
      if (sets_.pending())
        observability_.write_flight_record("shutdown aborted collectives in flight");
      break;
    }
    observability_.write_flight_record_if_asked();
  }
  cycle_.stop_driving();
  log().debug("{} cycles, {} of them run by trainer threads waiting on a handle", cycle_.started(),
              trainer_cycles());
  // Stopped before the handles fail: a thread that sees its handle fail and submits again
  // must find Chorus stopped, not a queue that no one will take.
  std::vector<Entry> queued;
  submissions_.stop(ended, &queued);
  // No entry failed here has device work queued: every round's batches completed before
  // the round ended (Executor::execute).
  for (Entry& e : queued) sets_.release(e, ended);
  observability_.stop();
  // After a failure the ranks are out of step: the sets' GPU communicators are aborted.
  sets_.close(ended, !mpi_usable);
  topology_groups_ = {};
  Status fin = mpi_usable ? world_->finalize() : ended;
  progress_mu_.unlock();
  submissions_.set_shutdown_status(std::move(fin));
}

// Sleeps until this rank has something to do: new work, a timeline request or a stop (each
// rings its doorbell), work that a trainer thread handed over, `timeout`, or, while it
// holds requests that wait for its peers, a peer on this host that started the next cycle:
// that peer waits for this rank, and may bring what the requests wait for. A rank with
// nothing pending ignores such a peer: joining its round early would only make it start
// another. `cycles`: the cycles this rank had started. While a trainer thread runs a cycle,
// new work and peers are its business: only its hand-over, a stop, a timeline request or the
// timeout end the wait. Returns false if the timeout ended it.
bool Runtime::wait_for_work(std::chrono::microseconds timeout, bool pending, uint64_t cycles) {
  const Clock::time_point until = Clock::now() + timeout;
  const uint32_t wake = pending ? Doorbells::kOwnWork | Doorbells::kPeers : Doorbells::kOwnWork;
  while (true) {
    const uint32_t seen = doorbells_.seq();
    if (handed_over_.load(std::memory_order_acquire)) return true;
    bool requests, queued;
    submissions_.waiting(&requests, &queued);
    if (requests) return true;
    if (!driving_.load(std::memory_order_seq_cst)) {
      if (queued) return true;
      if (pending && doorbells_.peer_ahead(cycles)) return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now());
    if (left.count() <= 0) return false;
    doorbells_.wait(seen, left, wake);
  }
}

}  // namespace chorus
