// DistributedOptimizer and the state helpers under mpirun with 2 and 3 ranks: training on
// shards of a batch must match one process training on the whole batch.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <type_traits>

#include "chorus/torch.h"

namespace {

// Defined outside namespace chorus::torch, where `torch::` would name Chorus's adapter.
struct NetImpl : torch::nn::Module {
  explicit NetImpl(int hidden = 8) {
    fc1 = register_module("fc1", torch::nn::Linear(5, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, hidden));
    fc3 = register_module("fc3", torch::nn::Linear(hidden, 3));
  }
  torch::Tensor forward(torch::Tensor x) { return fc3(torch::tanh(fc2(torch::tanh(fc1(x))))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Net);

}  // namespace

namespace chorus::torch {
namespace {

using ::torch::Tensor;

// A model initialized from `seed`: the same on every rank for the same seed.
Net seeded_net(uint64_t seed) {
  ::torch::manual_seed(seed);
  return Net();
}

// The global batch, identical on every rank: 12 rows divide among 1, 2, 3 and 4 ranks.
struct Batch {
  Tensor x, y;
};
Batch global_batch(uint64_t seed) {
  ::torch::manual_seed(seed);
  return {::torch::randn({12, 5}), ::torch::randint(0, 3, {12}, ::torch::kInt64)};
}
Batch shard(const Batch& b) {
  const int64_t rows = b.x.size(0) / size();
  return {b.x.narrow(0, rows * rank(), rows), b.y.narrow(0, rows * rank(), rows)};
}

Tensor loss_of(Net& net, const Batch& b) {
  return ::torch::nn::functional::cross_entropy(net->forward(b.x), b.y);
}

::testing::AssertionResult close(Net& a, Net& b, double rtol = 1e-5, double atol = 1e-6) {
  auto pa = a->named_parameters();
  auto pb = b->named_parameters();
  for (const auto& item : pa) {
    const Tensor& x = item.value();
    const Tensor& y = pb[item.key()];
    if (!::torch::allclose(x, y, rtol, atol)) {
      return ::testing::AssertionFailure()
             << item.key() << " differs by " << (x - y).abs().max().item<double>();
    }
  }
  return ::testing::AssertionSuccess();
}

DistributedOptimizerOptions named(const std::string& prefix) {
  DistributedOptimizerOptions options;
  options.name_prefix = prefix;
  return options;
}

// Trains `steps` steps with `make` optimizers: distributed on shards vs alone on the batch.
template <class Make>
void expect_same_as_one_process(Make make, DistributedOptimizerOptions options) {
  Net dist = seeded_net(42), alone = seeded_net(42);
  auto inner = make(dist);
  auto reference = make(alone);
  DistributedOptimizer opt(*inner, named_parameters(*dist), options);
  for (int step = 0; step < 4; ++step) {
    Batch b = global_batch(100 + step);
    opt.zero_grad();
    loss_of(dist, shard(b)).backward();
    opt.step();
    reference->zero_grad();
    loss_of(alone, b).backward();
    reference->step();
  }
  EXPECT_TRUE(close(dist, alone));
}

std::unique_ptr<::torch::optim::Optimizer> sgd_with_momentum(Net& net) {
  return std::make_unique<::torch::optim::SGD>(net->parameters(),
                                               ::torch::optim::SGDOptions(0.1).momentum(0.9));
}

TEST(DistributedOptimizer, SgdWithMomentumMatchesOneProcess) {
  expect_same_as_one_process(sgd_with_momentum, named("sgd."));
}

TEST(DistributedOptimizer, GroupedReductionsMatchOneProcess) {
  DistributedOptimizerOptions options = named("groups.");
  options.groups = {{0, 1, 2, 3}, {5}};  // fc1 and fc2 together, fc3's bias alone
  expect_same_as_one_process(sgd_with_momentum, options);
}

TEST(DistributedOptimizer, PredivideFactorMatchesOneProcess) {
  DistributedOptimizerOptions options = named("predivide.");
  options.gradient_predivide_factor = 4.0;
  expect_same_as_one_process(sgd_with_momentum, options);
}

TEST(DistributedOptimizer, AdamMatchesOneProcess) {
  expect_same_as_one_process(
      [](Net& net) {
        return std::make_unique<::torch::optim::Adam>(net->parameters(),
                                                      ::torch::optim::AdamOptions(0.01));
      },
      named("adam."));
}

TEST(DistributedOptimizer, FirstReductionStartsBeforeBackwardEnds) {
  Net net = seeded_net(1);
  ::torch::optim::SGD sgd(net->parameters(), 0.1);
  DistributedOptimizerOptions options;
  options.name_prefix = "overlap.";
  DistributedOptimizer opt(sgd, named_parameters(*net), options);
  Batch b = shard(global_batch(5));
  Tensor x = b.x.clone().requires_grad_(true);
  // The gradient of the input is the last thing backward computes: by then the reductions
  // of fc3 and fc2 (weights and biases) have started, while backward is still running.
  int64_t started_before_end = -1;
  x.register_hook([&](Tensor g) {
    started_before_end = opt.reductions_started();
    return g;
  });
  ::torch::nn::functional::cross_entropy(net->forward(x), b.y).backward();
  EXPECT_GE(started_before_end, 4);
  EXPECT_EQ(opt.reductions_started(), 6);
  opt.step();
  EXPECT_EQ(opt.reductions_started(), 0);
}

TEST(DistributedOptimizer, BackwardPassesPerStepReducesOnce) {
  Net dist = seeded_net(3), alone = seeded_net(3);
  ::torch::optim::SGD inner(dist->parameters(), 0.1), reference(alone->parameters(), 0.1);
  DistributedOptimizerOptions options;
  options.backward_passes_per_step = 2;
  options.name_prefix = "passes.";
  DistributedOptimizer opt(inner, named_parameters(*dist), options);
  Batch first = global_batch(7), second = global_batch(8);
  opt.zero_grad();
  loss_of(dist, shard(first)).backward();
  EXPECT_EQ(opt.reductions_started(), 0);
  loss_of(dist, shard(second)).backward();
  EXPECT_EQ(opt.reductions_started(), 6);
  opt.step();
  reference.zero_grad();
  loss_of(alone, first).backward();
  loss_of(alone, second).backward();
  reference.step();
  EXPECT_TRUE(close(dist, alone));
}

TEST(DistributedOptimizer, ATooManyBackwardPassesIsAnError) {
  Net net = seeded_net(3);
  ::torch::optim::SGD sgd(net->parameters(), 0.1);
  DistributedOptimizerOptions options;
  options.name_prefix = "toomany.";
  DistributedOptimizer opt(sgd, named_parameters(*net), options);
  Batch b = shard(global_batch(9));
  loss_of(net, b).backward();
  try {
    loss_of(net, b).backward();
    FAIL() << "a second backward pass before step() did not throw";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("backward_passes_per_step is 1"), std::string::npos)
        << e.what();
  }
  opt.synchronize();
}

void expect_compressed_close(Compression compression, double rtol, const std::string& prefix) {
  Net net = seeded_net(11), plain = seeded_net(11);
  ::torch::optim::SGD sgd(net->parameters(), 0.1), sgd_plain(plain->parameters(), 0.1);
  DistributedOptimizerOptions options;
  options.compression = compression;
  options.name_prefix = prefix;
  DistributedOptimizer opt(sgd, named_parameters(*net), options);
  options.compression = Compression::kNone;
  options.name_prefix = prefix + "plain.";
  DistributedOptimizer opt_plain(sgd_plain, named_parameters(*plain), options);
  Batch b = shard(global_batch(12));
  loss_of(net, b).backward();
  loss_of(plain, b).backward();
  opt.synchronize();
  opt_plain.synchronize();
  for (const auto& item : net->named_parameters()) {
    const Tensor& g = item.value().grad();
    const Tensor& want = plain->named_parameters()[item.key()].grad();
    EXPECT_EQ(g.scalar_type(), ::torch::kFloat32) << item.key();
    EXPECT_TRUE(::torch::allclose(g, want, rtol, 1e-3))
        << item.key() << " off by " << (g - want).abs().max().item<double>();
  }
}

TEST(DistributedOptimizer, Float16CompressionRoundTrip) {
  expect_compressed_close(Compression::kFloat16, 1e-2, "fp16.");
}

TEST(DistributedOptimizer, BFloat16CompressionRoundTrip) {
  expect_compressed_close(Compression::kBFloat16, 3e-2, "bf16.");
}

// fc2 is used on rank 0 only; fc1 is frozen everywhere.
TEST(DistributedOptimizer, UnusedAndFrozenParametersDoNotHang) {
  Net net = seeded_net(13);
  net->fc1->weight.requires_grad_(false);
  const Tensor frozen_before = net->fc1->weight.clone();
  ::torch::optim::SGD sgd(net->parameters(), 0.1);
  DistributedOptimizerOptions options;
  options.name_prefix = "unused.";
  options.op = ReduceOp::kSum;
  DistributedOptimizer opt(sgd, named_parameters(*net), options);
  Batch b = shard(global_batch(14));
  Tensor h = ::torch::tanh(net->fc1(b.x));
  if (rank() == 0) h = ::torch::tanh(net->fc2(h));
  ::torch::nn::functional::cross_entropy(net->fc3(h), b.y).backward();
  opt.step();
  // Every rank holds rank 0's fc2 gradient (the others contributed zeros).
  Tensor g = net->fc2->weight.grad();
  ASSERT_TRUE(g.defined());
  Tensor from_root = broadcast(g, 0, "unused.check");
  EXPECT_TRUE(::torch::equal(g, from_root));
  EXPECT_GT(g.abs().sum().item<double>(), 0.0);
  EXPECT_FALSE(net->fc1->weight.grad().defined());
  EXPECT_TRUE(::torch::equal(net->fc1->weight, frozen_before));
}

TEST(DistributedOptimizer, SparseGradientsStaySparseFromTheFirstStep) {
  ::torch::manual_seed(5);
  ::torch::nn::Embedding table(::torch::nn::EmbeddingOptions(10, 3).sparse(true));
  ::torch::optim::SGD sgd(table->parameters(), 0.1);
  DistributedOptimizerOptions options = named("sparse.");
  options.op = ReduceOp::kSum;
  DistributedOptimizer opt(sgd, named_parameters(*table), options);
  // Step 1: rank r looks up row r. Step 2: rank 0 has no gradient at all (it sends an
  // empty sparse one, learned from step 1), the others look up row 9.
  for (int step = 0; step < 2; ++step) {
    opt.zero_grad();
    if (step == 0 || rank() != 0) {
      const int64_t row = step == 0 ? rank() : 9;
      table->forward(::torch::tensor({row}, ::torch::kInt64)).sum().backward();
    }
    opt.synchronize();
    Tensor g = table->weight.grad();
    ASSERT_TRUE(g.defined() && g.is_sparse()) << "step " << step;
    Tensor want = ::torch::zeros({10, 3});
    if (step == 0) {
      for (int r = 0; r < size(); ++r) want[r] += 1;
    } else {
      want[9] += size() - 1;
    }
    EXPECT_TRUE(::torch::equal(g.to_dense(), want)) << "step " << step << "\n" << g.to_dense();
    opt.step();
  }
}

TEST(DistributedOptimizer, SparseAsDense) {
  ::torch::manual_seed(5);
  ::torch::nn::Embedding table(::torch::nn::EmbeddingOptions(10, 3).sparse(true));
  ::torch::optim::SGD sgd(table->parameters(), 0.1);
  DistributedOptimizerOptions options = named("dense.");
  options.sparse_as_dense = true;
  DistributedOptimizer opt(sgd, named_parameters(*table), options);
  table->forward(::torch::tensor({rank()}, ::torch::kInt64)).sum().backward();
  opt.synchronize();
  Tensor g = table->weight.grad();
  EXPECT_TRUE(g.is_sparse());  // reduced dense, given back sparse (as Horovod)
  Tensor want = ::torch::zeros({10, 3});
  want.narrow(0, 0, size()).fill_(1.0 / size());  // rank r looked up row r
  EXPECT_TRUE(::torch::allclose(g.to_dense(), want)) << g;
}

TEST(DistributedOptimizer, DifferentModelsFailOnEveryRank) {
  Net net(rank() == 1 ? 9 : 8);  // rank 1 built a wider hidden layer
  ::torch::optim::SGD sgd(net->parameters(), 0.1);
  DistributedOptimizerOptions options;
  options.name_prefix = "mismatch.";
  try {
    DistributedOptimizer opt(sgd, named_parameters(*net), options);
    FAIL() << "different models did not throw on rank " << rank();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kMismatch);
    EXPECT_NE(std::string(e.what()).find("fc1.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
}

TEST(State, BroadcastParametersAndBuffers) {
  ::torch::manual_seed(100 + rank());  // different weights on every rank
  ::torch::nn::Sequential net(::torch::nn::Linear(4, 6), ::torch::nn::BatchNorm1d(6));
  net->named_buffers()["1.running_mean"].fill_(rank());
  broadcast_parameters(*net, 0);
  for (const auto& t : net->named_parameters()) {
    EXPECT_TRUE(::torch::equal(t.value(), broadcast(t.value(), 0, "check." + t.key()))) << t.key();
  }
  EXPECT_TRUE(::torch::equal(net->named_buffers()["1.running_mean"], ::torch::zeros({6})));
}

// The entry of an optimizer's `state` for `param`. LibTorch 1.13 keys the state by the
// printed address of the parameter's TensorImpl, LibTorch 2 by the address itself; a
// template, so that only the branch of the LibTorch at hand is compiled.
template <class State>
::torch::optim::OptimizerParamState& state_of(State& state, const Tensor& param) {
  void* impl = param.unsafeGetTensorImpl();
  if constexpr (std::is_same_v<typename State::key_type, std::string>) {
    std::ostringstream key;
    key << impl;
    return *state.at(key.str());
  } else {
    return *state.at(impl);
  }
}

TEST(State, BroadcastOptimizerStateRestoresAdamEverywhere) {
  Net net = seeded_net(21);
  ::torch::optim::Adam adam(net->parameters(), ::torch::optim::AdamOptions(0.01));
  // Every rank takes a different number of local steps on its own data.
  for (int i = 0; i <= rank(); ++i) {
    adam.zero_grad();
    loss_of(net, global_batch(30 + rank())).backward();
    adam.step();
  }
  if (rank() == 0) adam.param_groups()[0].options().set_lr(0.5);
  broadcast_optimizer_state(adam, 0);
  EXPECT_DOUBLE_EQ(adam.param_groups()[0].options().get_lr(), 0.5);
  for (const auto& p : net->parameters()) {
    auto& s = static_cast<::torch::optim::AdamParamState&>(state_of(adam.state(), p));
    EXPECT_EQ(broadcast(::torch::tensor(s.step()), 0, "check.step").item<int64_t>(), s.step());
    EXPECT_EQ(s.step(), 1);
    EXPECT_TRUE(::torch::equal(s.exp_avg(), broadcast(s.exp_avg(), 0, "check.avg")));
    EXPECT_TRUE(::torch::equal(s.exp_avg_sq(), broadcast(s.exp_avg_sq(), 0, "check.avg_sq")));
  }
}

TEST(State, CheckpointSavedByRankZeroLoadsEverywhere) {
  // One path for the whole job: the ranks of this test share their parent, mpirun's daemon.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("chorus-test-" + std::to_string(getppid()) + ".pt"))
                               .string();
  Net net = seeded_net(41);
  ::torch::optim::SGD sgd(net->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
  loss_of(net, global_batch(42)).backward();
  sgd.step();
  save_checkpoint(path, *net, sgd, 7);
  Net fresh = seeded_net(43);
  ::torch::optim::SGD fresh_sgd(fresh->parameters(), ::torch::optim::SGDOptions(0.5));
  std::optional<int64_t> epoch = load_checkpoint(path, *fresh, fresh_sgd);
  ASSERT_TRUE(epoch.has_value());
  EXPECT_EQ(*epoch, 7);
  EXPECT_TRUE(close(fresh, net, 0, 0));
  EXPECT_DOUBLE_EQ(fresh_sgd.param_groups()[0].options().get_lr(), 0.1);
  EXPECT_EQ(fresh_sgd.state().size(), sgd.state().size());
  throw_if_error(barrier().wait());
  if (rank() == 0) std::filesystem::remove(path);
  EXPECT_FALSE(load_checkpoint(path + ".absent", *fresh, fresh_sgd).has_value());
}

}  // namespace
}  // namespace chorus::torch
