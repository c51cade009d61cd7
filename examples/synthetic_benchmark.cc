// Synthetic data-parallel training benchmark of Chorus::torch: a LibTorch trainer whose
// optimizer is wrapped in chorus::torch::DistributedOptimizer, trained on random images so
// that only computation and gradient reduction count. bench/ddp_synthetic.py runs the same
// models under PyTorch DistributedDataParallel (gloo) and prints the same lines, and
// bench/run_torch_bench.sh compares the two.
//
// Each rank trains on its own fixed random batch (seeded by rank) of 3 x 32 x 32 images and
// labels in [0, 10), with SGD (lr 0.01, momentum 0.9) on the cross-entropy loss. Model and
// batch live on the CPU, or with --device cuda on GPU (local rank mod visible devices),
// where every step ends with a device synchronize so that its time includes the GPU's work.
// After --warmup steps, --steps steps are timed. Rank 0 prints images/s per rank and in
// total, the scaling against a 1-rank figure given with --baseline-ips, and the CPU time per
// step of Chorus's background thread ("chorus-bg"), of the trainer's thread and of the
// process.
//
//   mpirun -np 2 --bind-to none ./synthetic_benchmark --model cnn --steps 30 [--device cuda]

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "chorus/torch.h"
#include "synthetic_models.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUsage[] =
    "usage: synthetic_benchmark [--model mlp|cnn] [--batch-size N] [--steps N] [--warmup N]\n"
    "                           [--threads N] [--baseline-ips X] [--device cpu|cuda]\n"
    "  --model mlp|cnn     mlp: 3072-2048-2048-2048-10, 14.7M parameters; cnn: small ResNet,\n"
    "                      4.9M parameters; both on 3x32x32 images (default cnn)\n"
    "  --batch-size N      images per rank per step (default 32)\n"
    "  --steps N           timed steps (default 30)\n"
    "  --warmup N          untimed steps first (default 5)\n"
    "  --threads N         LibTorch intra-op threads per rank (default: the cores this\n"
    "                      process may use divided by the ranks on this host, at least 1)\n"
    "  --baseline-ips X    images/s of this program on 1 rank: prints the scaling\n"
    "  --device cpu|cuda   where model and batch live (default cpu); cuda: GPU local rank\n"
    "                      mod the visible devices\n";

struct Args {
  std::string model = "cnn";
  int64_t batch = 32;
  int steps = 30;
  int warmup = 5;
  int threads = 0;  // 0: the default above
  double baseline_ips = 0;
  std::string device = "cpu";
};

bool parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return false;
    if (i + 1 >= argc) {
      std::cerr << "missing value after " << flag << "\n";
      return false;
    }
    const std::string value = argv[++i];
    char* end = nullptr;
    if (flag == "--model") {
      a->model = value;
      continue;
    }
    if (flag == "--device") {
      if (value != "cpu" && value != "cuda") {
        std::cerr << "--device takes cpu or cuda, got '" << value << "'\n";
        return false;
      }
      a->device = value;
      continue;
    }
    const double number = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0' || number < 0) {
      std::cerr << flag << " needs a non-negative number, got '" << value << "'\n";
      return false;
    }
    if (flag == "--batch-size") {
      a->batch = static_cast<int64_t>(number);
    } else if (flag == "--steps") {
      a->steps = static_cast<int>(number);
    } else if (flag == "--warmup") {
      a->warmup = static_cast<int>(number);
    } else if (flag == "--threads") {
      a->threads = static_cast<int>(number);
    } else if (flag == "--baseline-ips") {
      a->baseline_ips = number;
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return false;
    }
  }
  if (a->batch < 1 || a->steps < 1) {
    std::cerr << "--batch-size and --steps must be at least 1\n";
    return false;
  }
  return true;
}

// CPU time of one thread of this process, in nanoseconds, and how long it waited on a run
// queue for a core. From /proc/self/task/<tid>/schedstat (nanoseconds); where the kernel
// has no schedstat, from the utime and stime of .../stat (clock ticks, wait unknown).
struct ThreadTimes {
  double cpu_ns = 0;
  double wait_ns = 0;
};

ThreadTimes thread_times(long tid) {
  const std::string dir = "/proc/self/task/" + std::to_string(tid);
  ThreadTimes t;
  if (std::ifstream sched(dir + "/schedstat"); sched && (sched >> t.cpu_ns >> t.wait_ns)) {
    return t;
  }
  std::ifstream stat(dir + "/stat");
  std::string line;
  std::getline(stat, line);
  // Fields after the command name, which is in parentheses and may hold spaces: the 14th
  // and 15th fields of the line (utime, stime) are the 12th and 13th after ')'.
  std::istringstream rest(line.substr(line.rfind(')') + 1));
  std::string field;
  double ticks = 0;
  for (int i = 1; i <= 13 && rest >> field; ++i) {
    if (i >= 12) ticks += std::strtod(field.c_str(), nullptr);
  }
  t.cpu_ns = ticks * 1e9 / static_cast<double>(sysconf(_SC_CLK_TCK));
  return t;
}

// The id of this process's thread named `name`, or -1.
long find_thread(const std::string& name) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string n;
    if (std::getline(comm, n) && n == name) return std::stol(task.path().filename().string());
  }
  return -1;
}

double process_cpu_ns() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e9 +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e3;
}

int default_threads() {
  cpu_set_t set;
  int cores = 1;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  return std::max(1, cores / std::max(1, chorus::local_size()));
}

// Sum (or max) of one value per rank, on every rank.
std::vector<double> across_ranks(std::vector<double> values, chorus::ReduceOp op,
                                 const std::string& name) {
  torch::Tensor t = torch::tensor(values, torch::kFloat64);
  chorus::AllreduceOptions o;
  o.op = op;
  chorus::torch::allreduce_(t, name, o);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

int run(const Args& args) {
  const int rank = chorus::rank(), size = chorus::size();
  const int threads = args.threads > 0 ? args.threads : default_threads();
  torch::set_num_threads(threads);

  torch::Device device(torch::kCPU);
  if (args.device == "cuda") {
    const int devices = static_cast<int>(torch::cuda::device_count());
    device =
        torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(chorus::local_rank() % devices));
  }
  // A GPU step's kernels may still run when the host returns: wait for them at step
  // boundaries, so that the clock measures them.
  auto sync_device = [&] {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  };

  // Model and batch are drawn on the CPU and copied, so both devices train the same.
  torch::manual_seed(1);
  std::shared_ptr<examples::SyntheticNet> model = examples::make_synthetic_model(args.model);
  if (!model) {
    std::cerr << "unknown --model '" << args.model << "' (mlp or cnn)\n";
    return 2;
  }
  model->to(device);
  model->train();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  chorus::torch::broadcast_parameters(*model, 0);
  chorus::torch::DistributedOptimizer optimizer(sgd, chorus::torch::named_parameters(*model));

  torch::manual_seed(1000 + rank);
  const torch::Tensor images = torch::randn({args.batch, examples::kImageChannels,
                                             examples::kImageSide, examples::kImageSide})
                                   .to(device);
  const torch::Tensor labels =
      torch::randint(0, examples::kClasses, {args.batch}, torch::kInt64).to(device);

  double wait_ns = 0;  // time step() spent waiting for reductions, timed steps only
  auto train_step = [&](bool timed) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(images), labels);
    loss.backward();
    const Clock::time_point before = Clock::now();
    optimizer.synchronize();
    if (timed) wait_ns += std::chrono::duration<double, std::nano>(Clock::now() - before).count();
    optimizer.step();
    sync_device();
  };

  if (rank == 0) {
    std::printf(
        "model %s: %lld parameters, input %lldx%lldx%lld, batch %lld per rank, SGD lr 0.01 "
        "momentum 0.9\n%d rank(s), %d intra-op thread(s) per rank, %d warmup + %d timed "
        "steps on %s\n",
        args.model.c_str(), static_cast<long long>(examples::parameter_count(*model)),
        static_cast<long long>(examples::kImageChannels),
        static_cast<long long>(examples::kImageSide), static_cast<long long>(examples::kImageSide),
        static_cast<long long>(args.batch), size, threads, args.warmup, args.steps,
        device.str().c_str());
    std::fflush(stdout);
  }
  for (int i = 0; i < args.warmup; ++i) train_step(false);

  const long bg = find_thread("chorus-bg");
  const long self = syscall(SYS_gettid);
  across_ranks({0.0}, chorus::ReduceOp::kSum, "bench.start");  // start together
  const ThreadTimes bg0 = bg > 0 ? thread_times(bg) : ThreadTimes{};
  const ThreadTimes me0 = thread_times(self);
  const double proc0 = process_cpu_ns();
  std::vector<double> step_ms;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < args.steps; ++i) {
    const Clock::time_point t0 = Clock::now();
    train_step(true);
    step_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const ThreadTimes bg1 = bg > 0 ? thread_times(bg) : ThreadTimes{};
  const ThreadTimes me1 = thread_times(self);
  const double proc1 = process_cpu_ns();

  const double per_step = 1e6 * args.steps;  // ns to ms per step
  const std::vector<double> sums = across_ranks(
      {args.batch * args.steps / elapsed, (bg1.cpu_ns - bg0.cpu_ns) / per_step,
       (bg1.wait_ns - bg0.wait_ns) / per_step, (me1.cpu_ns - me0.cpu_ns) / per_step,
       (me1.wait_ns - me0.wait_ns) / per_step, (proc1 - proc0) / per_step, wait_ns / per_step},
      chorus::ReduceOp::kSum, "bench.sums");
  const double slowest = across_ranks({elapsed}, chorus::ReduceOp::kMax, "bench.max")[0];
  if (rank != 0) return 0;

  std::sort(step_ms.begin(), step_ms.end());
  const double total_ips = static_cast<double>(size) * args.batch * args.steps / slowest;
  std::printf("images/s per rank: %.1f, total: %.1f (median step %.1f ms on rank 0)\n",
              total_ips / size, total_ips, step_ms[step_ms.size() / 2]);
  if (args.baseline_ips > 0) {
    std::printf(
        "scaling: %.3fx the 1-rank %.1f images/s; efficiency %.1f%% of %d x 1-rank "
        "(on one host the ranks share the cores the 1-rank run had: there 1.0x is ideal)\n",
        total_ips / args.baseline_ips, args.baseline_ips,
        100.0 * total_ips / (size * args.baseline_ips), size);
  }
  const double n = size;
  std::printf(
      "CPU ms per step, mean over ranks: chorus-bg %.2f (%.2f waiting for a core), trainer "
      "thread %.1f (%.1f waiting), whole process %.1f; step() waited %.2f for reductions\n",
      sums[1] / n, sums[2] / n, sums[3] / n, sums[4] / n, sums[5] / n, sums[6] / n);
  if (bg < 0) std::printf("(no thread named chorus-bg found: its CPU time is not counted)\n");
  std::printf(
      "RESULT impl=chorus model=%s device=%s ranks=%d threads=%d batch=%lld ips_rank=%.2f "
      "ips_total=%.2f bg_cpu_ms=%.3f trainer_cpu_ms=%.2f process_cpu_ms=%.2f sync_wait_ms=%.3f\n",
      args.model.c_str(), args.device.c_str(), size, threads, static_cast<long long>(args.batch),
      total_ips / size, total_ips, sums[1] / n, sums[3] / n, sums[5] / n, sums[6] / n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, &args)) {
    std::cerr << kUsage;
    return 2;
  }
  if (args.device == "cuda" && !torch::cuda::is_available()) {
    std::printf("SKIPPED: no CUDA device (--device cuda; torch::cuda::is_available() is false)\n");
    return 77;
  }
  if (chorus::Status s = chorus::init(); !s.ok()) {
    std::cerr << "chorus::init failed: " << s.to_string() << "\n";
    return 1;
  }
  int rc = 1;
  try {
    rc = run(args);
  } catch (const std::exception& e) {
    std::cerr << "rank " << chorus::rank() << ": " << e.what() << "\n";
  }
  if (chorus::Status s = chorus::shutdown(); !s.ok() && rc == 0) {
    std::cerr << "chorus::shutdown failed: " << s.to_string() << "\n";
    rc = 1;
  }
  return rc;
}
