#include "chorus/handle.h"

#include <thread>

#include "core/handle_state.h"

namespace chorus {
namespace detail {

std::shared_ptr<HandleState> HandleState::failed(Status status) {
  auto h = std::make_shared<HandleState>(1);
  h->refused = true;
  h->finish(status);
  return h;
}

void HandleState::finish(const Status& part) {
  std::lock_guard<std::mutex> lock(mu);
  if (!part.ok() && status.ok()) status = part;
  if (--remaining > 0) return;
  done.store(true, std::memory_order_release);
  cv.notify_all();
}

TensorRef HandleState::allocate_output(std::size_t index, DataType dtype,
                                       const std::vector<int64_t>& shape) {
  TensorRef t;
  t.dtype = dtype;
  t.shape = shape;
  storage.emplace_back(new char[std::max<std::size_t>(t.num_bytes(), 1)]);
  t.data = storage.back().get();
  set_output(index, t);
  return t;
}

void HandleState::set_output(std::size_t index, const TensorRef& t) {
  if (outputs.size() <= index) outputs.resize(index + 1);
  outputs[index] = t;
}

}  // namespace detail

namespace {
const TensorRef kEmptyTensor{};
const std::vector<int64_t> kNoSplits{};
const Status kNoHandle(StatusCode::kFailedPrecondition, "empty Handle: no collective behind it");
}  // namespace

bool Handle::poll() const {
  if (!state_ || state_->done.load(std::memory_order_acquire)) return true;
  if (std::shared_ptr<detail::Driver> driver = state_->driver.lock()) driver->wake();
  return false;
}

Status Handle::wait(std::chrono::milliseconds timeout) const {
  using Clock = std::chrono::steady_clock;
  if (!state_) return kNoHandle;
  if (state_->done.load(std::memory_order_acquire)) return state_->status;
  const Clock::time_point since = Clock::now();
  // A timeout beyond a century is forever (and would overflow the clock's nanoseconds).
  const bool forever = timeout >= std::chrono::hours(24 * 365 * 100);
  const Clock::time_point until = forever ? Clock::time_point::max() : since + timeout;
  // Held for the whole wait, so the runtime outlives the call to waited(): the last reference
  // may then drop here, on this thread (the runtime's destructor only joins its thread).
  const std::shared_ptr<detail::Driver> driver = state_->driver.lock();
  // The thread was blocked from `since`: the timeline's trainer row shows it.
  auto unblocked = [&](Status s) {
    if (driver) driver->waited(since);
    return s;
  };
  // Doing the work here, when the runtime lets this thread, saves handing it to the
  // background thread and back: two context switches where the cores are all busy. Not
  // under a timeout: the work may take as long as the collective.
  if (driver) {
    if (forever) {
      driver->drive(*state_);
    } else {
      driver->wake();
    }
  }
  // A short spin first: a small collective often completes within microseconds, and a
  // futex sleep plus wake-up would cost more than the collective itself.
  for (int i = 0; i < 200; ++i) {
    if (state_->done.load(std::memory_order_acquire)) return unblocked(state_->status);
    if (i >= 50) std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(state_->mu);
  auto ready = [&] { return state_->done.load(std::memory_order_acquire); };
  if (forever) {
    state_->cv.wait(lock, ready);
  } else if (!state_->cv.wait_until(lock, until, ready)) {
    lock.unlock();
    return unblocked(Status(StatusCode::kTimedOut, "collective still running after " +
                                                       std::to_string(timeout.count()) + " ms"));
  }
  const Status s = state_->status;
  lock.unlock();
  return unblocked(s);
}

Status Handle::status() const {
  if (!state_) return kNoHandle;
  if (!poll()) return failed_precondition("collective still in flight");
  return state_->status;
}

bool Handle::refused() const { return state_ && state_->refused; }

const TensorRef& Handle::output(std::size_t i) const {
  if (!poll() || !state_ || i >= state_->outputs.size()) return kEmptyTensor;
  return state_->outputs[i];
}

const std::vector<int64_t>& Handle::received_splits() const {
  if (!poll() || !state_) return kNoSplits;
  return state_->received_splits;
}

int Handle::last_joined_rank() const { return poll() && state_ ? state_->value : -1; }

ProcessSet Handle::process_set() const { return ProcessSet{poll() && state_ ? state_->value : -1}; }

}  // namespace chorus
