#pragma once
// Host tensors for the executor (core/tensor_memory.h): the set's host backends and the
// choice among them, the fusion buffer, and scratch, all reused from batch to batch. Each
// step is done when it returns.

#include <cstddef>
#include <utility>
#include <vector>

#include "collectives/backend_choice.h"
#include "core/tensor_memory.h"
#include "fusion/fusion_buffer.h"
#include "kernels/host_buffer.h"

namespace chorus {

class HostMemory final : public TensorMemory {
 public:
  HostMemory(BackendChoice backends, std::size_t fusion_threshold)
      : backends_(std::move(backends)), fusion_(fusion_threshold) {}

  Backend& backend(Collective c, DataType dtype) override { return backends_.pick(c, dtype); }
  BackendChoice& backends() { return backends_; }
  const BackendChoice& backends() const { return backends_; }
  Status wait_ready(const Entry&) override { return {}; }
  Status wait_allocated(const TensorRef&) override { return {}; }
  Status copy(const std::vector<gpu::CopyItem>& items, DataType dtype,
              kernels::Scale scale) override;
  Status adasum(const void* send, void* recv, const std::vector<AdasumTensor>& tensors,
                DataType dtype, kernels::Scale scale) override {
    return adasum_.allreduce(backends_, send, recv, tensors, dtype, scale);
  }
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
  BackendChoice backends_;
  Adasum adasum_;
  FusionBuffer fusion_;
  HostBuffer zeros_;    // a joined rank's contribution
  HostBuffer scratch_;  // prescaled inputs, fused grouped members, outputs that failed
};

}  // namespace chorus
