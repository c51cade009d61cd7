// The host allreduce of whichever world carries the job (MPI's under mpirun, Gloo's under
// chorusrun --gloo or torchrun's variables), through the public API only, so that one program
// measures both: bench/run_world_bench.sh runs it under each launcher in turn and prints the
// ratios. Per size: warm-up calls, then timed repetitions, each of kCalls allreduces one after
// the other (each waited for) started together (a barrier, whose exit skew the calls amortize)
// and timed on the slowest rank (a MAX allreduce of the times, untimed); the median and the
// minimum of the repetitions' time per call are printed, one line per size:
//
//   world=gloo np=2 bytes=1048576 median_us=412.3 min_us=380.1
//
//   world_bench [--reps N] [--sizes 4,65536,...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "chorus/chorus.h"

namespace {

using chorus::TensorRef;

constexpr int kCalls = 10;

void check(const chorus::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "world_bench: rank %d: %s: %s\n", chorus::rank(), what,
               s.to_string().c_str());
  std::exit(1);
}

TensorRef floats(std::vector<float>& v) {
  return TensorRef{v.data(), chorus::DataType::kFloat32, {static_cast<int64_t>(v.size())}};
}

double slowest(double seconds) {
  std::vector<float> t{static_cast<float>(seconds)};
  chorus::AllreduceOptions max;
  max.op = chorus::ReduceOp::kMax;
  check(chorus::allreduce("bench.time", floats(t), floats(t), max).wait(), "the time's MAX");
  return t[0];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  std::vector<int64_t> sizes = {4, 64 << 10, 1 << 20, 16 << 20};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--reps") {
      reps = std::atoi(argv[i + 1]);
    } else if (arg == "--sizes") {
      sizes.clear();
      for (char* p = argv[i + 1]; *p;) {
        sizes.push_back(std::strtoll(p, &p, 10));
        if (*p == ',') ++p;
      }
    }
  }
  check(chorus::init(), "init");
  chorus::AllreduceOptions sum;
  sum.op = chorus::ReduceOp::kSum;
  for (int64_t bytes : sizes) {
    std::vector<float> v(static_cast<std::size_t>(std::max<int64_t>(bytes / 4, 1)), 1.0f);
    const std::string name = "bench." + std::to_string(bytes);
    std::vector<double> times;
    for (int i = 0; i < reps + 5; ++i) {
      std::fill(v.begin(), v.end(), 1.0f);
      check(chorus::barrier().wait(), "barrier");
      const auto start = std::chrono::steady_clock::now();
      for (int call = 0; call < kCalls; ++call) {
        check(chorus::allreduce(name, floats(v), floats(v), sum).wait(), "allreduce");
      }
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kCalls;
      float want = 1;
      for (int call = 0; call < kCalls; ++call) want *= static_cast<float>(chorus::size());
      if (v[0] != want) {
        std::fprintf(stderr, "world_bench: wrong sum %g\n", v[0]);
        return 1;
      }
      const double worst = slowest(took);
      if (i >= 5) times.push_back(worst);
    }
    std::sort(times.begin(), times.end());
    if (chorus::rank() == 0) {
      std::printf("world=%s np=%d bytes=%lld median_us=%.1f min_us=%.1f\n",
                  chorus::controller().c_str(), chorus::size(), static_cast<long long>(bytes),
                  times[times.size() / 2] * 1e6, times.front() * 1e6);
    }
  }
  check(chorus::shutdown(), "shutdown");
  return 0;
}
