// An output that Chorus allocates (allgather here) may be a block that the trainer just
// freed while its kernels still read and write it: the caching allocator hands a block back
// at once to the next allocation for the same stream. Chorus must write such an output only
// after those kernels. Rank 1 submits late, so rank 0's output is allocated after rank 0's
// trainer has queued, behind a 2 s host function on its current stream, a read of a tensor
// (clone) and a write to it (fill), and freed it. On rank 0 the clone must hold the tensor's
// own values, and the output the gathered ones: rank 0 then prints "rank 0: output_order
// ok", else "CASE FAILED". Where the output did not reuse the freed block the case proves
// nothing: rank 0 exits 77 (skipped) as inconclusive.
//
// Runs on 2 ranks (one GPU shared: the MPI path; the ordering is the same on NCCL). Exits 77
// where no CUDA device is or where this LibTorch has no CUDA.
#include <cuda_runtime_api.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#if CHORUS_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "chorus/torch.h"

namespace {

using ::torch::Tensor;

int fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: CASE FAILED: %s\n", chorus::rank(), what.c_str());
  return 1;
}

#if CHORUS_TORCH_CUDA
// Blocks `stream` for `ms` milliseconds, standing in for a long kernel.
void stall(cudaStream_t stream, int ms) {
  cudaLaunchHostFunc(
      stream,
      [](void* p) {
        std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<intptr_t>(p)));
      },
      reinterpret_cast<void*>(static_cast<intptr_t>(ms)));
}

int output_order() {
  namespace ct = chorus::torch;
  if (chorus::size() != 2) return fail("runs on 2 ranks");
  const ::torch::Device gpu(
      ::torch::kCUDA,
      static_cast<c10::DeviceIndex>(chorus::local_rank() % ::torch::cuda::device_count()));
  const auto on_gpu = ::torch::TensorOptions().device(gpu).dtype(::torch::kFloat32);
  // 3 MiB outputs: a block size of their own in the allocator's large pool.
  const int64_t rows = 3 << 17;
  Tensor input = ::torch::full({rows}, chorus::rank() + 1.0, on_gpu);
  if (chorus::rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ct::allgather(input, "defect.output_order");
    return 0;  // rank 1 only makes the response late
  }
  Tensor freed = ::torch::full({2 * rows}, 5.0, on_gpu);
  ::torch::cuda::synchronize();
  // The submit records the input's ready event now: it does not cover what follows.
  ct::TensorHandle h = ct::allgather_async(input, "defect.output_order");
  const void* block = freed.data_ptr();
  stall(c10::cuda::getCurrentCUDAStream(gpu.index()).stream(), 2000);
  Tensor copy = freed.clone();  // reads the block after the stall
  freed.fill_(-1.0);            // writes it after the stall
  freed = Tensor();             // back to the allocator with both still queued
  Tensor out = h.wait();
  if (out.data_ptr() != block) {
    std::printf("SKIPPED: inconclusive: the output did not reuse the freed block\n");
    return 77;
  }
  const Tensor want = ::torch::cat({::torch::full({rows}, 1.0), ::torch::full({rows}, 2.0)});
  if (!::torch::equal(copy.cpu(), ::torch::full({2 * rows}, 5.0))) {
    return fail(
        "the trainer's clone read Chorus's output: Chorus wrote the block before the "
        "clone ran");
  }
  if (!::torch::equal(out.cpu(), want)) {
    return fail(
        "the output holds the trainer's fill: Chorus wrote the block before the fill "
        "ran");
  }
  std::fprintf(stderr, "rank 0: output_order ok: the output reused the freed block\n");
  return 0;
}
#else
int output_order() {
  return fail(
      "this LibTorch runs CUDA tensors, but CMake did not find CUDA in it "
      "(CHORUS_TORCH_CUDA)");
}
#endif

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  if (!torch::cuda::is_available()) {
    std::printf("SKIPPED: %d CUDA device(s), but this LibTorch was built without CUDA\n", devices);
    return 77;
  }
  if (chorus::Status s = chorus::init(); !s.ok()) return fail("init: " + s.to_string());
  int rc = 0;
  try {
    rc = output_order();
  } catch (const std::exception& e) {
    rc = fail(e.what());
  }
  if (chorus::Status s = chorus::shutdown(); !s.ok() && rc == 0) rc = fail(s.to_string());
  return rc;
}
