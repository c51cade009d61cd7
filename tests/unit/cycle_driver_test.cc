// CycleDriver (src/core/cycle_driver.h) without a world. Where no trainer thread may run the
// cycle (no set runs its rounds on the host's board, as in a job across hosts), every submit
// wakes the background thread at once, a wait leaves the work to it without touching the
// progress lock, and a poll rings nothing more. The other side, trainer threads running
// cycles, runs in inproc.runtime_test (WaitingTrainerRunsCycles) and mpi.waiting_trainers.
#include "core/cycle_driver.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

namespace chorus {
namespace {

struct Parts {
  Mutex progress;
  ProcessSets info;
  Observability observability{{".", 1, nullptr, nullptr}};
  SetTable sets{&info, &observability};
  Submissions submissions;
  Doorbells doorbells;
  CycleDriver driver{&progress,  &sets,          &submissions,
                     &doorbells, &observability, std::chrono::milliseconds(5),
                     nullptr};
};

TEST(CycleDriver, EverySubmitRingsWhereNoTrainerMayDriveTheCycle) {
  Parts p;
  auto handle = std::make_shared<detail::HandleState>(1);
  const uint32_t before = p.doorbells.seq();
  p.driver.submitted(handle.get());
  EXPECT_EQ(p.doorbells.seq(), before + 1) << "the submit did not wake the background thread";
  // The thread waits for that one collective at once: where it may drive, its next submit
  // would be left to its wait; here it may not, so the next submit rings too.
  p.driver.drive(*handle);
  EXPECT_EQ(p.doorbells.seq(), before + 1) << "a wait rang though nothing was owed";
  p.driver.submitted(handle.get());
  EXPECT_EQ(p.doorbells.seq(), before + 2);
  p.driver.wake();
  EXPECT_EQ(p.doorbells.seq(), before + 2) << "a poll rang though the submit had";
  EXPECT_EQ(p.driver.trainer_cycles(), 0u);
}

TEST(CycleDriver, AWaitReturnsWhileAnotherThreadHoldsTheProgressLock) {
  Parts p;
  auto handle = std::make_shared<detail::HandleState>(1);
  p.driver.submitted(handle.get());
  p.progress.lock();
  std::thread waiter([&] { p.driver.drive(*handle); });
  waiter.join();  // a drive() that waited for the lock would never return here
  p.progress.unlock();
  EXPECT_EQ(p.driver.trainer_cycles(), 0u);
}

}  // namespace
}  // namespace chorus
