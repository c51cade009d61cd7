#include "core/cycle_driver.h"

#include <algorithm>
#include <exception>
#include <new>
#include <thread>

#include "base/logging.h"

namespace chorus {
namespace {

// After a cycle that ran something, the trainer usually submits again within
// microseconds (the next layer's gradient, the next step); watching the queue for a
// short while avoids a futex sleep and wake-up on each of those.
constexpr auto kWatchAfterWork = std::chrono::microseconds(50);

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

CycleDriver::CycleDriver(Mutex* progress_mu, SetTable* sets, Submissions* submissions,
                         Doorbells* doorbells, Observability* observability,
                         std::chrono::microseconds cycle_time, std::unique_ptr<Autotuner> autotuner)
    : progress_mu_(progress_mu),
      sets_(sets),
      submissions_(submissions),
      doorbells_(doorbells),
      observability_(observability),
      cycle_(sets, submissions, doorbells, observability, cycle_time, std::move(autotuner)) {}

void CycleDriver::submitted(const detail::HandleState* handle) {
  ThreadPattern& t = t_pattern;
  const bool defer = t.waits_at_once && t.submits_since_wait == 0 && cycle_.drivable();
  if (!defer || t.ring_owed) doorbells_->ring();
  t.ring_owed = defer;
  t.last_submit = handle;
  ++t.submits_since_wait;
}

void CycleDriver::wake() {
  ThreadPattern& t = t_pattern;
  // A thread that polls or waits with a timeout runs nothing itself: its submits ring.
  t.waits_at_once = false;
  if (!t.ring_owed) return;
  t.ring_owed = false;
  doorbells_->ring();
}

void CycleDriver::drive(detail::HandleState& handle) {
  ThreadPattern& t = t_pattern;
  const bool owed = t.ring_owed;
  t.waits_at_once = &handle == t.last_submit && t.submits_since_wait == 1;
  t.submits_since_wait = 0;
  t.ring_owed = false;
  if (!cycle_.drivable()) {
    if (owed) doorbells_->ring();
    return;
  }
  if (!progress_mu_->try_lock()) {
    if (owed) doorbells_->ring();
    return;
  }
  driving_.store(true, std::memory_order_seq_cst);
  if (Status s = guarded([&] {
        progress_mu_->assert_held();
        // After a trainer thread's failure the loop ends: no thread drives any more.
        return trainer_failure_.ok() ? cycle_.drive(handle) : Status();
      });
      !s.ok()) {
    log().error("a cycle run by a waiting trainer thread failed: {}", s.to_string());
    trainer_failure_ = s;
  }
  const bool left = !cycle_.at_rest() || sets_->pending() || !trainer_failure_.ok();
  // Cleared before the queue is looked at: a submit that the background thread ignored
  // while this thread drove is then seen here, or that thread sees it itself.
  driving_.store(false, std::memory_order_seq_cst);
  const bool queued = submissions_->work_queued();
  progress_mu_->unlock();
  if (left || queued) {
    handed_over_.store(true, std::memory_order_release);
    doorbells_->ring();
  }
}

void CycleDriver::loop(const std::function<void(const Ended&)>& teardown) {
  const auto min_backoff = std::chrono::microseconds(20);
  auto backoff = min_backoff;
  // This thread's last cycle ran something. Cycles that trainer threads ran do not count:
  // watching for their next submit would only take the core they run on.
  bool productive = false;
  Ended ended;
  progress_mu_->lock();
  cycle_.update_drivable();
  while (true) {
    bool stop_asked = false;
    if (cycle_.at_rest() && trainer_failure_.ok()) {
      // Between cycles: trainer threads may run one while this thread waits for work.
      const bool was_pending = sets_->pending();
      const uint64_t cycles = cycle_.started();
      progress_mu_->unlock();
      if (productive && !was_pending) {
        const Clock::time_point until = Clock::now() + kWatchAfterWork;
        while (!submissions_->work_queued() && Clock::now() < until) {
          std::this_thread::yield();
        }
      }
      // Idle: take part in a round every cycle time. Waiting on peers after a round that
      // ran nothing: back off up to the cycle time.
      bool woken = true;
      if (!(was_pending && productive)) {
        woken = wait_for_work(was_pending ? backoff : cycle_.cycle_time(), was_pending, cycles);
      }
      progress_mu_->lock();
      handed_over_.store(false, std::memory_order_relaxed);
      // A trainer thread may have left a cycle midway: the queue waits for the next one.
      if (cycle_.at_rest()) {
        const bool took = cycle_.take_queue(&stop_asked);
        backoff = !took && !productive ? std::min(backoff * 2, cycle_.cycle_time()) : min_backoff;
        // Woken for work that a trainer thread ran meanwhile: nothing is left to do.
        if (woken && !took && !stop_asked && !sets_->pending() && trainer_failure_.ok()) {
          productive = false;
          continue;
        }
      }
    }
    bool shutdown = false;
    Status s = trainer_failure_;
    if (s.ok()) {
      s = guarded([&] {
        progress_mu_->assert_held();
        return cycle_.run(stop_asked, &shutdown, &productive);
      });
    }
    if (!s.ok()) {
      log().error("background loop stopped: {}", s.to_string());
      ended = {s, false};
      observability_->write_flight_record("the runtime stopped: " + s.to_string());
      break;
    }
    if (shutdown) {
      ended.status =
          Status(StatusCode::kAborted,
                 stop_asked ? "Chorus was shut down while the collective was in flight"
                            : "another rank called chorus::shutdown(), which stops every rank");
      if (sets_->pending())
        observability_->write_flight_record("shutdown aborted collectives in flight");
      break;
    }
    observability_->write_flight_record_if_asked();
  }
  cycle_.stop_driving();
  log().debug("{} cycles, {} of them run by trainer threads waiting on a handle", cycle_.started(),
              trainer_cycles());
  teardown(ended);
  progress_mu_->unlock();
}

// Sleeps until this rank has something to do: new work, a timeline request or a stop (each
// rings its doorbell), work that a trainer thread handed over, `timeout`, or, while it
// holds requests that wait for its peers, a peer on this host that started the next cycle:
// that peer waits for this rank, and may bring what the requests wait for. A rank with
// nothing pending ignores such a peer: joining its round early would only make it start
// another. `cycles`: the cycles this rank had started. While a trainer thread runs a cycle,
// new work and peers are its business: only its hand-over, a stop, a timeline request or the
// timeout end the wait. Returns false if the timeout ended it.
bool CycleDriver::wait_for_work(std::chrono::microseconds timeout, bool pending, uint64_t cycles) {
  const Clock::time_point until = Clock::now() + timeout;
  const uint32_t wake = pending ? Doorbells::kOwnWork | Doorbells::kPeers : Doorbells::kOwnWork;
  while (true) {
    const uint32_t seen = doorbells_->seq();
    if (handed_over_.load(std::memory_order_acquire)) return true;
    bool requests, queued;
    submissions_->waiting(&requests, &queued);
    if (requests) return true;
    if (!driving_.load(std::memory_order_seq_cst)) {
      if (queued) return true;
      if (pending && doorbells_->peer_ahead(cycles)) return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now());
    if (left.count() <= 0) return false;
    doorbells_->wait(seen, left, wake);
  }
}

}  // namespace chorus
