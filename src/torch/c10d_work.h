#pragma once
// The c10d Work of a Chorus collective, and the threads that complete it.
//
// A collective's TensorHandle is waited for on one of the process group's completion threads;
// then the call's own finishing step runs there (copying a gathered
// result into the caller's list of tensors, say), and the Work and its future complete with
// the call's outputs, or fail with the collective's error. The trainer's threads never finish
// a Chorus handle themselves, so DDP's autograd threads, a communication hook's callbacks and a
// Python thread calling work.wait() all see one completion.

#include <ATen/core/ivalue.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace chorus::torch {

class ChorusWork final : public ::c10d::Work {
 public:
  /// `outputs`: what result() and the future give once the call succeeded.
  ChorusWork(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs);

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }

  /// Completes the work: with its outputs when `error` is null, else failed with it.
  /// Called once, by the completion thread.
  void complete(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The threads that complete a process group's work: each takes the next call, waits for its
// collective, finishes the call and completes its Work and future, whose callbacks run there.
// Such a callback may itself wait for a later call of the group (PowerSGD's hook waits for its
// P and Q allreduces inside its callbacks), so a call never waits for a busy thread: when none
// is idle, one more starts. There are as many as the most calls that were in flight at once;
// the destructor joins them after everything added is complete (each collective completes or
// fails: Chorus bounds its waits). Named "chorus-c10d" in debuggers.
class CompletionThreads {
 public:
  /// Blocks until the collective is done, then finishes the call; throws to fail it.
  using Finish = std::function<void()>;

  CompletionThreads() = default;
  ~CompletionThreads();
  CompletionThreads(const CompletionThreads&) = delete;
  CompletionThreads& operator=(const CompletionThreads&) = delete;

  /// Queues `work`, completed once `finish` returns (or failed with what it throws). Any
  /// thread. Unbounded: a trainer cannot have more calls in flight than it has memory for
  /// their tensors.
  void add(c10::intrusive_ptr<ChorusWork> work, Finish finish);

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<c10::intrusive_ptr<ChorusWork>, Finish>> queue_;  // guarded by mu_
  int idle_ = 0;                                                         // guarded by mu_
  bool stopping_ = false;                                                // guarded by mu_
  std::vector<std::thread> threads_;                                     // guarded by mu_
};

}  // namespace chorus::torch
