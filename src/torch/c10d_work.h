#pragma once
// The c10d Work of a Chorus collective, and the threads that complete it.
//
// A collective's TensorHandle is waited for on one of the process group's completion
// threads; then the call's own finishing step runs there (copying a gathered result into the
// caller's list of tensors, say), and the future and the Work complete with the call's
// outputs, or fail with the collective's error. The trainer's threads never finish a Chorus
// handle themselves, so DDP's autograd threads, a communication hook's callbacks and a Python
// thread calling work.wait() all see one completion.

#include <ATen/core/ivalue.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace chorus::torch {

class ChorusWork final : public ::c10d::Work {
 public:
  /// `outputs`: what result() and the future give once the call succeeded.
  ChorusWork(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs);

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  /// c10d's wait (throws the failure; a timeout throws too), then orders the caller's current
  /// streams after the outputs' (a CUDA future's wait does).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  /// Blocks until completed, successfully or not; throws nothing.
  void wait_quietly();

  /// Completes the future, then the work: with the outputs when `error` is null, else failed
  /// with it. Called once, by a completion thread.
  void complete(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The threads that complete a process group's work: each takes the next call, waits for its
// collective, finishes the call and completes its future and Work, whose callbacks run there.
// Such a callback may itself wait for a later call of the group (PowerSGD's hook waits for its
// P and Q allreduces inside its callbacks), so a call never waits for a busy thread: when none
// is idle, one more starts; a thread idle for a second leaves while another stays.
//
// The threads are detached and share the queue's state with this object: the group may be
// dropped on one of its own threads (a callback holding the last reference) or by Python
// holding the GIL, which a completion thread may need to drop a tensor, so joining could
// deadlock. Once this object is gone they complete what was queued and leave. Named
// "chorus-c10d" in debuggers.
class CompletionThreads {
 public:
  /// Blocks until the collective is done, then finishes the call; throws to fail it.
  using Finish = std::function<void()>;

  CompletionThreads();
  ~CompletionThreads();
  CompletionThreads(const CompletionThreads&) = delete;
  CompletionThreads& operator=(const CompletionThreads&) = delete;

  /// Queues `work`, completed once `finish` returns (or failed with what it throws). Any
  /// thread. Unbounded: a trainer cannot have more calls in flight than it has memory for
  /// their tensors.
  void add(c10::intrusive_ptr<ChorusWork> work, Finish finish);

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<c10::intrusive_ptr<ChorusWork>, Finish>> queue;  // guarded by mu
    int idle = 0;                                                         // guarded by mu
    bool stopping = false;                                                // guarded by mu
  };
  static void run(std::shared_ptr<State> state);

  std::shared_ptr<State> state_;
};

}  // namespace chorus::torch
