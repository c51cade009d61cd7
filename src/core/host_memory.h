#pragma once
// Host tensors for the executor (core/tensor_memory.h): the set's host backend, the fusion
// buffer, and scratch, all reused from batch to batch. Each step is done when it returns.

#include <cstddef>
#include <vector>

#include "core/tensor_memory.h"
#include "fusion/fusion_buffer.h"
#include "kernels/host_buffer.h"

namespace chorus {

class HostMemory final : public TensorMemory {
 public:
  HostMemory(Backend* backend, std::size_t fusion_threshold)
      : backend_(backend), fusion_(fusion_threshold) {}

  Backend& backend() override { return *backend_; }
  /// The backend's allreduce makes no MPI call (Backend::allreduce_without_mpi).
  bool allreduce_without_mpi() const { return backend_->allreduce_without_mpi(); }
  Status wait_ready(const Entry&) override { return {}; }
  Status wait_allocated(const TensorRef&) override { return {}; }
  Status copy(const std::vector<gpu::CopyItem>& items, DataType dtype,
              kernels::Scale scale) override;
  Status zero(void* dst, std::size_t bytes) override;
  StatusOr<char*> zeros(std::size_t bytes) override;
  StatusOr<char*> scratch(std::size_t bytes) override { return scratch_.get(bytes); }
  char* fusion_buffer() override { return fusion_.get(fusion_.capacity()); }
  std::size_t fusion_capacity() const override { return fusion_.capacity(); }
  std::size_t fusion_alignment(std::size_t element) const override { return element; }
  bool scales_on_unpack() const override { return false; }
  bool timed_on_host() const override { return true; }
  DeferredBatches* deferred() override { return nullptr; }

 private:
  Backend* backend_;
  FusionBuffer fusion_;
  HostBuffer zeros_;    // a joined rank's contribution
  HostBuffer scratch_;  // prescaled inputs, fused grouped members, outputs that failed
};

}  // namespace chorus
