// adasum_bench: what Adasum costs beside a sum, in the same run: MPI_Allreduce (sum), Chorus's
// allreduce (sum) and Chorus's Adasum, float32, one tensor per iteration, at several sizes;
// the medians and the ratios Adasum / Chorus sum and Adasum / MPI. Every rank gives Adasum the
// same vector, whose Adasum is itself (parallel vectors average), so that each iteration's
// result is checked exactly, with the full work done (the dot products, the combination).
//
//   mpirun -np N adasum_bench [--reps N]

#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "harness.h"

namespace chorus::bench {
namespace {

int run(int argc, char** argv) {
  int provided = 0;
  mpi_check(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  if (provided < MPI_THREAD_MULTIPLE) die("MPI does not provide MPI_THREAD_MULTIPLE");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int reps = 20;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--reps") reps = std::stoi(argv[++i]);
  }
  chorus_check(chorus::init(), "chorus::init()");
  if (rank == 0) {
    std::printf("adasum_bench: %d ranks, float32, median of %d iterations (the slowest rank's)\n\n",
                size, reps);
    std::printf(
        "| size | MPI_Allreduce sum | Chorus sum | Chorus Adasum | Adasum / Chorus sum "
        "| Adasum / MPI |\n|---|---|---|---|---|---|\n");
  }
  for (int64_t bytes : {16 * kKiB, 256 * kKiB, 4 * kMiB, 32 * kMiB}) {
    const int64_t n = bytes / 4;
    std::vector<float> mpi(n), sum(n), ada(n);
    const float mine = float(rank + 1), total = float(size * (size + 1) / 2);
    const TensorRef sum_ref{sum.data(), DataType::kFloat32, {n}, Device::cpu()};
    const TensorRef ada_ref{ada.data(), DataType::kFloat32, {n}, Device::cpu()};
    AllreduceOptions summing, adasum;
    summing.op = ReduceOp::kSum;
    adasum.op = ReduceOp::kAdasum;
    const std::string tag = std::to_string(bytes);
    std::vector<Method> methods = {
        {"mpi", [&] { std::fill(mpi.begin(), mpi.end(), mine); },
         [&] {
           mpi_check(
               MPI_Allreduce(MPI_IN_PLACE, mpi.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
               "MPI_Allreduce");
         },
         [&] {
           if (mpi[n - 1] != total) die("MPI_Allreduce gave a wrong sum");
         }},
        {"sum", [&] { std::fill(sum.begin(), sum.end(), mine); },
         [&] { chorus_check(allreduce("sum." + tag, sum_ref, sum_ref, summing).wait(), "sum"); },
         [&] {
           if (sum[n - 1] != total) die("Chorus gave a wrong sum");
         }},
        {"adasum",
         [&] {
           for (int64_t i = 0; i < n; ++i) ada[i] = float(i % 7) - 3.0f;
         },
         [&] {
           chorus_check(allreduce("adasum." + tag, ada_ref, ada_ref, adasum).wait(), "adasum");
         },
         [&] {
           if (ada[n - 1] != float((n - 1) % 7) - 3.0f) die("Adasum changed parallel vectors");
         }},
    };
    const std::vector<Result> r = measure(methods, 3, reps);
    if (rank == 0) {
      std::printf("| %s | %s | %s | %s | %.2f | %.2f |\n", fmt_bytes(bytes).c_str(),
                  fmt_time(r[0].median).c_str(), fmt_time(r[1].median).c_str(),
                  fmt_time(r[2].median).c_str(), r[2].median / r[1].median,
                  r[2].median / r[0].median);
    }
  }
  if (rank == 0) std::printf("\nhost load average (1 min) at end: %.2f\n", load_average());
  chorus_check(chorus::shutdown(), "chorus::shutdown()");
  MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace chorus::bench

int main(int argc, char** argv) { return chorus::bench::run(argc, argv); }
