#pragma once
// What a Handle points at. Written by the thread that runs the cycle (core/cycle.h), read
// by trainer threads: the fields other than `done` and `driver` are written before `done`
// is set (release) and read after it is seen (acquire); `driver` is set before the handle
// is submitted.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "chorus/status.h"
#include "chorus/types.h"

namespace chorus::detail {

struct HandleState;

/// Lets a thread that waits for a handle do the runtime's work itself (core/cycle.h).
class Driver {
 public:
  /// Runs the runtime's pending work on the calling thread while it may (it never makes an
  /// MPI call there): until `handle` is done, or the work needs the background thread, or
  /// peers keep it waiting; returns at once if another thread is at it. For a wait without
  /// a timeout: the work it runs may take as long as the collective.
  virtual void drive(HandleState& handle) = 0;
  /// The calling thread looks at a handle without running the work (poll, a wait with a
  /// timeout): the background thread must do it, and is woken if it may be asleep.
  virtual void wake() = 0;
  /// A thread that was blocked on a handle from `since` is free again (the timeline's
  /// trainer row, timeline/trainer_marks.h).
  virtual void waited(std::chrono::steady_clock::time_point since) = 0;

 protected:
  ~Driver() = default;
};

struct HandleState {
  /// `parts`: entries that must finish before the handle completes (a grouped allreduce
  /// has one per tensor).
  explicit HandleState(int parts) : remaining(parts) {}
  /// A failed handle that never reaches the background thread: the call was refused.
  static std::shared_ptr<HandleState> failed(Status status);

  /// One part finished (the thread that runs the cycle). The first failure wins; the handle
  /// completes when the last part finishes.
  void finish(const Status& part);
  /// Output storage that lives as long as the handle, as output `index`.
  TensorRef allocate_output(std::size_t index, DataType dtype, const std::vector<int64_t>& shape);
  /// Records output `index` (a group's member i is output i; members finish in any order).
  void set_output(std::size_t index, const TensorRef& t);

  std::weak_ptr<Driver>
      driver;  ///< the runtime's cycle driver (core/cycle_driver.h); set before submit
  std::atomic<bool> done{false};
  std::mutex mu;
  std::condition_variable cv;
  int remaining;
  Status status;
  std::vector<TensorRef> outputs;
  std::vector<std::unique_ptr<char[]>> storage;
  std::vector<int64_t> received_splits;
  int value = -1;        ///< the op's integer result: join's last joined rank, add_process_set's id
  bool refused = false;  ///< made by failed(); never changes
};

}  // namespace chorus::detail
