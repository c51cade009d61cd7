// The cost of an elastic commit (chorus::torch::elastic::State::commit) against the training
// step it interrupts: for MLPs whose state (weights and Adam's two moments) is a few to a
// few hundred MB, the median time the commit holds the training thread (a copy of the state
// in memory, and the question for host updates), per MB of state; with CHORUS_ELASTIC_JOB
// set, also the time until the node's writer thread stored the bytes in /dev/shm (commit,
// then chorus::elastic::flush_commits); next to the median time of a training step
// (forward, backward with DistributedOptimizer's allreduces, Adam) of a batch of 32; then a
// commit's share of the time at one commit per step and per 100 steps.
//
//   CHORUS_ELASTIC_JOB=bench mpirun -np 2 build/bench/commit_bench [--reps N]
//
// Run it with and without CHORUS_ELASTIC_JOB: the difference is what handing the commit to
// the writer costs the training thread. Each commit's write is waited for before the next
// step, so the steps are timed without the writer running beside them. Printed by rank 0;
// every rank takes part.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "chorus/elastic.h"
#include "chorus/torch.h"

namespace {

namespace elastic = chorus::torch::elastic;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run_width(int64_t width, int reps) {
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(width, width), torch::nn::ReLU(),
                              torch::nn::Linear(width, width), torch::nn::ReLU(),
                              torch::nn::Linear(width, 10));
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-4));
  chorus::torch::DistributedOptimizerOptions options;
  options.name_prefix = "w" + std::to_string(width) + ".";  // each model its own names
  chorus::torch::DistributedOptimizer optimizer(adam, chorus::torch::named_parameters(*model),
                                                options);
  int64_t step = 0;
  elastic::State state;
  state.add("model", *model).add("optimizer", adam).add("step", step);
  const torch::Tensor x = torch::randn({32, width});
  const torch::Tensor y = torch::randint(0, 10, {32});
  auto train_step = [&] {
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    optimizer.step();
    ++step;
  };
  train_step();  // Adam's moments exist from the first step on
  std::vector<double> steps, commits, stored;
  for (int r = 0; r < reps; ++r) {
    steps.push_back(seconds(train_step));
    chorus::barrier().wait();
    const double commit_s = seconds([&] { state.commit(); });
    commits.push_back(commit_s);
    stored.push_back(commit_s + seconds([] { chorus::elastic::flush_commits(); }));
  }
  int64_t params = 0;
  for (const torch::Tensor& p : model->parameters()) params += p.numel();
  const double mb = 3.0 * params * 4 / 1e6;  // weights and two moments, float32
  // The next model's commits start again from 1, so this one's go.
  chorus::StatusOr<std::string> dir = chorus::elastic::commit_dir();
  if (dir.ok() && !dir->empty()) chorus::elastic::remove_commits(*dir);
  const double commit_s = median(commits), stored_s = median(stored), step_s = median(steps);
  if (chorus::rank() == 0) {
    std::printf("%8lld %10.1f %12.2f %10.3f %12.1f %12.2f %12.2f%% %12.2f%%\n",
                static_cast<long long>(width), mb, commit_s * 1e3, commit_s * 1e3 / mb,
                stored_s * 1e3, step_s * 1e3, 100.0 * commit_s / (step_s + commit_s),
                100.0 * commit_s / (100 * step_s + commit_s));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 9;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--reps") reps = std::atoi(argv[++i]);
  }
  if (chorus::Status s = chorus::init(); !s.ok()) {
    std::fprintf(stderr, "commit_bench: %s\n", s.to_string().c_str());
    return 2;
  }
  torch::set_num_threads(1);
  const char* job_env = std::getenv("CHORUS_ELASTIC_JOB");
  const bool job = job_env && *job_env;
  if (chorus::rank() == 0) {
    std::printf("commit of the state on %d ranks, %s; median of %d\n", chorus::size(),
                job ? "stored in each node's /dev/shm by the writer (CHORUS_ELASTIC_JOB set)"
                    : "in memory only (CHORUS_ELASTIC_JOB unset)",
                reps);
    std::printf("%8s %10s %12s %10s %12s %12s %13s %13s\n", "width", "state MB", "commit ms",
                "ms/MB", "stored ms", "step ms", "share @1/1", "share @1/100");
  }
  for (int64_t width : {256, 1024, 2048, 4096}) run_width(width, reps);
  chorus::shutdown();
  return 0;
}
