#pragma once
// Waiting for something that another rank drives, without taking a core from the trainer:
// spin briefly (a peer that is already there answers within microseconds), then sleep
// with a doubling pause up to a cap. Open MPI's own blocking waits spin at full speed,
// which on a machine where the trainer uses every core slows the trainer down.

#include <algorithm>
#include <chrono>
#include <thread>

namespace chorus {

class Backoff {
 public:
  /// `cap`: the longest pause. `eager`: spin first; otherwise start sleeping at once.
  explicit Backoff(std::chrono::microseconds cap, bool eager = true)
      : cap_(cap), spins_(eager ? 0 : kSpins), sleep_(eager ? 0 : 16) {}

  /// Called between two unsuccessful tests of the condition.
  void pause() {
    if (spins_ < kSpins) {
      ++spins_;
      return;
    }
    sleep_ = sleep_.count() == 0 ? std::chrono::microseconds(2) : std::min(sleep_ * 2, cap_);
    std::this_thread::sleep_for(sleep_);
  }

 private:
  static constexpr int kSpins = 100;
  const std::chrono::microseconds cap_;
  int spins_;
  std::chrono::microseconds sleep_;
};

}  // namespace chorus
