// The multi-GPU defects, one case per run, each checked on every rank that must see it:
//
//   gpu_device_defects device_zero   (1 rank, 2 or more GPUs; exits 77 with one;
//                                     CHORUS_TEST_FAIL_COLLECTIVE=defect.zero.abort)
//     A rank bound to its last GPU must make no context on GPU 0. Since CUDA 12, making a
//     device current creates its primary context (hundreds of MB), and a thread that never
//     chose a device reads as device 0. The tensor lives on the last GPU; three steps,
//     each followed by a look at GPU 0's primary context, so that a failure names its step:
//     the set's first GPU collective (the GPU context and the NCCL communicator), an
//     allreduce submitted from a thread that never chose a device (Chorus records the ready
//     event on the tensor's device and gives the thread its device back only where it had a
//     context), and a failed collective, which aborts the communicator on a thread of its
//     own. With 3 or more GPUs, a thread whose current device is GPU 1 must have it back.
//   gpu_device_defects local_setup   (4 ranks on two fake hosts sharing one GPU over NCCL,
//                                     CHORUS_HIERARCHICAL_ALLREDUCE=1, MULTIRANK_BROKEN_HOST=1)
//     The ranks of fake host 1 give NCCL one host id for the GPU they share, which NCCL
//     refuses ("Duplicate GPU"): the hierarchy's local communicator cannot be made on that
//     node alone. Every rank's first allreduce must fail within the bound: host 1's with
//     NCCL's refusal, host 0's naming the local step and ranks 2 and 3, instead of going on
//     to a step host 1 never makes.
//
// Each rank that saw its case behave prints "rank R: CASE ok: ..."; anything else prints
// "CASE FAILED" and exits 1. Exits 77 without a CUDA device. A failed collective stops
// Chorus, so the program ends with _Exit once it has its verdict.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "case_report.h"
#include "chorus/chorus.h"

namespace {

using namespace chorus;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using gpu_cases::fail;
using gpu_cases::has;
using gpu_cases::say;

// Whether `device`'s primary context is active in this process, asked of the driver through
// the runtime (the test links no driver library). -1 where the driver cannot say.
int context_active(int device) {
  using GetDevice = CUresult(CUDAAPI*)(CUdevice*, int);
  using GetState = CUresult(CUDAAPI*)(CUdevice, unsigned int*, int*);
  void* get_device = nullptr;
  void* get_state = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  cudaGetDriverEntryPointByVersion("cuDeviceGet", &get_device, 12000, cudaEnableDefault, &found);
  cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &get_state, 12000,
                                   cudaEnableDefault, &found);
#else
  cudaGetDriverEntryPoint("cuDeviceGet", &get_device, cudaEnableDefault, &found);
  cudaGetDriverEntryPoint("cuDevicePrimaryCtxGetState", &get_state, cudaEnableDefault, &found);
#endif
  CUdevice dev{};
  unsigned int flags = 0;
  int active = 0;
  if (!get_device || !get_state || reinterpret_cast<GetDevice>(get_device)(&dev, device) != 0 ||
      reinterpret_cast<GetState>(get_state)(dev, &flags, &active) != 0) {
    return -1;
  }
  return active;
}

// `count` ones on `device`, made by the calling thread.
TensorRef ones_on(int device, int64_t count) {
  cudaSetDevice(device);
  float* data = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&data), static_cast<std::size_t>(count) * sizeof(float));
  const std::vector<float> ones(static_cast<std::size_t>(count), 1.0f);
  cudaMemcpy(data, ones.data(), ones.size() * sizeof(float), cudaMemcpyHostToDevice);
  return TensorRef{data, DataType::kFloat32, {count}, Device::cuda(device)};
}

// `devices` >= 2 (main() skips otherwise).
int device_zero(int devices) {
  const int me = rank();
  if (size() != 1) return fail(me, "runs on 1 rank");
  // Where GPU 0 got a context, by the step just run; empty while it has none.
  auto zero_after = [](const char* step) -> std::string {
    const int active = context_active(0);
    if (active == 0) return {};
    if (active < 0) return "the driver cannot say whether GPU 0 has a context";
    return std::string("GPU 0 has a context after ") + step;
  };
  if (std::string why = zero_after("init() (before any collective)"); !why.empty())
    return fail(me, why);
  const int target = devices - 1;
  // Submitted with its own ready event: only the set-up runs on the tensor's device.
  TensorRef x = ones_on(target, 1 << 16);
  cudaEvent_t ready = nullptr;
  cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  cudaEventRecord(ready, nullptr);
  x.ready_event = ready;
  if (Status s = allreduce("defect.zero.setup", x, x, {ReduceOp::kSum}).wait(60s); !s.ok())
    return fail(me, "the first allreduce failed: " + s.to_string());
  if (std::string why = zero_after("the GPU context's and NCCL's set-up"); !why.empty())
    return fail(me, why);
  x.ready_event = nullptr;  // from here Chorus records one, on the submitting thread
  Status fresh;
  std::thread([&] {
    fresh = allreduce("defect.zero.fresh", x, x, {ReduceOp::kSum}).wait(60s);
  }).join();
  if (!fresh.ok()) return fail(me, "the allreduce from a new thread failed: " + fresh.to_string());
  if (std::string why = zero_after("an allreduce from a thread that never chose a device");
      !why.empty())
    return fail(me, why);
  std::string kept = "skipped (needs 3 GPUs)";
  if (devices >= 3) {
    int before = -1, after = -1;
    Status s;
    std::thread([&] {
      cudaSetDevice(1);
      cudaFree(nullptr);  // GPU 1's context, current on this thread
      cudaGetDevice(&before);
      s = allreduce("defect.zero.kept", x, x, {ReduceOp::kSum}).wait(60s);
      cudaGetDevice(&after);
    }).join();
    if (!s.ok()) return fail(me, "the allreduce from GPU 1's thread failed: " + s.to_string());
    if (before != 1 || after != 1) {
      return fail(me, "a thread on GPU 1 was left on GPU " + std::to_string(after) +
                          " by an allreduce of a tensor on GPU " + std::to_string(target));
    }
    kept = "kept";
  }
  const Status aborted = allreduce("defect.zero.abort", x, x, {ReduceOp::kSum}).wait(60s);
  if (aborted.ok() || !has(aborted, "CHORUS_TEST_FAIL_COLLECTIVE"))
    return fail(me, "expected the injected failure, got " + aborted.to_string());
  if (std::string why = zero_after("the failed collective's NCCL abort"); !why.empty())
    return fail(me, why);
  say(me, "device_zero ok: no context on GPU 0 with the tensor on GPU " + std::to_string(target) +
              " after the set-up, a new thread's allreduce and the abort; GPU 1's thread " + kept);
  return 0;
}

int local_setup() {
  const int me = rank();
  if (size() != 4) return fail(me, "runs on 4 ranks, two fake hosts of 2");
  TensorRef x = ones_on(0, 1 << 16);
  const Clock::time_point start = Clock::now();
  const Status s = allreduce("defect.local", x, x, {ReduceOp::kSum}).wait(90s);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  if (s.ok() || s.code() == StatusCode::kTimedOut)
    return fail(me, "expected the local communicator's failure, got " + s.to_string());
  // Host 1 (ranks 2 and 3) has NCCL's own refusal; host 0 learns it from the agreement.
  const std::vector<std::string> parts =
      me >= 2
          ? std::vector<std::string>{"allreduce 'defect.local'", "ncclCommInitRank"}
          : std::vector<std::string>{"allreduce 'defect.local'", "global/local", "rank(s) 2, 3"};
  for (const std::string& part : parts) {
    if (!has(s, part)) return fail(me, "the failure does not name " + part + ": " + s.to_string());
  }
  say(me, "local_setup ok after " + std::to_string(took) + " s: " + s.to_string());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  const std::string which = argc > 1 ? argv[1] : "";
  if (which == "device_zero" && devices < 2) {
    std::printf("SKIPPED: device_zero needs two GPUs (this machine lists %d)\n", devices);
    return 77;
  }
  if (Status s = init(); !s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.to_string().c_str());
    return 2;
  }
  int rc = 2;
  if (which == "device_zero")
    rc = device_zero(devices);
  else if (which == "local_setup")
    rc = local_setup();
  else
    std::fprintf(stderr, "unknown case '%s'\n", which.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(rc);
}
