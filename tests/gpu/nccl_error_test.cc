// NCCL error injection: an allreduce whose "device" pointer is host memory that CUDA does
// not know, so NCCL refuses the call (invalid argument). The failure must reach this
// rank's handles — the bad one and one queued behind it — as a failed Status carrying
// NCCL's message, never a hang. Every rank submits the same bad tensor, so every rank
// checks its own handles and the program fails if any rank's did not fail with NCCL's
// message. Runs with one rank per GPU (NCCL); skips without a GPU.
//
// NCCL checks pointers only when NCCL_CHECK_POINTERS=1 (CTest sets it): without it, an
// in-place allreduce on one rank moves nothing and succeeds. A failed collective leaves MPI
// unfinalized (it may hold requests that never complete), so the launcher's exit code says
// little; CTest looks for this program's verdict line instead.
//
// This exercises NCCL's synchronous refusal. The asynchronous path (an error found by
// ncclCommGetAsyncError while the stream runs, or the synchronize() deadline) cannot be
// provoked through the public API on one GPU: a peer must fail mid-collective, which needs
// two GPUs and a rank that leaves (kill it during an allreduce, then check the others'
// handles fail within the deadline).

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "chorus/chorus.h"

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  if (!chorus::init().ok()) return 2;
  const int me = chorus::rank();
  const int device = chorus::local_rank() % devices;
  std::vector<float> host(1024, 1.0f);  // not device memory, not registered with CUDA
  chorus::TensorRef bad{
      host.data(), chorus::DataType::kFloat32, {1024}, chorus::Device::cuda(device)};
  chorus::Handle h = chorus::allreduce("bad.pointer", bad, bad);
  chorus::Status s = h.wait();
  chorus::Handle after = chorus::allreduce("after.failure", bad, bad);
  chorus::Status s2 = after.wait();
  std::printf("rank %d: %s\nrank %d: after: %s\n", me, s.to_string().c_str(), me,
              s2.to_string().c_str());
  chorus::shutdown();
  const bool named = s.message().find("nccl") != std::string::npos &&
                     s.message().find("invalid argument") != std::string::npos;
  if (s.ok() || s2.ok() || !named) {
    std::printf("rank %d: FAILED: expected both handles to fail with NCCL's message\n", me);
    return 1;
  }
  std::printf("rank %d: error reached the handles\n", me);
  return 0;
}
