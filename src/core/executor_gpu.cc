// The executor's CUDA memory (core/tensor_memory.h): the set's GPU context, made at its
// first CUDA response. Compiled only with CHORUS_WITH_CUDA.
//
// Per batch: the communication stream waits on every input's ready event (no host wait),
// one batched kernel packs the inputs into the device fusion buffer with the prescale
// folded in, the backend reduces (NCCL enqueues on the stream; MPI stages), one batched
// kernel unpacks with the average and postscale folded in, and the background thread then
// waits for the stream (GpuContext::synchronize: sleeps, polls NCCL's async errors) before
// the handles complete. The trainer's streams are never blocked.

#include <cuda_runtime_api.h>

#include "base/logging.h"
#include "core/executor.h"

namespace chorus {
namespace {

class CudaMemory final : public TensorMemory {
 public:
  explicit CudaMemory(std::unique_ptr<GpuContext> g) : g_(std::move(g)) {}

  Backend& backend() override { return g_->backend(); }
  Status wait_ready(const Entry& e) override { return g_->wait_ready(e.ready_event.get()); }
  Status copy(const std::vector<gpu::CopyItem>& items, DataType dtype,
              kernels::Scale scale) override {
    return g_->copy(items, dtype, scale);
  }
  Status zero(void* dst, std::size_t bytes) override { return g_->zero(dst, bytes); }
  StatusOr<char*> zeros(std::size_t bytes) override { return g_->zeros(bytes); }
  StatusOr<char*> scratch(std::size_t bytes) override { return g_->staging(bytes); }
  char* fusion_buffer() override { return g_->fusion_buffer(); }
  std::size_t fusion_capacity() const override { return g_->fusion_capacity(); }
  // Slots on 16 bytes when the padded batch fits: every tensor after an odd-sized one then
  // keeps the kernel's 16-byte copies (cuda_kernels.cu).
  std::size_t fusion_alignment(std::size_t) const override { return 16; }
  bool scales_on_unpack() const override { return true; }
  bool timed_on_host() const override { return false; }
  Status synchronize(const Response& first, std::size_t tensors) override {
    std::string during = std::string(op_type_name(first.op)) + " '" + first.name + "'";
    if (tensors > 1) during += " and " + std::to_string(tensors - 1) + " more fused tensors";
    return g_->synchronize(during);
  }

 private:
  std::unique_ptr<GpuContext> g_;
};

}  // namespace

StatusOr<TensorMemory*> Executor::device_memory() {
  if (device_) return device_.get();
  // The rank's one GPU (RankDevice): pinned at enqueue by its first CUDA tensor, so a
  // joined rank with no tensor of its own still builds on the GPU it will use.
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) devices = 1;
  const int fallback = gpu_setup_.local_rank % devices;
  const int index = gpu_setup_.device ? gpu_setup_.device->pin(fallback) : fallback;
  StatusOr<std::unique_ptr<GpuContext>> g = GpuContext::create(gpu_setup_, index);
  if (!g.ok()) return g.status();
  log().debug("{}: GPU context on cuda:{} ({})", gpu_setup_.label, index, (*g)->description());
  device_ = std::make_unique<CudaMemory>(std::move(g).value());
  return device_.get();
}

}  // namespace chorus
