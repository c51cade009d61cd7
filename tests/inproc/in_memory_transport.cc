#include "in_memory_transport.h"

namespace chorus::testing {

Hub::Hub(int size, std::chrono::milliseconds timeout) : size_(size), timeout_(timeout) {}

int64_t Hub::and_rounds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return and_count_;
}

int64_t Hub::gathers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gather_count_;
}

int64_t Hub::broadcasts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broadcast_count_;
}

void Hub::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (abort_reason_.empty()) abort_reason_ = why.empty() ? "aborted" : why;
  }
  cv_.notify_all();
}

bool Hub::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !abort_reason_.empty();
}

template <class Pred>
bool Hub::wait(std::unique_lock<std::mutex>& lock, Pred ready) {
  const bool ok = cv_.wait_for(lock, timeout_, [&] { return ready() || !abort_reason_.empty(); });
  return ok && abort_reason_.empty();
}

Status InMemoryTransport::start_and(std::vector<uint64_t>* bits) {
  if (in_flight_) {
    return failed_precondition("in-memory transport: rank " + std::to_string(rank_) +
                               " started an AND while its previous one is in flight");
  }
  {
    std::lock_guard<std::mutex> lock(hub_->mu_);
    if (!hub_->abort_reason_.empty()) return internal_error("hub aborted: " + hub_->abort_reason_);
    Hub::AndRound& round = hub_->ands_[and_gen_];
    if (round.arrived == 0) {
      round.acc = *bits;
    } else if (round.acc.size() != bits->size()) {
      round.error = "AND round " + std::to_string(and_gen_) + ": rank " + std::to_string(rank_) +
                    " passed " + std::to_string(bits->size()) + " words, an earlier rank " +
                    std::to_string(round.acc.size());
    } else {
      for (std::size_t i = 0; i < bits->size(); ++i) round.acc[i] &= (*bits)[i];
    }
    if (++round.arrived == hub_->size_) ++hub_->and_count_;
  }
  in_flight_ = bits;
  return {};
}

StatusOr<bool> InMemoryTransport::test_and() {
  if (!in_flight_) {
    return failed_precondition("in-memory transport: test_and() without start_and()");
  }
  std::lock_guard<std::mutex> lock(hub_->mu_);
  if (!hub_->abort_reason_.empty()) return internal_error("hub aborted: " + hub_->abort_reason_);
  auto it = hub_->ands_.find(and_gen_);
  Hub::AndRound& round = it->second;
  if (round.arrived < hub_->size_) return false;
  std::string error = round.error;
  if (error.empty()) *in_flight_ = round.acc;
  if (++round.consumed == hub_->size_) hub_->ands_.erase(it);
  ++and_gen_;
  in_flight_ = nullptr;
  if (!error.empty()) return internal_error(error);
  return true;
}

StatusOr<std::vector<std::string>> InMemoryTransport::gather(const std::string& mine) {
  std::unique_lock<std::mutex> lock(hub_->mu_);
  const uint64_t gen = gather_gen_++;
  Hub::GatherRound& round = hub_->gathers_[gen];
  if (round.messages.empty()) {
    round.messages.resize(hub_->size_);
    round.left = hub_->size_;
  }
  round.messages[rank_] = mine;
  if (++round.arrived == hub_->size_) {
    ++hub_->gather_count_;
    hub_->cv_.notify_all();
  }
  if (!hub_->wait(lock, [&] { return round.arrived == hub_->size_; })) {
    std::string why = "rank " + std::to_string(rank_) + ": gather " + std::to_string(gen) +
                      " incomplete (" + std::to_string(round.arrived) + " of " +
                      std::to_string(hub_->size_) + " ranks)";
    if (hub_->abort_reason_.empty()) hub_->abort_reason_ = why;
    hub_->cv_.notify_all();
    return internal_error(why + "; hub: " + hub_->abort_reason_);
  }
  std::vector<std::string> out;
  if (rank_ == 0) out = round.messages;
  if (--round.left == 0) hub_->gathers_.erase(gen);
  return out;
}

Status InMemoryTransport::broadcast(std::string* data) {
  std::unique_lock<std::mutex> lock(hub_->mu_);
  const uint64_t gen = broadcast_gen_++;
  Hub::BroadcastRound& round = hub_->broadcasts_[gen];
  if (round.left == 0 && !round.posted) round.left = hub_->size_;
  if (rank_ == 0) {
    round.data = *data;
    round.posted = true;
    ++hub_->broadcast_count_;
    hub_->cv_.notify_all();
  } else if (!hub_->wait(lock, [&] { return round.posted; })) {
    std::string why = "rank " + std::to_string(rank_) + ": broadcast " + std::to_string(gen) +
                      " never posted by rank 0";
    if (hub_->abort_reason_.empty()) hub_->abort_reason_ = why;
    hub_->cv_.notify_all();
    return internal_error(why + "; hub: " + hub_->abort_reason_);
  } else {
    *data = round.data;
  }
  if (--round.left == 0) hub_->broadcasts_.erase(gen);
  return {};
}

}  // namespace chorus::testing
