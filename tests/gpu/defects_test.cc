// The GPU path's failure cases, one per run, each checked on every rank that must see it:
//
//   gpu_defects failed_handle   (1 rank; CHORUS_TEST_FAIL_COLLECTIVE=defect.failed)
//     A backend call fails while the batch's prescale kernel, which writes the caller's
//     tensor, is still queued behind the tensor's producer (a 1.5 s host function on the
//     producer's stream). The handle must complete only after that kernel ran: the tensor
//     read at once after wait() returned must equal the tensor once the device is idle.
//   gpu_defects gpu_timeout     (2 ranks sharing the GPU over NCCL; CHORUS_GPU_TIMEOUT_SECONDS=2)
//     After one allreduce that made the communicator, rank 1's input is produced 12 s late, so
//     rank 0's NCCL allreduce waits for it inside NCCL. Both ranks must fail within the
//     timeout (plus the drain), naming the collective, the set's ranks and the setting,
//     instead of waiting for the producer.
//   gpu_defects first_timeout   (the same, without the first allreduce)
//     The late input belongs to the set's first GPU collective, which makes the communicator
//     (and making one may wait for the rank's whole device). Both ranks must fail within the
//     timeout, naming the collective that asked for it and the set's ranks: rank 1 the
//     setting, rank 0 the rank that could not set up.
//   gpu_defects peer_killed     (3 ranks sharing the GPU over NCCL, mpirun --enable-recovery)
//     The last rank is killed while its peers wait for it inside a NCCL allreduce: they must
//     fail, naming the collective and the set's ranks, within the bound.
//
// Each rank that saw its case behave prints "rank R: CASE ok: ..." (the CTest row requires
// the line from every such rank); anything else prints "CASE FAILED" and exits 1. Exits 77
// without a CUDA device. A failed collective stops Chorus, and MPI cannot finalize without
// a dead peer, so the program ends with _Exit once it has its verdict.
#include <cuda_runtime_api.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Blocks `stream` for `ms` milliseconds: a host function the stream runs in order, standing
// in for a producer's long kernel.
void stall(cudaStream_t stream, int ms) {
  auto* wait = new int(ms);
  cudaLaunchHostFunc(
      stream,
      [](void* p) {
        auto* m = static_cast<int*>(p);
        std::this_thread::sleep_for(std::chrono::milliseconds(*m));
        delete m;
      },
      wait);
}

std::vector<float> read(const float* dev, int64_t count, cudaStream_t stream) {
  std::vector<float> out(static_cast<std::size_t>(count));
  cudaMemcpyAsync(out.data(), dev, out.size() * sizeof(float), cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  return out;
}

int device_of_rank() {
  int n = 0;
  cudaGetDeviceCount(&n);
  return local_rank() % n;
}

// A tensor of `count` floats on this rank's GPU, produced on its own non-blocking stream by
// fill(): an upload of ones from pinned memory, queued in the stream's order (after a stall).
struct Produced {
  explicit Produced(int64_t n) : count(n) {
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
    cudaSetDevice(device_of_rank());
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    cudaMalloc(reinterpret_cast<void**>(&data), bytes);
    cudaMemset(data, 0, bytes);
    cudaMallocHost(reinterpret_cast<void**>(&ones), bytes);
    for (int64_t i = 0; i < n; ++i) ones[i] = 1.0f;
    cudaDeviceSynchronize();
  }
  void fill() {
    cudaMemcpyAsync(data, ones, static_cast<std::size_t>(count) * sizeof(float),
                    cudaMemcpyHostToDevice, stream);
  }
  TensorRef ref() {
    TensorRef t{data, DataType::kFloat32, {count}, Device::cuda(device_of_rank())};
    t.ready_stream = stream;
    return t;
  }
  int64_t count;
  float* data = nullptr;
  float* ones = nullptr;  // pinned
  cudaStream_t stream = nullptr;
};

int failed_handle() {
  const int me = rank();
  Produced x(1 << 20);
  stall(x.stream, 1500);
  x.fill();
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  o.prescale = 2.0;  // written into the tensor before the backend call
  const Status s = allreduce("defect.failed", x.ref(), x.ref(), o).wait();
  // Read at once, on a stream of its own that waits for nothing else.
  cudaStream_t reader = nullptr;
  cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking);
  const std::vector<float> at_wait = read(x.data, x.count, reader);
  cudaDeviceSynchronize();
  const std::vector<float> idle = read(x.data, x.count, reader);
  if (s.ok() || !has(s, "CHORUS_TEST_FAIL_COLLECTIVE")) {
    return fail(me, "expected the injected failure, got " + s.to_string());
  }
  if (std::memcmp(at_wait.data(), idle.data(), idle.size() * sizeof(float)) != 0) {
    return fail(me, "the tensor changed after wait() returned: element 0 was " +
                        std::to_string(at_wait[0]) + " at the wait, " + std::to_string(idle[0]) +
                        " once the device was idle (device work outlived the handle)");
  }
  say(me, "failed_handle ok: element 0 is " + std::to_string(idle[0]) + " at the wait and after; " +
              s.to_string());
  return 0;
}

// gpu_timeout (`warm`: the communicator made first) and first_timeout.
int gpu_timeout(bool warm) {
  const int me = rank();
  if (size() != 2) return fail(me, "runs on 2 ranks");
  Produced x(1 << 16);
  if (warm) {
    x.fill();
    const Status made = allreduce("defect.warm", x.ref(), x.ref(), {ReduceOp::kSum}).wait(60s);
    if (!made.ok())
      return fail(me, "the allreduce before the late input failed: " + made.to_string());
  }
  if (me == 1) stall(x.stream, 12000);
  x.fill();
  const Clock::time_point start = Clock::now();
  const Status s = allreduce("defect.timeout", x.ref(), x.ref(), {ReduceOp::kSum}).wait(60s);
  const double took = seconds_since(start);
  if (s.ok() || s.code() == StatusCode::kTimedOut) {
    return fail(me, "expected the GPU timeout to fail the allreduce, got " + s.to_string());
  }
  // Once the communicator exists, each rank sees the timeout itself; before, rank 1 does and
  // rank 0 learns which rank could not set up.
  const char* why = warm || me == 1 ? "CHORUS_GPU_TIMEOUT_SECONDS" : "on rank(s) 1 of the set";
  for (const char* part : {"allreduce 'defect.timeout'", "ranks [0, 1]", why}) {
    if (!has(s, part))
      return fail(me, std::string("the failure does not name ") + part + ": " + s.to_string());
  }
  // Each wait is bounded by the 2 s timeout: the late inputs', the abort's and the drain's;
  // a rank that waited for its producer instead would take its 12 s.
  if (took > 8.0) return fail(me, "failed after " + std::to_string(took) + " s");
  say(me, std::string(warm ? "gpu_timeout" : "first_timeout") + " ok after " +
              std::to_string(took) + " s: " + s.to_string());
  return 0;
}

int peer_killed() {
  const int me = rank();
  const int gone = size() - 1;
  Produced x(1 << 16);
  for (int step = 0; step < 1000; ++step) {
    x.fill();
    if (step == 5 && me == gone) {
      // Its peers' NCCL kernels start and wait for this rank's, which never runs.
      stall(x.stream, 5000);
      Handle h =
          allreduce("defect.killed." + std::to_string(step), x.ref(), x.ref(), {ReduceOp::kSum});
      std::this_thread::sleep_for(500ms);
      say(me, "killing myself inside the collective");
      std::fflush(stderr);
      raise(SIGKILL);
    }
    const Clock::time_point start = Clock::now();
    const Status s =
        allreduce("defect.killed." + std::to_string(step), x.ref(), x.ref(), {ReduceOp::kSum})
            .wait(60s);
    if (s.ok()) continue;
    const std::string ranks = "ranks [0, 1, 2]";
    if (s.code() == StatusCode::kTimedOut || !has(s, "defect.killed.5") || !has(s, ranks)) {
      return fail(me, "expected step 5 to fail naming it and " + ranks + ", got " + s.to_string());
    }
    say(me, "peer_killed ok at step " + std::to_string(step) + " after " +
                std::to_string(seconds_since(start)) + " s: " + s.to_string());
    return 0;
  }
  return fail(me, "the job kept running without the killed rank");
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  const std::string which = argc > 1 ? argv[1] : "";
  if (Status s = init(); !s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.to_string().c_str());
    return 2;
  }
  int rc = 2;
  if (which == "failed_handle")
    rc = failed_handle();
  else if (which == "gpu_timeout" || which == "first_timeout")
    rc = gpu_timeout(which == "gpu_timeout");
  else if (which == "peer_killed")
    rc = peer_killed();
  else
    std::fprintf(stderr, "unknown case '%s'\n", which.c_str());
  std::fflush(stderr);
  std::_Exit(rc);
}
