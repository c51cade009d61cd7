// nccl_allreduce_bench: Chorus's allreduce of a CUDA tensor against a raw ncclAllReduce on
// the same device buffer, in the same run, one GPU per rank.
//
// Raw: an in-place ncclAllReduce on a communicator of the program's own (its unique id
// broadcast with MPI_Bcast), enqueued on a stream of the program's and followed by
// cudaStreamSynchronize each iteration, as a trainer that waits for every result would.
// Chorus: chorus::allreduce in place on the same buffer (ready_stream: that same stream),
// waiting on the handle each iteration. Chorus runs with CHORUS_GPU_BACKEND=nccl (set here
// unless the environment sets it), so both sides reduce with NCCL and the difference is
// what Chorus adds: enqueue, negotiation, the stream handoff and the completion wait.
//
// Per size: one untimed round of each (Chorus's first use of a name negotiates through the
// coordinator and creates its NCCL communicator; later ones hit the response cache), then
// rounds that alternate the two, the first of a pair swapping every round. A round is a
// loop of iterations timed as a whole; its figure is the slowest rank's mean per iteration,
// after an MPI_Barrier. The tables give the median over rounds. Before the timed rounds each
// side reduces once from rank-specific values, and every element of the result is checked
// against the exact sum (small integers, exact in float32): a wrong value exits 1.
//
// With --tensors N, an iteration is N allreduces of the size on N slices of the buffer: raw,
// N ncclAllReduce calls then one stream synchronization; Chorus, N handles submitted at once
// (names .0 to .N-1), then every one waited for. Under a small CHORUS_FUSION_THRESHOLD each
// tensor is a batch of its own, and the figure is Chorus's throughput of small batches,
// whose launches overlap the device's work on the ones before (RESULT's batches_per_s).
//
// Run plainly on one rank, or under mpirun with one rank per GPU (device: local rank mod
// device count), or with ranks sharing a GPU under CHORUS_TEST_SHARED_GPU=1 (every rank its
// own NCCL_HOSTID: tests/gpu/multirank_rank.sh). Without a CUDA device it prints "SKIPPED: no
// CUDA device" and exits 77.
//
//   nccl_allreduce_bench [--sizes 4,1M,64M] [--rounds N] [--iters N] [--tensors N]

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "chorus/chorus.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = kKiB * kKiB;
// The size whose ratio the target applies to, and the target.
constexpr int64_t kTargetBytes = 64 * kMiB;
constexpr double kTargetRatio = 0.95;

constexpr char kUsage[] =
    "usage: nccl_allreduce_bench [--sizes LIST] [--rounds N] [--iters N]\n"
    "  --sizes LIST   float32 allreduce sizes in bytes, comma-separated, each a multiple of 4;\n"
    "                 suffixes K, M, G (KiB, MiB, GiB) allowed (default 4,1M,64M)\n"
    "  --rounds N     timed rounds per side and size (default 21)\n"
    "  --iters N      iterations per round (default: 1 GiB / size, between 10 and 200)\n"
    "  --tensors N    allreduces per iteration, each on its own slice (default 1)\n";

struct Args {
  std::vector<int64_t> sizes = {4, kMiB, 64 * kMiB};
  int rounds = 21;
  int iters = 0;  // 0: per size, iterations_for()
  int tensors = 1;
};

// Prints `what` with this rank and aborts every rank: a figure measured after a failed
// call would mean nothing.
[[noreturn]] void die(const std::string& what) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "nccl_allreduce_bench: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

#define BENCH_CUDA(call)                                                                         \
  do {                                                                                           \
    cudaError_t bench_rc_ = (call);                                                              \
    if (bench_rc_ != cudaSuccess) {                                                              \
      die(std::string(#call) + " failed: " + cudaGetErrorString(bench_rc_) + " at " + __FILE__ + \
          ":" + std::to_string(__LINE__));                                                       \
    }                                                                                            \
  } while (0)

#define BENCH_NCCL(call)                                                                    \
  do {                                                                                      \
    ncclResult_t bench_rc_ = (call);                                                        \
    if (bench_rc_ != ncclSuccess) {                                                         \
      die(std::string(#call) + " failed: " + ncclGetErrorString(bench_rc_) + " (" +         \
          ncclGetLastError(nullptr) + ") at " + __FILE__ + ":" + std::to_string(__LINE__)); \
    }                                                                                       \
  } while (0)

void mpi_check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) die(std::string(call) + " failed with code " + std::to_string(rc));
}

void chorus_check(const chorus::Status& s, const char* what) {
  if (!s.ok()) die(std::string(what) + ": " + s.to_string());
}

// "4", "1M", "64MiB", "2K": bytes; -1 when malformed.
int64_t parse_bytes(const std::string& text) {
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || n <= 0) return -1;
  const std::string unit = end;
  if (unit.empty() || unit == "B") return n;
  if (unit == "K" || unit == "KiB") return n * kKiB;
  if (unit == "M" || unit == "MiB") return n * kMiB;
  if (unit == "G" || unit == "GiB") return n * kMiB * kKiB;
  return -1;
}

bool parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const std::string value = argv[++i];
    if (flag == "--sizes") {
      a->sizes.clear();
      std::size_t at = 0;
      while (at <= value.size()) {
        const std::size_t comma = std::min(value.find(',', at), value.size());
        const int64_t bytes = parse_bytes(value.substr(at, comma - at));
        if (bytes <= 0 || bytes % 4 != 0) {
          std::fprintf(stderr, "--sizes: '%s' is not a positive multiple of 4 bytes\n",
                       value.substr(at, comma - at).c_str());
          return false;
        }
        a->sizes.push_back(bytes);
        at = comma + 1;
      }
    } else if (flag == "--rounds" || flag == "--iters" || flag == "--tensors") {
      const int n = std::atoi(value.c_str());
      if (n < 1) return false;
      (flag == "--rounds" ? a->rounds : flag == "--iters" ? a->iters : a->tensors) = n;
    } else {
      return false;
    }
  }
  return true;
}

int iterations_for(int64_t bytes, const Args& args) {
  if (args.iters > 0) return args.iters;
  return static_cast<int>(std::clamp<int64_t>(1024 * kMiB / (bytes * args.tensors), 10, 200));
}

std::string fmt_bytes(int64_t bytes) {
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int device = 0;
};

// Rank r holds (r + 1) * (1 + i % 8) at element i; the sum over n ranks is
// (1 + i % 8) * n(n+1)/2, exact in float32.
std::vector<float> rank_values(int64_t n, const World& w) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((w.rank + 1) * (1 + i % 8));
  return v;
}

// Whether every element of the `tensors` slices of `n` floats holds the expected sum; prints
// the first wrong one. Not collective.
bool holds_sum(const float* dev, int64_t n, int tensors, const World& w, const char* side) {
  std::vector<float> got(n * tensors);
  BENCH_CUDA(cudaMemcpy(got.data(), dev, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const float ranks_sum = static_cast<float>(w.size * (w.size + 1) / 2);
  for (int64_t i = 0; i < n * tensors; ++i) {
    const float want = static_cast<float>(1 + i % n % 8) * ranks_sum;
    if (got[i] != want) {
      std::fprintf(stderr, "rank %d: wrong %s result: element %lld of %lld is %g, expected %g\n",
                   w.rank, side, static_cast<long long>(i), static_cast<long long>(n),
                   static_cast<double>(got[i]), static_cast<double>(want));
      return false;
    }
  }
  return true;
}

// The two sides, on one device buffer as large as the largest size.
struct Sides {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* buffer = nullptr;
  int device = 0;

  int tensors = 1;  // slices of the buffer per iteration
  mutable std::vector<chorus::Handle> handles;

  void raw(int64_t n) const {
    for (int k = 0; k < tensors; ++k) {
      float* slice = buffer + k * n;
      BENCH_NCCL(ncclAllReduce(slice, slice, static_cast<std::size_t>(n), ncclFloat, ncclSum, comm,
                               stream));
    }
    BENCH_CUDA(cudaStreamSynchronize(stream));
  }
  void chorus(int64_t n, const std::string& name) const {
    chorus::TensorRef t;
    t.dtype = chorus::DataType::kFloat32;
    t.shape = {n};
    t.device = chorus::Device::cuda(device);
    t.ready_stream = stream;
    chorus::AllreduceOptions o;
    o.op = chorus::ReduceOp::kSum;
    handles.clear();
    for (int k = 0; k < tensors; ++k) {
      t.data = buffer + k * n;
      handles.push_back(
          chorus::allreduce(tensors == 1 ? name : name + "." + std::to_string(k), t, t, o));
    }
    for (const chorus::Handle& h : handles) chorus_check(h.wait(), "chorus::allreduce");
  }
};

// One round of `iters` iterations of `body`: the slowest rank's mean per iteration, in
// seconds. Collective.
template <class Body>
double round_of(int iters, const Body& body) {
  mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < iters; ++i) body();
  double local = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  double slowest = 0;
  mpi_check(MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
            "MPI_Allreduce(time)");
  return slowest;
}

struct Row {
  int64_t bytes;
  double raw_us;
  double chorus_us;
};

// Checks both sides once, then times them. Returns false (on every rank) when a result
// was wrong on some rank. Collective.
bool bench_size(const Sides& s, const World& w, int64_t bytes, const Args& args, Row* row) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  const std::string name = "nccl_bench." + std::to_string(bytes);
  const std::vector<float> values = rank_values(n, w);
  // On the sides' stream, which does not wait for the legacy default stream.
  auto upload = [&] {
    for (int k = 0; k < s.tensors; ++k) {
      BENCH_CUDA(cudaMemcpyAsync(s.buffer + k * n, values.data(), bytes, cudaMemcpyHostToDevice,
                                 s.stream));
    }
    BENCH_CUDA(cudaStreamSynchronize(s.stream));
  };
  upload();
  s.raw(n);
  bool ok = holds_sum(s.buffer, n, s.tensors, w, "ncclAllReduce");
  upload();
  s.chorus(n, name);
  ok = holds_sum(s.buffer, n, s.tensors, w, "chorus::allreduce") && ok;
  int all_ok = ok ? 1 : 0;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
            "MPI_Allreduce(check)");
  if (!all_ok) return false;

  // Zeros: in-place sums stay zero however many rounds run.
  BENCH_CUDA(cudaMemsetAsync(s.buffer, 0, bytes * s.tensors, s.stream));
  BENCH_CUDA(cudaStreamSynchronize(s.stream));
  const int iters = iterations_for(bytes, args);
  auto raw = [&] { s.raw(n); };
  auto chorus = [&] { s.chorus(n, name); };
  round_of(1, raw);  // warm-up
  round_of(1, chorus);
  std::vector<double> raw_t, chorus_t;
  for (int r = 0; r < args.rounds; ++r) {
    if (r % 2 == 0) {
      raw_t.push_back(round_of(iters, raw));
      chorus_t.push_back(round_of(iters, chorus));
    } else {
      chorus_t.push_back(round_of(iters, chorus));
      raw_t.push_back(round_of(iters, raw));
    }
  }
  *row = {bytes, median(raw_t) * 1e6, median(chorus_t) * 1e6};
  if (w.rank == 0) {
    std::printf("\n%d x %s (%lld float32), %d rounds x %d iterations, medians over rounds\n",
                s.tensors, fmt_bytes(bytes).c_str(), static_cast<long long>(n), args.rounds, iters);
    std::printf(
        "| raw ncclAllReduce µs | chorus::allreduce µs | ratio raw/chorus | overhead µs |\n");
    std::printf("|---:|---:|---:|---:|\n");
    std::printf("| %.1f | %.1f | %.3f | %+.1f |\n", row->raw_us, row->chorus_us,
                row->raw_us / row->chorus_us, row->chorus_us - row->raw_us);
    std::fflush(stdout);
  }
  return true;
}

World find_world() {
  World w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  MPI_Comm local;
  mpi_check(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local),
      "MPI_Comm_split_type");
  MPI_Comm_rank(local, &w.local_rank);
  MPI_Comm_size(local, &w.local_size);
  MPI_Comm_free(&local);
  return w;
}

int run(const Args& args, World w, int devices) {
  // NCCL needs one GPU per rank; say so instead of failing inside ncclCommInitRank. Ranks
  // that share one on purpose (a test of NCCL at n > 1 on one GPU) give their own host ids.
  // Shared means the same GPU (its UUID), so that ranks each shown a GPU of their own
  // (CUDA_VISIBLE_DEVICES) count as one per GPU.
  w.device = w.local_rank % devices;
  BENCH_CUDA(cudaSetDevice(w.device));
  cudaDeviceProp mine{};
  BENCH_CUDA(cudaGetDeviceProperties(&mine, w.device));
  std::vector<char> uuids(static_cast<std::size_t>(w.size) * sizeof mine.uuid);
  mpi_check(MPI_Allgather(&mine.uuid, sizeof mine.uuid, MPI_BYTE, uuids.data(), sizeof mine.uuid,
                          MPI_BYTE, MPI_COMM_WORLD),
            "MPI_Allgather(GPU UUIDs)");
  const char* test_mode = std::getenv("CHORUS_TEST_SHARED_GPU");
  const bool sharing = test_mode && std::string(test_mode) == "1";
  bool shared = false;
  for (int r = 0; r < w.size && !sharing; ++r) {
    shared = shared || (r != w.rank && std::memcmp(&uuids[r * sizeof mine.uuid], &mine.uuid,
                                                   sizeof mine.uuid) == 0);
  }
  int any_shared = shared ? 1 : 0;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &any_shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
            "MPI_Allreduce(layout)");
  if (any_shared) {
    if (w.rank == 0) {
      std::fprintf(stderr,
                   "nccl_allreduce_bench: two ranks share a GPU; NCCL needs one GPU per rank\n");
    }
    return 2;
  }

  // Chorus's GPU path must be NCCL too; a value set by the user wins.
  setenv("CHORUS_GPU_BACKEND", "nccl", 0);
  chorus_check(chorus::init(), "chorus::init");

  Sides s;
  s.device = w.device;
  s.tensors = args.tensors;
  ncclUniqueId id;
  if (w.rank == 0) BENCH_NCCL(ncclGetUniqueId(&id));
  mpi_check(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast(id)");
  BENCH_NCCL(ncclCommInitRank(&s.comm, w.size, id, w.rank));
  BENCH_CUDA(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  const int64_t largest = *std::max_element(args.sizes.begin(), args.sizes.end());
  BENCH_CUDA(cudaMalloc(&s.buffer, largest * args.tensors));

  if (w.rank == 0) {
    int nccl = 0;
    ncclGetVersion(&nccl);
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, w.device);
    std::printf(
        "nccl_allreduce_bench: %d rank(s), %d per host, %s; NCCL %d; "
        "CHORUS_GPU_BACKEND=%s; CHORUS_FUSION_THRESHOLD=%s\n",
        w.size, w.local_size, prop.name, nccl, std::getenv("CHORUS_GPU_BACKEND"),
        std::getenv("CHORUS_FUSION_THRESHOLD") ? std::getenv("CHORUS_FUSION_THRESHOLD") : "auto");
  }
  std::vector<Row> rows;
  bool ok = true;
  for (int64_t bytes : args.sizes) {
    Row row{};
    if (!bench_size(s, w, bytes, args, &row)) {
      ok = false;
      break;
    }
    rows.push_back(row);
  }
  if (w.rank == 0 && ok) {
    std::printf("\n");
    const Row* target = nullptr;
    for (const Row& r : rows) {
      std::printf(
          "RESULT size_bytes=%lld tensors=%d raw_us=%.2f chorus_us=%.2f ratio=%.4f "
          "overhead_us=%.2f batches_per_s=%.0f raw_per_s=%.0f\n",
          static_cast<long long>(r.bytes), args.tensors, r.raw_us, r.chorus_us,
          r.raw_us / r.chorus_us, (r.chorus_us - r.raw_us) / args.tensors,
          args.tensors / r.chorus_us * 1e6, args.tensors / r.raw_us * 1e6);
      if (r.bytes == kTargetBytes) target = &r;
    }
    if (!target) {
      std::printf("target (64 MiB ratio >= %.2f): not measured (64 MiB not in --sizes)\n",
                  kTargetRatio);
    } else {
      const double ratio = target->raw_us / target->chorus_us;
      std::printf("target (64 MiB ratio >= %.2f): %s (ratio %.3f)\n", kTargetRatio,
                  ratio >= kTargetRatio ? "met" : "missed", ratio);
    }
  }
  BENCH_CUDA(cudaStreamSynchronize(s.stream));
  BENCH_NCCL(ncclCommDestroy(s.comm));
  BENCH_CUDA(cudaStreamDestroy(s.stream));
  BENCH_CUDA(cudaFree(s.buffer));
  chorus_check(chorus::shutdown(), "chorus::shutdown");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, &args)) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr,
                 "nccl_allreduce_bench: MPI lacks MPI_THREAD_MULTIPLE, which Chorus "
                 "needs beside the program's own MPI calls\n");
    MPI_Finalize();
    return 2;
  }
  const int rc = run(args, find_world(), devices);
  MPI_Finalize();
  return rc;
}
