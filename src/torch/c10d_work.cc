#include "torch/c10d_work.h"

#include <pthread.h>

#include <algorithm>
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

}  // namespace

ChorusWork::ChorusWork(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs)
    : ::c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), cuda_devices(outputs_))) {}

void ChorusWork::complete(std::exception_ptr error) {
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

CompletionThreads::~CompletionThreads() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  {
    // No call is added any more, so no thread starts; the list can be taken.
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void CompletionThreads::add(c10::intrusive_ptr<ChorusWork> work, Finish finish) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(work), std::move(finish));
    if (idle_ < static_cast<int>(queue_.size())) {
      ++idle_;  // counted idle until it takes a call
      threads_.emplace_back([this] { run(); });
    }
  }
  cv_.notify_one();
}

void CompletionThreads::run() {
  pthread_setname_np(pthread_self(), "chorus-c10d");
  for (;;) {
    std::pair<c10::intrusive_ptr<ChorusWork>, Finish> next;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything added is complete
      next = std::move(queue_.front());
      queue_.pop_front();
      --idle_;
    }
    std::exception_ptr error;
    try {
      next.second();
    } catch (...) {
      error = std::current_exception();
    }
    next.first->complete(error);
    std::lock_guard<std::mutex> lock(mu_);
    ++idle_;
  }
}

}  // namespace chorus::torch
