#pragma once
// CHORUS_TEST_FAIL_COLLECTIVE, for tests only: a backend whose every call fails, as a failed
// MPI or NCCL call does, standing in for the set's own in the batch that holds the collective
// of that name. The executor queues the batch's device work (ready waits, prescale, packing)
// before the call, so a test sees what a real failure leaves behind.

#include <string>
#include <utility>
#include <vector>

#include "collectives/backend.h"

namespace chorus {

class InjectedFailureBackend final : public Backend {
 public:
  InjectedFailureBackend(const Backend& real, std::string name)
      : real_(real), name_(std::move(name)) {}

  const char* name() const override { return real_.name(); }
  int rank() const override { return real_.rank(); }
  int size() const override { return real_.size(); }
  Status allreduce(const void*, void*, int64_t, DataType, ReduceOp, kernels::Scale) override {
    return failure();
  }
  Status reducescatter(const void*, void*, const std::vector<int64_t>&, DataType, ReduceOp,
                       kernels::Scale) override {
    return failure();
  }
  Status allgatherv(const void*, void*, const std::vector<int64_t>&) override { return failure(); }
  Status broadcast(void*, int64_t, int) override { return failure(); }
  Status alltoallv(const void*, const std::vector<int64_t>&, void*,
                   const std::vector<int64_t>&) override {
    return failure();
  }
  Status barrier() override { return failure(); }

 private:
  Status failure() const {
    return Status(StatusCode::kInternal,
                  "the backend call of '" + name_ + "' failed: CHORUS_TEST_FAIL_COLLECTIVE");
  }

  const Backend& real_;
  std::string name_;
};

}  // namespace chorus
