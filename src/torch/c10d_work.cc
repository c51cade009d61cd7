#include "torch/c10d_work.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

namespace chorus::torch {
namespace {

// The CUDA devices the outputs live on: a future that holds CUDA tensors must name them, so
// that its waiters' streams are ordered after the completion.
std::vector<c10::Device> cuda_devices(const std::vector<at::Tensor>& outputs) {
  std::vector<c10::Device> devices;
  for (const at::Tensor& t : outputs) {
    if (t.is_cuda() && std::find(devices.begin(), devices.end(), t.device()) == devices.end())
      devices.push_back(t.device());
  }
  return devices;
}

constexpr auto kIdleExit = std::chrono::seconds(1);

}  // namespace

ChorusWork::ChorusWork(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs)
    : ::c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), cuda_devices(outputs_))) {}

bool ChorusWork::wait(std::chrono::milliseconds timeout) {
  const bool done = ::c10d::Work::wait(timeout);
  future_->wait();
  return done;
}

void ChorusWork::wait_quietly() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return completed_; });
}

void ChorusWork::complete(std::exception_ptr error) {
  try {
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  } catch (...) {
    finish(error);  // a callback threw: the work is complete all the same
    throw;
  }
  finish(error);
}

CompletionThreads::CompletionThreads() : state_(std::make_shared<State>()) {}

CompletionThreads::~CompletionThreads() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_all();
}

void CompletionThreads::add(c10::intrusive_ptr<ChorusWork> work, Finish finish) {
  bool start = false;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->queue.emplace_back(std::move(work), std::move(finish));
    if (state_->idle < static_cast<int>(state_->queue.size())) {
      ++state_->idle;  // counted idle until it takes a call
      start = true;
    }
  }
  if (start) {
    std::thread(run, state_).detach();
  } else {
    state_->cv.notify_one();
  }
}

void CompletionThreads::run(std::shared_ptr<State> state) {
  pthread_setname_np(pthread_self(), "chorus-c10d");
  for (;;) {
    std::pair<c10::intrusive_ptr<ChorusWork>, Finish> next;
    {
      std::unique_lock<std::mutex> lock(state->mu);
      const bool woken = state->cv.wait_for(
          lock, kIdleExit, [&] { return state->stopping || !state->queue.empty(); });
      // Leave when stopped with nothing left, or idle while another thread is too.
      if (state->queue.empty() && (state->stopping || (!woken && state->idle > 1))) {
        --state->idle;
        return;
      }
      if (state->queue.empty()) continue;
      next = std::move(state->queue.front());
      state->queue.pop_front();
      --state->idle;
    }
    std::exception_ptr error;
    try {
      next.second();
    } catch (...) {
      error = std::current_exception();
    }
    next.second = nullptr;  // the call's tensors go before its completion is seen
    try {
      next.first->complete(error);
    } catch (const std::exception& e) {
      // A future's callback threw; the work is complete, and the thread must go on.
      std::fprintf(stderr, "chorus process group: a callback of a completed call threw: %s\n",
                   e.what());
    }
    next.first.reset();
    std::lock_guard<std::mutex> lock(state->mu);
    ++state->idle;
  }
}

}  // namespace chorus::torch
