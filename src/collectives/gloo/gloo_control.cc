#include "collectives/gloo/gloo_control.h"

#include <gloo/transport/unbound_buffer.h>

#include <cstdio>
#include <exception>
#include <utility>

#include "base/logging.h"
#include "collectives/backoff.h"

namespace chorus {
namespace {

// Gloo's slots of the control traffic; the group's data travels on another context.
constexpr uint64_t kAndSlot = 1;
constexpr uint64_t kGatherSlot = 2;
constexpr uint64_t kBroadcastSlot = 3;

}  // namespace

GlooControl::GlooControl(std::shared_ptr<gloo::Context> context, std::vector<int> job_ranks,
                         RollCall roll_call)
    : context_(std::move(context)),
      job_ranks_(std::move(job_ranks)),
      roll_call_(std::move(roll_call)),
      schedule_(context_->rank, context_->size) {
  if (context_->size > 1) thread_ = std::thread(&GlooControl::round_loop, this);
}

GlooControl::~GlooControl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (waiting_on_[0] != nullptr) waiting_on_[0]->abortWaitSend();
    if (waiting_on_[1] != nullptr) waiting_on_[1]->abortWaitRecv();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status GlooControl::start_and(std::vector<uint64_t>* bits) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.empty()) return Status(StatusCode::kAborted, failure_);
  if (context_->size == 1) {
    ++rounds_started_;
    finished_.store(rounds_started_, std::memory_order_release);
    return {};
  }
  bits_ = bits;
  round_bits_ = *bits;
  incoming_.resize(bits->size());
  ++rounds_started_;
  cv_.notify_one();
  return {};
}

// A round whose messages failed (a peer's connection closed) stays unfinished: the negotiator's
// liveness bound then fails it after the roll call, on every member alike, where failing at
// once would have this member name whichever peer it talked to, and the members behind it
// name this one when it leaves. Without a bound it fails at once.
StatusOr<bool> GlooControl::test_and() {
  if (finished_.load(std::memory_order_acquire) == rounds_started_) {
    if (bits_ != nullptr) *bits_ = round_bits_;
    bits_ = nullptr;
    return true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.empty() && liveness_seconds_ <= 0) return Status(StatusCode::kAborted, failure_);
  return false;
}

std::vector<int> GlooControl::missing() const { return schedule_.missing(step_.load()); }

std::string GlooControl::here_key(int member) const {
  return roll_call_.prefix + ".here." + std::to_string(member);
}

void GlooControl::announce() {
  if (!roll_call_.store || announced_) return;
  announced_ = roll_call_.store->set(here_key(rank()), "").ok();
}

void GlooControl::on_round_done(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = std::move(wake);
}

std::vector<int> GlooControl::absent() { return roll_call(missing()); }

std::string GlooControl::exited(const std::vector<int>& ranks) const {
  (void)ranks;
  if (roll_call_.lost_key.empty() || !roll_call_.store) return {};
  StatusOr<bool> set = roll_call_.store->check(roll_call_.lost_key);
  if (!set.ok() || !*set) return {};
  StatusOr<std::string> lost =
      roll_call_.store->get(roll_call_.lost_key, std::chrono::milliseconds(1000));
  return lost.ok() ? *lost : std::string();
}

// Looks for the keys of `late` until each is there or kRollCallGrace has passed: a member
// heard early is heard before it leaves (rank 0, which serves the store, leaves when its own
// roll call ends). Without a store, every one of `late` is named.
std::vector<int> GlooControl::roll_call(std::vector<int> late) {
  if (!roll_call_.store) return late;
  announce();
  const auto deadline = std::chrono::steady_clock::now() + kRollCallGrace;
  while (!late.empty()) {
    bool reachable = true;
    std::erase_if(late, [&](int r) {
      StatusOr<bool> here = roll_call_.store->check(here_key(r));
      reachable = reachable && here.ok();
      return here.ok() && *here;
    });
    if (!reachable) {
      log().warn(
          "rank {}: the roll call cannot be held: the job's store, which rank 0 serves, is "
          "gone; the members not heard are named",
          job_rank(rank()));
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return late;
}

void GlooControl::round_loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || rounds_started_ > rounds_run_; });
      if (stop_) return;
    }
    bool ok = true;
    for (int step = AndSchedule::kFoldIn; ok && step != AndSchedule::kDone;
         step = schedule_.next(step)) {
      step_.store(step);
      ok = run_step(step);
    }
    if (!ok) {  // failure_ says why; step_ stays where the round stopped, for missing()
      if (wake_) wake_();
      return;
    }
    step_.store(AndSchedule::kDone);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++rounds_run_;
      finished_.store(rounds_run_, std::memory_order_release);
    }
    if (wake_) wake_();
  }
}

bool GlooControl::run_step(int step) {
  const AndSchedule& s = schedule_;
  std::vector<uint64_t>& bits = round_bits_;
  if (step == AndSchedule::kFoldIn) {
    if (s.extra()) return exchange(s.fold_partner(), -1, nullptr);
    if (!s.has_extra()) return true;
    if (!exchange(-1, s.fold_partner(), incoming_.data())) return false;
  } else if (step == AndSchedule::kFoldOut) {
    if (s.extra()) return exchange(-1, s.fold_partner(), bits.data());  // the result
    if (s.has_extra()) return exchange(s.fold_partner(), -1, nullptr);
    return true;
  } else {
    const int partner = s.exchange_partner(step);
    if (!exchange(partner, partner, incoming_.data())) return false;
  }
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] &= incoming_[i];
  return true;
}

bool GlooControl::exchange(int send_to, int receive_from, uint64_t* into) {
  const std::size_t bytes = round_bits_.size() * sizeof(uint64_t);
  std::unique_ptr<gloo::transport::UnboundBuffer> out, in;
  std::string why;
  try {
    if (send_to >= 0) {
      out = context_->createUnboundBuffer(round_bits_.data(), bytes);
      out->send(send_to, kAndSlot);
    }
    if (receive_from >= 0) {
      in = context_->createUnboundBuffer(into, bytes);
      in->recv(receive_from, kAndSlot);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return false;
      waiting_on_[0] = out.get();
      waiting_on_[1] = in.get();
    }
    // A day stands for "no bound": the negotiator fails a round that waits past the liveness
    // bound, and the stop aborts these waits.
    const auto day = std::chrono::hours(24);
    const bool done = (!out || out->waitSend(day)) && (!in || in->waitRecv(day));
    std::lock_guard<std::mutex> lock(mu_);
    waiting_on_[0] = waiting_on_[1] = nullptr;
    if (done || stop_) return done;
    why = "a wait was aborted";
  } catch (const std::exception& e) {  // gloo::Exception, or GLOO_ENFORCE's EnforceNotMet
    why = e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  waiting_on_[0] = waiting_on_[1] = nullptr;
  const int peer = send_to >= 0 ? send_to : receive_from;
  failure_ = "rank " + std::to_string(job_rank(rank())) +
             ": the negotiation round failed talking to rank " + std::to_string(job_rank(peer)) +
             " (gloo: " + why + ")";
  log().warn("{}; the members still here are named after CHORUS_LIVENESS_SECONDS", failure_);
  return false;
}

std::chrono::milliseconds GlooControl::bound() const {
  if (liveness_seconds_ <= 0) return std::chrono::hours(24);
  return std::chrono::milliseconds(static_cast<int64_t>(liveness_seconds_ * 1000));
}

// Every message is posted before any is waited for (a Gloo send completes only once its
// receiver has posted), then each gets the time left until one deadline. A wait that fails
// names, after a roll call, the members that did not answer it: a member stuck behind the one
// that is gone looks the same from here as the one that is gone.
Status GlooControl::exchange_all(std::vector<Message>& messages, const char* what) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + bound();
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> buffers;
  std::string why;
  try {
    for (Message& m : messages) {
      buffers.push_back(context_->createUnboundBuffer(m.data, m.bytes));
      if (m.send) {
        buffers.back()->send(m.peer, m.slot);
      } else {
        buffers.back()->recv(m.peer, m.slot);
      }
    }
    for (std::size_t i = 0; i < messages.size() && why.empty(); ++i) {
      const auto left = std::max(std::chrono::milliseconds(1),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     deadline - std::chrono::steady_clock::now()));
      const bool done = messages[i].send ? buffers[i]->waitSend(left) : buffers[i]->waitRecv(left);
      if (!done) why = "aborted";
    }
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (why.empty()) return {};
  std::vector<int> others;
  for (int r = 0; r < size(); ++r) {
    if (r != rank()) others.push_back(r);
  }
  const std::vector<int> gone = roll_call(std::move(others));
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  std::string ranks;
  for (int r : job_ranks(gone)) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return Status(StatusCode::kAborted, "rank " + std::to_string(job_rank(rank())) +
                                          " stopped waiting in the coordinator's " + what +
                                          " after " + secs + " s: ranks [" + ranks +
                                          "] took no part in it (gloo: " + why + ")");
}

// Each member's length, then its bytes (a message of none is not sent).
StatusOr<std::vector<std::string>> GlooControl::gather(const std::string& mine) {
  if (rank() != 0) {
    uint64_t len = mine.size();
    std::vector<Message> out = {{true, 0, kGatherSlot, &len, sizeof len}};
    if (len > 0) out.push_back({true, 0, kGatherSlot, const_cast<char*>(mine.data()), len});
    if (Status s = exchange_all(out, "gather"); !s.ok()) return s;
    return std::vector<std::string>();
  }
  std::vector<uint64_t> lens(static_cast<std::size_t>(size()), 0);
  std::vector<Message> in;
  for (int r = 1; r < size(); ++r)
    in.push_back({false, r, kGatherSlot, &lens[r], sizeof(uint64_t)});
  if (Status s = exchange_all(in, "gather"); !s.ok()) return s;
  std::vector<std::string> all(static_cast<std::size_t>(size()));
  all[0] = mine;
  in.clear();
  for (int r = 1; r < size(); ++r) {
    all[r].resize(lens[r]);
    if (lens[r] > 0) in.push_back({false, r, kGatherSlot, all[r].data(), lens[r]});
  }
  if (Status s = exchange_all(in, "gather"); !s.ok()) return s;
  return all;
}

Status GlooControl::broadcast(std::string* data) {
  uint64_t len = data->size();
  std::vector<Message> first, second;
  for (int r = 1; r < size() && rank() == 0; ++r) {
    first.push_back({true, r, kBroadcastSlot, &len, sizeof len});
    if (len > 0) second.push_back({true, r, kBroadcastSlot, data->data(), len});
  }
  if (rank() != 0) first.push_back({false, 0, kBroadcastSlot, &len, sizeof len});
  if (Status s = exchange_all(first, "broadcast"); !s.ok()) return s;
  if (rank() != 0) {
    data->resize(len);
    if (len > 0) second.push_back({false, 0, kBroadcastSlot, data->data(), len});
  }
  return exchange_all(second, "broadcast");
}

}  // namespace chorus
