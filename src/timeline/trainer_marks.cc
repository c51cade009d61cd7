#include "timeline/trainer_marks.h"

#include <string>
#include <utility>

namespace chorus {

void TrainerMarks::set(std::shared_ptr<Timeline> timeline) {
  MutexLock lock(mu_);
  active_.store(timeline != nullptr, std::memory_order_relaxed);
  timeline_ = std::move(timeline);
  last_step_ = Clock::now();
}

void TrainerMarks::waited(Clock::time_point since) {
  if (!active_.load(std::memory_order_relaxed)) return;
  const Clock::time_point now = Clock::now();
  std::shared_ptr<Timeline> timeline;
  {
    MutexLock lock(mu_);
    timeline = timeline_;
  }
  if (timeline) timeline->record_trainer(TimelinePhase::kWait, since, now);
}

void TrainerMarks::step() {
  const int64_t step = steps_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!active_.load(std::memory_order_relaxed)) return;
  const Clock::time_point now = Clock::now();
  std::shared_ptr<Timeline> timeline;
  Clock::time_point begin;
  {
    MutexLock lock(mu_);
    timeline = timeline_;
    begin = std::exchange(last_step_, now);
  }
  if (timeline) {
    timeline->record_trainer(TimelinePhase::kStep, begin, now, "step " + std::to_string(step));
  }
}

}  // namespace chorus
