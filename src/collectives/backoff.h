#pragma once
// Waiting for something that another rank drives, without taking a core from the trainer:
// spin briefly (a peer that is already there answers within microseconds), then sleep
// with a doubling pause up to a cap. Open MPI's own blocking waits spin at full speed,
// which on a machine where the trainer uses every core slows the trainer down.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

namespace chorus {

class Backoff {
 public:
  using micros = std::chrono::microseconds;

  /// `cap`: the longest pause. `eager`: spin first; otherwise start sleeping at once.
  /// Once the pauses add up to `patience`, the longest pause becomes `patient_cap` (when
  /// larger): a wait that long is for a peer busy elsewhere, and waking often for it only
  /// costs CPU.
  explicit Backoff(micros cap, bool eager = true, micros patient_cap = micros(0),
                   micros patience = micros(0))
      : cap_(cap),
        patient_cap_(patient_cap),
        patience_(patience),
        spins_(eager ? 0 : kSpins),
        sleep_(eager ? 0 : 16) {}

  /// Called between two unsuccessful tests of the condition: sleeps for next().
  void pause() {
    const micros d = next();
    if (d.count() > 0) std::this_thread::sleep_for(d);
  }

  /// The pause due now, counted as taken; zero while still spinning. For a caller that
  /// sleeps its own way (Doorbells::wait).
  micros next() {
    if (spins_ < kSpins) {
      ++spins_;
      return micros(0);
    }
    if (patient_cap_ > cap_ && slept_ >= patience_) cap_ = patient_cap_;
    sleep_ = sleep_.count() == 0 ? micros(2) : std::min(sleep_ * 2, cap_);
    slept_ += sleep_;
    return sleep_;
  }

 private:
  static constexpr int kSpins = 100;
  micros cap_;
  const micros patient_cap_;
  const micros patience_;
  int spins_;
  micros sleep_;
  micros slept_{0};
};

/// How long the members whose wait for a peer ran out listen for each other before they name
/// the ones not heard from (the roll call, collectives/mpi/mpi_wait.h). A member whose own wait
/// ran out comes to the next agreement that much after its bound.
inline constexpr auto kRollCallGrace = std::chrono::seconds(5);

/// Until when a wait for a peer that moves `bytes` into or out of this rank polls without
/// pause: as long as the bytes take to cross at a rate well below memory speed, plus a
/// margin for a peer about to arrive. A wait that outlasts it is for a peer still busy
/// elsewhere (often descheduled by its own trainer's threads), and should sleep between
/// tests so as not to take the trainer's core.
inline std::chrono::steady_clock::time_point poll_deadline(int64_t bytes) {
  constexpr auto kMargin = std::chrono::microseconds(200);
  constexpr int64_t kBytesPerMicrosecond = 2000;
  return std::chrono::steady_clock::now() + kMargin +
         std::chrono::microseconds(bytes / kBytesPerMicrosecond);
}

}  // namespace chorus
