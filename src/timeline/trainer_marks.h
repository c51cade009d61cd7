#pragma once
// The trainer row of the timeline: where trainer threads mark the end of each training step
// (DistributedOptimizer, chorus::mark_step) and each time they were blocked on a handle,
// whichever timeline the background thread has active meanwhile. chorus-trace summary
// splits each step into computing, waiting for peers and reducing from these marks.
//
// Thread contract: any thread; set() comes from the thread that changes the timeline.
// Without a timeline, a wait costs one atomic load and a step one atomic increment.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "base/mutex.h"
#include "timeline/timeline.h"

namespace chorus {

class TrainerMarks {
 public:
  using Clock = std::chrono::steady_clock;

  /// The timeline marks go to from now on (null: none); its first step begins now.
  void set(std::shared_ptr<Timeline> timeline);
  /// A trainer thread blocked on a handle from `since` until now: a WAIT event.
  void waited(Clock::time_point since);
  /// A training step ended now: a STEP event from the previous mark, "step N", N counting
  /// this rank's marks since init with a timeline or without, so that ranks that started
  /// their timelines at different steps still number each step alike.
  void step();

 private:
  std::atomic<bool> active_{false};
  std::atomic<int64_t> steps_{0};
  Mutex mu_;
  std::shared_ptr<Timeline> timeline_ CHORUS_GUARDED_BY(mu_);
  Clock::time_point last_step_ CHORUS_GUARDED_BY(mu_);
};

}  // namespace chorus
