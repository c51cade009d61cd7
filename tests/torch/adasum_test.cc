// DistributedOptimizer with op kAdasum under mpirun: each parameter ends at its start plus
// the Adasum of every rank's local delta (the paper's formula written out here, over the
// deltas a twin optimizer stepped alone gives on each rank), with the same bits on every rank,
// for a stateful optimizer (Adam) and with fp16 compression; and what it refuses.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "chorus/torch.h"

namespace chorus::torch {
namespace {

using ::torch::Tensor;

// The paper's combination, each side's dot product weighed by the share of the ranks it
// covers, and the tree Chorus documents (ranks [lo, hi) split into the first ceil(n/2) and the
// rest), in float64.
Tensor combine(const Tensor& a, const Tensor& b, double wa, double wb) {
  const double ab = a.dot(b).item<double>(), aa = a.dot(a).item<double>(),
               bb = b.dot(b).item<double>();
  const double ca = aa == 0 ? 1 : 1 - wa * ab / aa;
  const double cb = bb == 0 ? 1 : 1 - wb * ab / bb;
  return ca * a + cb * b;
}

Tensor adasum(const std::vector<Tensor>& by_rank, int lo, int hi) {
  if (hi - lo == 1) return by_rank[lo];
  const int mid = lo + (hi - lo + 1) / 2;
  const double n = hi - lo;
  return combine(adasum(by_rank, lo, mid), adasum(by_rank, mid, hi), (mid - lo) / n,
                 (hi - mid) / n);
}

::torch::nn::Sequential seeded_model() {
  ::torch::manual_seed(3);  // the same model on every rank
  return ::torch::nn::Sequential(::torch::nn::Linear(6, 5), ::torch::nn::Tanh(),
                                 ::torch::nn::Linear(5, 2));
}

void expect_adasum_of_local_steps(Compression compression, double atol) {
  const int n = size();
  auto model = seeded_model();
  auto twin = seeded_model();
  ::torch::optim::Adam adam(model->parameters(), ::torch::optim::AdamOptions(0.01));
  ::torch::optim::Adam twin_adam(twin->parameters(), ::torch::optim::AdamOptions(0.01));
  DistributedOptimizerOptions options;
  options.op = ReduceOp::kAdasum;
  options.compression = compression;
  DistributedOptimizer opt(adam, named_parameters(*model), options);
  ::torch::manual_seed(100 + rank());  // each rank its own data
  for (int step = 0; step < 3; ++step) {
    const Tensor x = ::torch::randn({8, 6}), y = ::torch::randn({8, 2});
    std::vector<Tensor> before;
    {
      ::torch::NoGradGuard no_grad;
      auto ps = model->parameters(), qs = twin->parameters();
      for (std::size_t i = 0; i < ps.size(); ++i) {
        qs[i].copy_(ps[i]);
        before.push_back(ps[i].detach().clone());
      }
    }
    opt.zero_grad();
    ::torch::mse_loss(model->forward(x), y).backward();
    opt.step();
    twin_adam.zero_grad();
    ::torch::mse_loss(twin->forward(x), y).backward();
    twin_adam.step();
    auto ps = model->parameters(), qs = twin->parameters();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const std::string tag = "adasum." + std::to_string(step) + "." + std::to_string(i);
      Tensor delta = (qs[i].detach() - before[i]).reshape({1, -1});
      if (compression == Compression::kFloat16) delta = delta.to(::torch::kFloat16);
      Tensor every = allgather(delta, tag + ".deltas").to(::torch::kFloat64);
      std::vector<Tensor> by_rank;
      for (int r = 0; r < n; ++r) by_rank.push_back(every[r]);
      const Tensor want = before[i].to(::torch::kFloat64) + adasum(by_rank, 0, n).view_as(ps[i]);
      EXPECT_TRUE(::torch::allclose(ps[i].detach().to(::torch::kFloat64), want, 0, atol))
          << "step " << step << " parameter " << i << " rank " << rank() << ": off by "
          << (ps[i].detach().to(::torch::kFloat64) - want).abs().max().item<double>();
      Tensor mine = ps[i].detach().reshape({1, -1});
      Tensor all = allgather(mine, tag + ".bits");
      for (int r = 0; r < n; ++r) EXPECT_TRUE(all[r].equal(mine[0])) << "rank " << r << " differs";
    }
  }
}

TEST(AdasumOptimizer, ParametersMoveByTheAdasumOfEveryRanksLocalStep) {
  expect_adasum_of_local_steps(Compression::kNone, 1e-6);
}

// The deltas travel and combine in float16: the reference starts from the same rounded
// deltas, and the combined one is rounded once more.
TEST(AdasumOptimizer, Float16CompressionCombinesTheRoundedDeltas) {
  expect_adasum_of_local_steps(Compression::kFloat16, 2e-5);
}

TEST(AdasumOptimizer, RefusesWhatDoesNotApply) {
  auto model = seeded_model();
  ::torch::optim::SGD sgd(model->parameters(), ::torch::optim::SGDOptions(0.1));
  DistributedOptimizerOptions options;
  options.op = ReduceOp::kAdasum;
  options.bucket_bytes = 1 << 20;
  try {
    DistributedOptimizer opt(sgd, named_parameters(*model), options);
    FAIL() << "bucket_bytes with Adasum was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bucket_bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace chorus::torch
