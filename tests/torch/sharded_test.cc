// ShardedOptimizer and DistributedOptimizer's gradient buckets under mpirun at 1 to 4 ranks:
// with an element-wise optimizer, the weights must equal DistributedOptimizer's bit for bit
// at the same number of ranks, while each rank holds 1/P of the optimizer's state (and of
// the gradients at stage 2).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>

#include "chorus/elastic.h"
#include "chorus/torch.h"
#include "newest_commit.h"

namespace {

// Odd sizes: no parameter and no bucket divides evenly among 2, 3 or 4 ranks.
struct OddNetImpl : torch::nn::Module {
  explicit OddNetImpl(int hidden = 11) {
    fc1 = register_module("fc1", torch::nn::Linear(5, 7));
    fc2 = register_module("fc2", torch::nn::Linear(7, hidden));
    fc3 = register_module("fc3", torch::nn::Linear(hidden, 3));
  }
  torch::Tensor forward(torch::Tensor x) { return fc3(torch::tanh(fc2(torch::tanh(fc1(x))))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(OddNet);

}  // namespace

namespace chorus::torch {
namespace {

using ::torch::Tensor;
using MakeOptimizer = std::function<std::unique_ptr<::torch::optim::Optimizer>(OddNet&)>;

OddNet seeded_net(uint64_t seed) {
  ::torch::manual_seed(seed);
  return OddNet();
}

struct Batch {
  Tensor x, y;
};
// 12 rows, this rank's share of them.
Batch batch(uint64_t seed) {
  ::torch::manual_seed(seed);
  Tensor x = ::torch::randn({12, 5});
  Tensor y = ::torch::randint(0, 3, {12}, ::torch::kInt64);
  const int64_t rows = 12 / size();
  return {x.narrow(0, rows * rank(), rows), y.narrow(0, rows * rank(), rows)};
}

Tensor loss_of(OddNet& net, const Batch& b) {
  return ::torch::nn::functional::cross_entropy(net->forward(b.x), b.y);
}

::testing::AssertionResult same_bits(OddNet& a, OddNet& b) {
  auto pb = b->named_parameters();
  for (const auto& item : a->named_parameters()) {
    const Tensor& x = item.value();
    const Tensor& y = pb[item.key()];
    if (!::torch::equal(x, y)) {
      return ::testing::AssertionFailure()
             << item.key() << " differs by " << (x - y).abs().max().item<double>();
    }
  }
  return ::testing::AssertionSuccess();
}

MakeOptimizer sgd_momentum = [](OddNet& n) {
  return std::make_unique<::torch::optim::SGD>(
      n->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
};
MakeOptimizer adam = [](OddNet& n) {
  return std::make_unique<::torch::optim::Adam>(n->parameters(), ::torch::optim::AdamOptions(0.01));
};
MakeOptimizer adamw = [](OddNet& n) {
  return std::make_unique<::torch::optim::AdamW>(
      n->parameters(), ::torch::optim::AdamWOptions(0.01).weight_decay(0.05));
};

DistributedOptimizerOptions reference_options(const ShardedOptions& o, const std::string& tag) {
  DistributedOptimizerOptions r;
  r.op = o.op;
  r.gradient_predivide_factor = o.gradient_predivide_factor;
  r.backward_passes_per_step = o.backward_passes_per_step;
  r.compression = o.compression;
  r.name_prefix = "ref." + tag + ".";
  return r;
}

// Trains the same model on the same shards with DistributedOptimizer and with
// ShardedOptimizer under `options`, four steps, and compares the weights bit for bit.
void expect_same_bits(const MakeOptimizer& make, ShardedOptions options, const std::string& tag) {
  OddNet reference = seeded_net(42), sharded = seeded_net(42);
  auto inner_reference = make(reference);
  auto inner_sharded = make(sharded);
  DistributedOptimizer plain(*inner_reference, named_parameters(*reference),
                             reference_options(options, tag));
  options.name_prefix = "sharded." + tag + ".";
  ShardedOptimizer opt(*inner_sharded, named_parameters(*sharded), options);
  for (int step = 0; step < 4; ++step) {
    plain.zero_grad();
    opt.zero_grad();
    for (int pass = 0; pass < options.backward_passes_per_step; ++pass) {
      Batch b = batch(100 + 10 * step + pass);
      loss_of(reference, b).backward();
      loss_of(sharded, b).backward();
    }
    plain.step();
    opt.step();
  }
  EXPECT_TRUE(same_bits(reference, sharded)) << tag;
}

class Stage : public ::testing::TestWithParam<int> {
 protected:
  ShardedOptions options(int64_t bucket_bytes = int64_t{25} << 20) const {
    ShardedOptions o;
    o.stage = GetParam();
    o.bucket_bytes = bucket_bytes;
    return o;
  }
  std::string tag(const std::string& what) const {
    return what + ".stage" + std::to_string(GetParam());
  }
};

TEST_P(Stage, SgdWithMomentumOneBucket) { expect_same_bits(sgd_momentum, options(), tag("sgd1")); }

// 128-byte buckets: fc3's bias and weight share one, every larger parameter has its own.
TEST_P(Stage, SgdWithMomentumSmallBuckets) {
  expect_same_bits(sgd_momentum, options(128), tag("sgd"));
}

TEST_P(Stage, Adam) { expect_same_bits(adam, options(128), tag("adam")); }

TEST_P(Stage, AdamW) { expect_same_bits(adamw, options(), tag("adamw")); }

TEST_P(Stage, SumAndPredivide) {
  ShardedOptions sum = options(128);
  sum.op = ReduceOp::kSum;
  expect_same_bits(sgd_momentum, sum, tag("sum"));
  ShardedOptions predivide = options(128);
  predivide.gradient_predivide_factor = 3.0;
  expect_same_bits(adam, predivide, tag("predivide"));
}

TEST_P(Stage, Float16AndBFloat16Compression) {
  ShardedOptions half = options(128);
  half.compression = Compression::kFloat16;
  expect_same_bits(sgd_momentum, half, tag("fp16"));
  ShardedOptions bf16 = options();
  bf16.compression = Compression::kBFloat16;
  expect_same_bits(adam, bf16, tag("bf16"));
}

TEST_P(Stage, BackwardPassesPerStep) {
  ShardedOptions o = options(128);
  o.backward_passes_per_step = 2;
  expect_same_bits(adam, o, tag("passes"));
}

// Two parameter groups with their own learning rates: buckets never mix them.
TEST_P(Stage, ParameterGroups) {
  auto grouped = [](OddNet& n) {
    std::vector<::torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(n->fc1->parameters(), std::make_unique<::torch::optim::AdamOptions>(0.02));
    std::vector<Tensor> rest = n->fc2->parameters();
    for (const Tensor& t : n->fc3->parameters()) rest.push_back(t);
    groups.emplace_back(rest, std::make_unique<::torch::optim::AdamOptions>(0.005));
    return std::make_unique<::torch::optim::Adam>(groups, ::torch::optim::AdamOptions(0.01));
  };
  expect_same_bits(grouped, options(), tag("groups"));
}

// fc2 is used on rank 0 only; fc1's weight is frozen everywhere.
TEST_P(Stage, UnusedAndFrozenParameters) {
  OddNet reference = seeded_net(13), sharded = seeded_net(13);
  for (OddNet* n : {&reference, &sharded}) (*n)->fc1->weight.requires_grad_(false);
  const Tensor frozen = sharded->fc1->weight.clone();
  ::torch::optim::SGD inner_reference(reference->parameters(),
                                      ::torch::optim::SGDOptions(0.1).momentum(0.9));
  ::torch::optim::SGD inner_sharded(sharded->parameters(),
                                    ::torch::optim::SGDOptions(0.1).momentum(0.9));
  ShardedOptions o = options(128);
  DistributedOptimizer plain(inner_reference, named_parameters(*reference),
                             reference_options(o, tag("unused")));
  o.name_prefix = "sharded." + tag("unused") + ".";
  ShardedOptimizer opt(inner_sharded, named_parameters(*sharded), o);
  for (int step = 0; step < 3; ++step) {
    Batch b = batch(14 + step);
    for (OddNet* n : {&reference, &sharded}) {
      Tensor h = ::torch::tanh((*n)->fc1(b.x));
      if (rank() == 0) h = ::torch::tanh((*n)->fc2(h));
      if (rank() != 0) h = ::torch::cat({h, ::torch::zeros({h.size(0), 4})}, 1);
      ::torch::nn::functional::cross_entropy((*n)->fc3(h), b.y).backward();
    }
    plain.step();
    opt.step();
    plain.zero_grad();
    opt.zero_grad();
  }
  EXPECT_TRUE(same_bits(reference, sharded));
  EXPECT_TRUE(::torch::equal(sharded->fc1->weight, frozen));
}

// The optimizer's state and the gradients each rank holds: about 1/P of the whole.
TEST_P(Stage, EachRankHoldsItsShard) {
  ::torch::manual_seed(3);
  ::torch::nn::Linear big(256, 255);  // 65535 + 255 elements
  ::torch::optim::Adam inner(big->parameters(), ::torch::optim::AdamOptions(0.01));
  ShardedOptions o = options();
  o.name_prefix = "memory." + tag("m") + ".";
  ShardedOptimizer opt(inner, named_parameters(*big), o);
  opt.zero_grad();
  big->forward(::torch::randn({4, 256})).sum().backward();
  opt.step();
  const int64_t whole = 256 * 255 + 255;
  int64_t state_elements = 0;
  for (const auto& item : inner.state()) {
    auto& s = static_cast<::torch::optim::AdamParamState&>(*item.second);
    state_elements += s.exp_avg().numel() + s.exp_avg_sq().numel();
  }
  const int64_t shard = (whole + 16 * size() - 1) / (16 * size()) * 16;
  EXPECT_EQ(state_elements, 2 * shard);
  const int64_t grad_bytes = opt.reducer().gradient_bytes();
  EXPECT_EQ(grad_bytes,
            static_cast<int64_t>(sizeof(float)) * (GetParam() == 2 ? shard : shard * size()));
  if (GetParam() == 2) EXPECT_FALSE(big->weight.grad().defined());
}

// Clipping by the global norm over the shards: the norm is the whole gradient's, and the
// result matches clip_grad_norm_ on DistributedOptimizer's gradients.
TEST_P(Stage, ClipGradNormOverShards) {
  OddNet reference = seeded_net(21), sharded = seeded_net(21);
  ::torch::optim::SGD inner_reference(reference->parameters(), 0.5);
  ::torch::optim::SGD inner_sharded(sharded->parameters(), 0.5);
  ShardedOptions o = options(128);
  DistributedOptimizer plain(inner_reference, named_parameters(*reference),
                             reference_options(o, tag("clip")));
  o.name_prefix = "sharded." + tag("clip") + ".";
  ShardedOptimizer opt(inner_sharded, named_parameters(*sharded), o);
  Batch b = batch(31);
  loss_of(reference, b).backward();
  loss_of(sharded, b).backward();
  plain.synchronize();
  const double want = ::torch::nn::utils::clip_grad_norm_(reference->parameters(), 0.05);
  const double norm = opt.clip_grad_norm(0.05);
  EXPECT_NEAR(norm, want, 1e-5 * want);
  EXPECT_GT(norm, 0.05);  // so that clipping did something
  plain.step();
  opt.step();
  auto pb = sharded->named_parameters();
  for (const auto& item : reference->named_parameters()) {
    EXPECT_TRUE(::torch::allclose(item.value(), pb[item.key()], 1e-5, 1e-7)) << item.key();
  }
}

TEST_P(Stage, DifferentModelsFailOnEveryRank) {
  OddNet net(rank() == size() - 1 && size() > 1 ? 12 : 11);
  ::torch::optim::SGD sgd(net->parameters(), 0.1);
  ShardedOptions o = options();
  o.name_prefix = "mismatch." + tag("m") + ".";
  try {
    ShardedOptimizer opt(sgd, named_parameters(*net), o);
    if (size() > 1) FAIL() << "different models did not throw on rank " << rank();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kMismatch);
    EXPECT_NE(std::string(e.what()).find("fc2.weight"), std::string::npos) << e.what();
  }
}

// One path for the whole job: rank 0's parent (mpirun's daemon on its host) names it, for
// ranks on other hosts too (fake hosts share the file system).
std::string job_path(const std::string& what) {
  Tensor id = ::torch::tensor({static_cast<int64_t>(getppid())});
  broadcast_(id, 0, "job_path." + what);
  return (std::filesystem::temp_directory_path() /
          ("chorus-sharded-" + std::to_string(id.item<int64_t>()) + "-" + what))
      .string();
}

// Checkpoints of both kinds continue to the weights of the run that was not interrupted;
// the consolidated one also loads into the other stage (another layout of the same shards).
TEST_P(Stage, CheckpointsRoundTrip) {
  const std::string path = job_path(tag("ckpt"));
  OddNet net = seeded_net(8);
  auto inner = adam(net);
  ShardedOptions o = options(128);
  o.name_prefix = "ckpt." + tag("a") + ".";
  ShardedOptimizer opt(*inner, named_parameters(*net), o);
  auto train = [](OddNet& n, ShardedOptimizer& s, int first) {
    for (int step = first; step < first + 2; ++step) {
      s.zero_grad();
      loss_of(n, batch(300 + step)).backward();
      s.step();
    }
  };
  train(net, opt, 0);
  save_checkpoint(path, *net, opt, 3);  // this rank's shard
  save_checkpoint(path + ".whole", *net, opt, 3, /*consolidated=*/true);
  train(net, opt, 2);
  for (const bool whole : {false, true}) {
    OddNet again = seeded_net(99);
    auto again_inner = adam(again);
    ShardedOptions a = options(whole ? int64_t{25} << 20 : 128);
    a.stage = whole ? 3 - GetParam() : GetParam();
    a.name_prefix = "ckpt." + tag(whole ? "whole" : "shard") + ".";
    ShardedOptimizer resumed(*again_inner, named_parameters(*again), a);
    EXPECT_EQ(load_checkpoint(whole ? path + ".whole" : path, *again, resumed), 3);
    train(again, resumed, 2);
    EXPECT_TRUE(same_bits(net, again)) << (whole ? "consolidated" : "shard");
  }
  throw_if_error(barrier().wait());
  std::filesystem::remove(shard_path(path, rank(), size()));
  if (rank() == 0) std::filesystem::remove(path + ".whole");
}

// A shard is refused by another rank, naming both.
TEST_P(Stage, AShardRefusesAnotherRank) {
  if (size() == 1) GTEST_SKIP() << "one rank has one shard";
  OddNet net = seeded_net(8);
  auto inner = sgd_momentum(net);
  ShardedOptions o = options();
  o.name_prefix = "refuse." + tag("a") + ".";
  ShardedOptimizer opt(*inner, named_parameters(*net), o);
  ::torch::serialize::OutputArchive out;
  opt.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  Tensor data = ::torch::from_blob(bytes.str().data(), {static_cast<int64_t>(bytes.str().size())},
                                   ::torch::kUInt8)
                    .clone();
  // Rank r loads rank r+1's shard.
  Tensor lengths = allgather(::torch::tensor({data.numel()}), "refuse." + tag("len"));
  Tensor all = allgather(data, "refuse." + tag("data"));
  const int from = (rank() + 1) % size();
  int64_t at = 0;
  for (int r = 0; r < from; ++r) at += lengths[r].item<int64_t>();
  Tensor theirs = all.narrow(0, at, lengths[from].item<int64_t>()).contiguous();
  std::istringstream in(std::string(static_cast<const char*>(theirs.data_ptr()), theirs.numel()));
  ::torch::serialize::InputArchive archive;
  archive.load_from(in);
  try {
    opt.load(archive);
    FAIL() << "a shard of another rank loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard " + std::to_string(from) + " of"),
              std::string::npos)
        << e.what();
  }
}

// The elastic state commits a sharded optimizer and restores it.
TEST_P(Stage, ElasticStateCommitsAndRestores) {
  OddNet net = seeded_net(5), twin = seeded_net(5);
  auto inner = adam(net);
  auto twin_inner = adam(twin);
  ShardedOptions o = options(128);
  o.name_prefix = "elastic." + tag("a") + ".";
  ShardedOptimizer opt(*inner, named_parameters(*net), o);
  o.name_prefix = "elastic." + tag("b") + ".";
  ShardedOptimizer twin_opt(*twin_inner, named_parameters(*twin), o);
  elastic::State state;
  state.add("model", *net).add("optimizer", opt);
  auto step = [](OddNet& n, ShardedOptimizer& s, int k) {
    s.zero_grad();
    loss_of(n, batch(400 + k)).backward();
    s.step();
  };
  step(net, opt, 0);
  step(twin, twin_opt, 0);
  state.commit();
  step(net, opt, 1);  // lost: the state goes back to the commit
  state.restore();
  for (int k = 1; k < 3; ++k) {
    step(net, opt, k + 10);
    step(twin, twin_opt, k + 10);
  }
  EXPECT_TRUE(same_bits(net, twin));
}

// A bucket of one parameter whose length every rank count from 1 to 4 divides into aligned
// shards (192 elements) travels from the gradient itself at stage 2, without a packed copy:
// the same bits.
TEST_P(Stage, ABucketOfOneUnpaddedParameter) {
  auto make = [] {
    ::torch::manual_seed(77);
    return ::torch::nn::Sequential(
        ::torch::nn::Linear(5, 16), ::torch::nn::Tanh(),
        ::torch::nn::Linear(::torch::nn::LinearOptions(16, 12).bias(false)), ::torch::nn::Tanh(),
        ::torch::nn::Linear(12, 3));
  };
  auto reference = make(), sharded = make();
  ::torch::optim::Adam inner_reference(reference->parameters(), ::torch::optim::AdamOptions(0.01));
  ::torch::optim::Adam inner_sharded(sharded->parameters(), ::torch::optim::AdamOptions(0.01));
  ShardedOptions o = options(128);
  DistributedOptimizer plain(inner_reference, named_parameters(*reference),
                             reference_options(o, tag("alone")));
  o.name_prefix = "sharded." + tag("alone") + ".";
  ShardedOptimizer opt(inner_sharded, named_parameters(*sharded), o);
  for (int step = 0; step < 3; ++step) {
    Batch b = batch(600 + step);
    for (auto* n : {&reference, &sharded}) {
      ::torch::nn::functional::cross_entropy((*n)->forward(b.x), b.y).backward();
    }
    plain.step();
    opt.step();
    plain.zero_grad();
    opt.zero_grad();
  }
  auto pb = sharded->named_parameters();
  for (const auto& item : reference->named_parameters()) {
    EXPECT_TRUE(::torch::equal(item.value(), pb[item.key()])) << item.key();
  }
}

INSTANTIATE_TEST_SUITE_P(ShardedOptimizer, Stage, ::testing::Values(1, 2));

// A job restarted on another number of ranks (tests/torch/restart.sh runs each pair
// of phases at 3 ranks, then 2). CHORUS_TEST_RESTART=save trains two steps with Adam and
// writes a consolidated checkpoint at CHORUS_TEST_RESTART_PATH; =resume loads it into a
// ShardedOptimizer at this count. =commit does the same steps, then commits them through the
// elastic state (CHORUS_ELASTIC_JOB and CHORUS_ELASTIC_DIR given); =relaunch resumes that
// commit through elastic::run, as a relaunched worker does. Each resume also loads the state
// into a plain Adam under DistributedOptimizer by hand (Adam's state cut per parameter in the
// test), trains two more steps with each and compares them bit for bit.
ShardedOptions restart_options() {
  ShardedOptions o;
  o.stage = 2;
  o.bucket_bytes = 128;
  o.name_prefix = "restart.";
  return o;
}

template <class Optimizer>
void train_two_steps(OddNet& net, Optimizer& optimizer, int first) {
  for (int step = first; step < first + 2; ++step) {
    optimizer.zero_grad();
    loss_of(net, batch(500 + step)).backward();
    optimizer.step();
  }
}

// Trains `by_hand` from the saved model and consolidated state with a plain Adam under
// DistributedOptimizer, two steps, and compares it with `net`.
void expect_by_hand(::torch::serialize::InputArchive& model,
                    ::torch::serialize::InputArchive& state, OddNet& net) {
  OddNet by_hand = seeded_net(63);
  by_hand->load(model);
  ::torch::optim::Adam plain(by_hand->parameters(), ::torch::optim::AdamOptions(0.01));
  auto params = named_parameters(*by_hand);
  for (std::size_t i = 0; i < params.size(); ++i) {
    ::torch::serialize::InputArchive entry;
    ASSERT_TRUE(state.try_read("parameter." + std::to_string(i), entry)) << params[i].first;
    auto s = std::make_unique<::torch::optim::AdamParamState>();
    c10::IValue step;
    Tensor exp_avg, exp_avg_sq;
    entry.read("step", step);
    entry.read("exp_avg", exp_avg);
    entry.read("exp_avg_sq", exp_avg_sq);
    s->step(step.toInt());
    s->exp_avg(exp_avg);
    s->exp_avg_sq(exp_avg_sq);
    plain.state()[c10::guts::to_string(params[i].second.unsafeGetTensorImpl())] = std::move(s);
  }
  DistributedOptimizerOptions d;
  d.name_prefix = "restart.plain.";
  DistributedOptimizer reference(plain, params, d);
  train_two_steps(by_hand, reference, 2);
  EXPECT_TRUE(same_bits(net, by_hand));
}

TEST(Restart, ReshardsOntoAnotherCount) {
  const char* phase_name = std::getenv("CHORUS_TEST_RESTART");
  const char* path = std::getenv("CHORUS_TEST_RESTART_PATH");
  if (phase_name == nullptr || path == nullptr) GTEST_SKIP() << "run by restart.sh";
  const std::string phase = phase_name;
  OddNet net = seeded_net(phase == "save" || phase == "commit" ? 61 : 62);
  auto inner = adam(net);
  ShardedOptimizer opt(*inner, named_parameters(*net), restart_options());
  if (phase == "save" || phase == "commit") {
    train_two_steps(net, opt, 0);
    if (phase == "save") {
      save_checkpoint(path, *net, opt, 1, /*consolidated=*/true);
    } else {
      elastic::State state;
      state.add("model", *net).add("optimizer", opt);
      state.commit();
    }
    return;
  }
  ::torch::serialize::InputArchive archive, model, state;
  if (phase == "resume") {
    ASSERT_EQ(load_checkpoint(path, *net, opt), 1);
    archive.load_from(path);
    archive.read("model", model);
    archive.read("optimizer", state);
    train_two_steps(net, opt, 2);
  } else {
    ASSERT_EQ(phase, "relaunch");
    read_newest_commit(archive);
    if (HasFatalFailure()) return;
    archive.read("module.model", model);
    archive.read("sharded.optimizer", state);
    elastic::State s;
    s.add("model", *net).add("optimizer", opt);
    ASSERT_EQ(elastic::run(s, [&](elastic::State&) { train_two_steps(net, opt, 2); }), 0);
  }
  expect_by_hand(model, state, net);
}

// DistributedOptimizer with its gradients in buckets: the same bits as without, and
// param.grad() is a view into the bucket.
TEST(GradientBuckets, SameBitsAsOneReductionPerParameter) {
  for (const MakeOptimizer* make : {&sgd_momentum, &adam}) {
    OddNet reference = seeded_net(7), bucketed = seeded_net(7);
    auto inner_reference = (*make)(reference);
    auto inner_bucketed = (*make)(bucketed);
    DistributedOptimizerOptions o;
    o.name_prefix = "plain.";
    DistributedOptimizer plain(*inner_reference, named_parameters(*reference), o);
    o.name_prefix = "buckets.";
    o.bucket_bytes = 200;  // fc3's bias, fc3's weight and fc2's bias in the first bucket
    DistributedOptimizer opt(*inner_bucketed, named_parameters(*bucketed), o);
    for (int step = 0; step < 4; ++step) {
      plain.zero_grad();
      opt.zero_grad();
      Batch b = batch(200 + step);
      loss_of(reference, b).backward();
      loss_of(bucketed, b).backward();
      plain.step();
      opt.step();
    }
    EXPECT_TRUE(same_bits(reference, bucketed));
    const void* first = bucketed->fc3->bias.grad().data_ptr();
    const void* next = bucketed->fc3->weight.grad().data_ptr();
    EXPECT_EQ(static_cast<const char*>(next),
              static_cast<const char*>(first) + 3 * sizeof(float));  // one bucket, in order
  }
}

}  // namespace
}  // namespace chorus::torch
