#include "core/cycle.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "base/logging.h"
#include "collectives/backoff.h"

namespace chorus {
namespace {

// How long shutdown waits for the other ranks to take part in the final round before
// leaving without them (a rank that died or hangs must not hang the others' exit).
constexpr auto kShutdownGrace = std::chrono::seconds(10);

// Waiting for the other ranks in a round: pauses up to kRoundPause, and after kPatience of
// pauses up to kPatientPause (Backoff).
constexpr auto kRoundPause = std::chrono::microseconds(200);
constexpr auto kPatience = std::chrono::microseconds(2000);
constexpr auto kPatientPause = std::chrono::microseconds(1000);

// How long a trainer thread polls a round for peers that have not arrived before it leaves
// the round to the background thread, which sleeps between looks. Peers that submitted the
// same collective arrive within microseconds; one still computing may take milliseconds.
constexpr auto kTrainerPoll = std::chrono::microseconds(50);
// Tests of a round a trainer thread makes before it yields between them.
constexpr int kTrainerSpins = 50;

}  // namespace

Status Cycle::begin(bool stop_asked) {
  start_ = Clock::now();
  stop_asked_ = stop_asked;
  for (auto& [id, set] : *sets_) {
    if (Status s = set->negotiator->start(id == 0 && stop_asked, start_); !s.ok()) return s;
  }
  // After the rounds started (their bits on the board), so that a peer woken by the ring
  // finds them.
  doorbells_->announce(++cycles_);
  phase_ = Phase::kPoll;
  return {};
}

StatusOr<bool> Cycle::poll(bool liveness) {
  bool done = true;
  for (auto& [id, set] : *sets_) {
    if (!set->negotiator->in_round()) continue;
    StatusOr<bool> finished = set->negotiator->poll(liveness);
    if (!finished.ok()) return finished.status();
    done = done && *finished;
  }
  if (done) phase_ = Phase::kComplete;
  return done;
}

// The blocking part of each round, in ascending set id on every rank (see negotiator.h).
Status Cycle::complete() {
  for (auto& [id, set] : *sets_) {
    if (Status s = set->negotiator->complete(Clock::now()); !s.ok()) return s;
  }
  phase_ = Phase::kExecute;
  return {};
}

Status Cycle::execute(bool* shutdown, bool* productive) {
  phase_ = Phase::kBegin;
  const Clock::time_point agreed = Clock::now();
  *productive = false;
  std::vector<Response> changes;
  Status failed;
  bool world_in_step = true;
  for (auto& [id, set] : *sets_) {
    const Negotiator::Round& round = set->negotiator->round();
    if (id == 0) *shutdown = round.shutdown;
    *productive = *productive || !round.responses.empty();
    for (const auto& r : round.responses) {
      if (r->status.ok() && (creates_process_set(r->op) || r->op == OpType::kRemoveProcessSet)) {
        changes.push_back(*r);
      }
    }
    // The record shows what the report describes: written before the round runs, whose
    // failures (CHORUS_STALL_SHUTDOWN_SECONDS) would take the stuck tensors out of it.
    if (!round.stall_lines.empty()) {
      observability_->stalled(round.stall_lines);
      observability_->write_flight_record("stall report (" + set->negotiator->label() + ")");
    }
    SetState* state = set.get();
    Status s = set->executor->execute(
        round.responses, set->entries, agreed,
        [&](Entry& e, const Status& st) { sets_->finish(*state, e, st, agreed); });
    // A set that stops does not keep this rank from the later sets' batches, whose members
    // wait for it there: the runtime stops once all have run.
    if (!s.ok()) {
      if (failed.ok()) failed = s;
      world_in_step = world_in_step && set->executor->verdict_reached();
      continue;
    }
    if (round.stall_exit_status != 0)
      Observability::end_for_stall(round.stall_exit_status, set->negotiator->label());
  }
  if (*productive && failed.ok()) observability_->cycle_ran(start_);
  if (autotuner_ && failed.ok()) {
    if (std::optional<TuningSetting> s = autotuner_->after_cycle(*sets_, Clock::now())) apply(*s);
  }
  // The process-set changes are collective over the whole job, whose other ranks make them
  // whatever became of this rank's sets: made whenever each failed set agreed on its verdict
  // (only that set's own communicator is out of step). Without a verdict a member is lost,
  // and the job's calls would wait for it.
  if (!changes.empty() && world_in_step) {
    Status s = sets_->apply_changes(changes);
    update_drivable();
    if (failed.ok()) failed = s;
  }
  return failed;
}

// The background thread's cycle: takes it up at whichever phase it stands (a trainer thread
// may have left it midway), and waits for the rounds between looks.
Status Cycle::run(bool stop_asked, bool* shutdown, bool* productive) {
  if (phase_ == Phase::kBegin) {
    if (Status s = begin(stop_asked); !s.ok()) return s;
  }
  if (phase_ == Phase::kPoll) {
    const bool eager = stop_asked_ || sets_->pending();
    // Rounds that complete when the last peer arrives, all of whose peers ring on arrival.
    bool rung = true;
    for (auto& [id, set] : *sets_) rung = rung && set->control->completes_on_arrival();
    // A rank with nothing of its own pending skips the spin: it only keeps idle peers
    // company. When the rounds are rung, the wait sleeps until a peer rings (the cycle time
    // bounds it: stop requests and the shutdown grace are checked). Otherwise pauses grow to
    // 200 us; after 2 ms of waiting (a peer still in its backward pass, say) to 1 ms, so that
    // a long wait wakes the thread less often; a ring from a peer on this host still ends a
    // pause early.
    const std::chrono::microseconds cycle_time = this->cycle_time();
    Backoff poller(std::min(cycle_time, kRoundPause), eager, std::min(cycle_time, kPatientPause),
                   kPatience);
    while (true) {
      const uint32_t seen = doorbells_->seq();
      StatusOr<bool> done = poll(/*liveness=*/true);
      if (!done.ok()) return done.status();
      if (*done) break;
      if (stop_asked_ && Clock::now() - start_ > kShutdownGrace) {
        return Status(StatusCode::kAborted,
                      "shutdown: other ranks did not answer within 10 s; leaving without them");
      }
      const std::chrono::microseconds pause = poller.next();
      if (pause.count() > 0) {
        doorbells_->wait(seen, rung ? cycle_time : pause, Doorbells::kPeers | Doorbells::kRound);
      }
    }
  }
  if (phase_ == Phase::kComplete) {
    if (Status s = complete(); !s.ok()) return s;
  }
  return execute(shutdown, productive);
}

// Every member applies it at the end of the same round (core/autotuner.h). The fusion limit
// and the host algorithm are the global set's; the cycle time paces every set's rounds.
void Cycle::apply(const TuningSetting& setting) {
  for (auto& [id, set] : *sets_) {
    if (id != 0) continue;
    set->executor->set_fusion_limit(static_cast<std::size_t>(setting.fusion_bytes));
    set->executor->set_host_algorithm(setting.algorithm);
  }
  cycle_time_us_.store(static_cast<int64_t>(setting.cycle_ms * 1000), std::memory_order_relaxed);
}

// Trainer threads may run cycles when every round goes through the host's board (the global
// set of a one-host job, alone) and fits there: then no round makes an MPI call. Read
// without the lock by a trainer thread about to try it (drive()).
void Cycle::update_drivable() {
  bool may = sets_->size() == 1;
  for (auto& [id, set] : *sets_) {
    may = may && set->host_rounds != nullptr &&
          set->negotiator->max_round_words() <= Doorbells::kRoundWords;
  }
  drivable_.store(may, std::memory_order_release);
}

bool Cycle::runs_without_mpi(Phase phase) const {
  if (!drivable_.load(std::memory_order_relaxed)) return false;
  switch (phase) {
    case Phase::kBegin:
    case Phase::kPoll: return true;  // rounds on the board; the liveness look is left out
    case Phase::kComplete:
      for (const auto& [id, set] : *sets_) {
        if (!set->negotiator->completes_locally()) return false;
      }
      return true;
    case Phase::kExecute:
      for (const auto& [id, set] : *sets_) {
        if (!set->executor->runs_without_mpi(set->negotiator->round().responses)) return false;
      }
      return true;
  }
  return false;
}

// Runs phases until `handle` is done, or a phase needs the background thread, or the peers
// keep a round waiting longer than kTrainerPoll.
Status Cycle::drive(detail::HandleState& handle) {
  const Clock::time_point give_up = Clock::now() + kTrainerPoll;
  int polls = 0;
  while (!handle.done.load(std::memory_order_acquire)) {
    if (!runs_without_mpi(phase_)) return {};
    switch (phase_) {
      case Phase::kBegin: {
        bool stop_asked = false;
        take_queue(&stop_asked);
        // The final round is the background thread's; a cycle with nothing pending would
        // only be an idle round, which is the background thread's too.
        if (stop_asked || !sets_->pending()) return {};
        if (Status s = begin(false); !s.ok()) return s;
        break;
      }
      case Phase::kPoll: {
        // The liveness look may make MPI calls: the background thread's (see negotiator.h).
        StatusOr<bool> done = poll(/*liveness=*/false);
        if (!done.ok()) return done.status();
        if (*done) break;
        if (Clock::now() >= give_up) return {};
        if (++polls > kTrainerSpins) std::this_thread::yield();
        break;
      }
      case Phase::kComplete:
        if (Status s = complete(); !s.ok()) return s;
        break;
      case Phase::kExecute: {
        bool shutdown = false;
        bool productive = false;
        if (Status s = execute(&shutdown, &productive); !s.ok()) return s;
        trainer_cycles_.fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
  }
  return {};
}

// Takes the queue into the sets (accept) and applies the timeline requests; `stop_asked`:
// this rank asked to stop. Returns true if there were entries.
bool Cycle::take_queue(bool* stop_asked) {
  Submissions::Taken taken = submissions_->take(&fresh_);
  *stop_asked = taken.stop_asked;
  // Before the fresh entries: what was submitted after start_timeline returned is recorded.
  observability_->apply(std::move(taken.timeline_requests));
  const bool took = !fresh_.empty();
  sets_->accept(fresh_);
  fresh_.clear();
  return took;
}

}  // namespace chorus
