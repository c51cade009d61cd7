#include "core/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>

#include <atomic>
#include <new>
#include <string>
#include <vector>

#include "base/logging.h"
#include "transport/control_transport.h"

namespace chorus {
namespace {

// Not the private futex operations: the word may live in memory shared between processes.
void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::microseconds timeout) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000) * 1000;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

}  // namespace

Doorbells::Doorbells() = default;

Doorbells::~Doorbells() = default;

Status Doorbells::join_host(ControlTransport& host) {
  const int n = host.size();
  if (n < 2) return {};
  auto init = [n](void* p) {
    for (int i = 0; i < n; ++i) new (static_cast<Slot*>(p) + i) Slot();
  };
  std::string why;
  if (Status s =
          board_.join(host, "doorbells", sizeof(Slot) * static_cast<std::size_t>(n), init, &why);
      !s.ok()) {
    return s;
  }
  if (!board_.mapped()) {
    log().debug("doorbells: no shared board on this host ({}); rounds are polled", why);
    return {};
  }
  slots_ptr_ = static_cast<Slot*>(board_.data());
  slots_ = n;
  self_ = host.rank();
  self().process.set_to_this_process();
  return {};
}

void Doorbells::ring_slot(Slot& slot, uint32_t wake) {
  // A sequentially consistent increment, then the read of `waiting`: together with the
  // waiter's store of `waiting` before the kernel reads the word, one of the two sees the
  // other, so no wake-up is lost.
  slot.seq.fetch_add(1, std::memory_order_seq_cst);
  if (slot.waiting.load(std::memory_order_seq_cst) & wake) futex_wake_all(&slot.seq);
}

void Doorbells::ring() { ring_slot(self(), kOwnWork); }

void Doorbells::ring_round() { ring_slot(self(), kRound); }

void Doorbells::announce(uint64_t cycle) {
  self().cycle.store(cycle, std::memory_order_release);
  for (int i = 0; i < slots_; ++i) {
    if (i != self_) ring_slot(slots_ptr_[i], kPeers);
  }
}

bool Doorbells::peer_ahead(uint64_t cycle) const {
  for (int i = 0; i < slots_; ++i) {
    if (i != self_ && slots_ptr_[i].cycle.load(std::memory_order_acquire) > cycle) return true;
  }
  return false;
}

void Doorbells::publish(uint64_t round, const std::vector<uint64_t>& bits) {
  Mailbox& box = self().rounds[round % 2];
  for (std::size_t i = 0; i < bits.size(); ++i)
    box.words[i].store(bits[i], std::memory_order_relaxed);
  box.round.store(round, std::memory_order_release);
}

bool Doorbells::and_round(uint64_t round, std::vector<uint64_t>* bits) const {
  for (int i = 0; i < slots_; ++i) {
    if (i != self_ &&
        slots_ptr_[i].rounds[round % 2].round.load(std::memory_order_acquire) != round) {
      return false;
    }
  }
  for (int i = 0; i < slots_; ++i) {
    if (i == self_) continue;
    const Mailbox& box = slots_ptr_[i].rounds[round % 2];
    for (std::size_t w = 0; w < bits->size(); ++w) {
      (*bits)[w] &= box.words[w].load(std::memory_order_relaxed);
    }
  }
  return true;
}

bool Doorbells::share_round(uint64_t round, std::size_t words,
                            std::vector<std::vector<uint64_t>>* all) const {
  for (int i = 0; i < slots_; ++i) {
    if (i != self_ &&
        slots_ptr_[i].rounds[round % 2].round.load(std::memory_order_acquire) != round) {
      return false;
    }
  }
  all->assign(static_cast<std::size_t>(slots_), std::vector<uint64_t>(words));
  for (int i = 0; i < slots_; ++i) {
    const Mailbox& box = slots_ptr_[i].rounds[round % 2];
    for (std::size_t w = 0; w < words; ++w)
      (*all)[i][w] = box.words[w].load(std::memory_order_relaxed);
  }
  return true;
}

std::vector<int> Doorbells::behind(uint64_t round) const {
  std::vector<int> ranks;
  for (int i = 0; i < slots_; ++i) {
    if (i != self_ && slots_ptr_[i].rounds[round % 2].round.load(std::memory_order_acquire) < round)
      ranks.push_back(i);
  }
  return ranks;
}

bool Doorbells::wait(uint32_t seen, std::chrono::microseconds timeout, uint32_t wake) {
  Slot& s = self();
  s.waiting.store(wake, std::memory_order_seq_cst);
  if (s.seq.load(std::memory_order_seq_cst) == seen) futex_wait(&s.seq, seen, timeout);
  s.waiting.store(0, std::memory_order_relaxed);
  return s.seq.load(std::memory_order_acquire) != seen;
}

}  // namespace chorus
