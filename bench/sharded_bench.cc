// Sharded data parallelism in LibTorch: step time and the memory each rank holds, the C++
// twin of bench/sharded_bench.py (same MLP, Adam, batches and RESULT line, impl=cpp).
//
//   mpirun -np 4 --bind-to none build/bench/sharded_bench --mode stage2 [--width 2048]
//          [--batch-size 32] [--steps 20] [--warmup 3]
//
// Modes: plain (DistributedOptimizer), buckets (its gradients in 25 MiB buckets), stage1
// and stage2 (ShardedOptimizer).
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "chorus/torch.h"

namespace {

struct Args {
  std::string mode;
  int64_t width = 2048, batch = 32;
  int steps = 20, warmup = 3;
};

bool parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--mode") {
      a->mode = value;
    } else if (flag == "--width") {
      a->width = std::stoll(value);
    } else if (flag == "--batch-size") {
      a->batch = std::stoll(value);
    } else if (flag == "--steps") {
      a->steps = std::stoi(value);
    } else if (flag == "--warmup") {
      a->warmup = std::stoi(value);
    } else {
      return false;
    }
  }
  return a->mode == "plain" || a->mode == "buckets" || a->mode == "stage1" || a->mode == "stage2";
}

int64_t tensor_bytes(const torch::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

int64_t adam_state_bytes(torch::optim::Optimizer& optimizer) {
  int64_t bytes = 0;
  for (const auto& item : optimizer.state()) {
    auto& s = static_cast<torch::optim::AdamParamState&>(*item.second);
    bytes += tensor_bytes(s.exp_avg()) + tensor_bytes(s.exp_avg_sq());
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, &args)) {
    std::cerr << "usage: sharded_bench --mode plain|buckets|stage1|stage2 [--width N] "
                 "[--batch-size N] [--steps N] [--warmup N]\n";
    return 2;
  }
  chorus::init();
  const int rank = chorus::rank(), size = chorus::size();
  const int threads = std::max(
      1, static_cast<int>(std::thread::hardware_concurrency()) / std::max(1, chorus::local_size()));
  torch::set_num_threads(threads);
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(1024, args.width), torch::nn::ReLU(),
                              torch::nn::Linear(args.width, args.width), torch::nn::ReLU(),
                              torch::nn::Linear(args.width, args.width), torch::nn::ReLU(),
                              torch::nn::Linear(args.width, 10));
  int64_t params = 0;
  for (const auto& p : model->parameters()) params += p.numel();
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-4));
  auto named = chorus::torch::named_parameters(*model);
  std::unique_ptr<chorus::torch::DistributedOptimizer> plain;
  std::unique_ptr<chorus::torch::ShardedOptimizer> sharded;
  if (args.mode == "plain" || args.mode == "buckets") {
    chorus::torch::DistributedOptimizerOptions o;
    if (args.mode == "buckets") o.bucket_bytes = int64_t{25} << 20;
    plain = std::make_unique<chorus::torch::DistributedOptimizer>(adam, named, o);
  } else {
    chorus::torch::ShardedOptions o;
    o.stage = args.mode == "stage1" ? 1 : 2;
    sharded = std::make_unique<chorus::torch::ShardedOptimizer>(adam, named, o);
  }
  torch::manual_seed(1000 + rank);
  torch::Tensor x = torch::randn({args.batch, 1024});
  torch::Tensor y = torch::randint(0, 10, {args.batch}, torch::kInt64);
  auto step = [&] {
    if (plain) {
      plain->zero_grad();
    } else {
      sharded->zero_grad();
    }
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    if (plain) {
      plain->step();
    } else {
      sharded->step();
    }
  };
  for (int i = 0; i < args.warmup; ++i) step();
  std::vector<double> times;
  for (int i = 0; i < args.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  int64_t grads = 0;
  if (sharded) {
    grads = sharded->reducer().gradient_bytes();
  } else {
    for (const auto& p : model->parameters()) grads += tensor_bytes(p.grad());
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  torch::Tensor local = torch::tensor({times[times.size() / 2], double(adam_state_bytes(adam)),
                                       double(grads), usage.ru_maxrss / 1024.0},
                                      torch::kFloat64);
  chorus::AllreduceOptions max;
  max.op = chorus::ReduceOp::kMax;
  torch::Tensor worst = chorus::torch::allreduce(local, "bench.worst", max);
  if (rank == 0) {
    std::printf(
        "RESULT impl=cpp mode=%s np=%d width=%lld params=%lld step_ms=%.2f state_mb=%.2f "
        "grad_mb=%.2f peak_rss_mb=%.0f threads=%d\n",
        args.mode.c_str(), size, static_cast<long long>(args.width), static_cast<long long>(params),
        worst[0].item<double>(), worst[1].item<double>() / 1048576,
        worst[2].item<double>() / 1048576, worst[3].item<double>(), threads);
  }
  plain.reset();
  sharded.reset();
  chorus::shutdown();
  return 0;
}
