#include "chorus/torch/distributed_optimizer.h"

#include "chorus/chorus.h"
#include "torch/adasum_delta.h"
#include "torch/optimizer_archive.h"

namespace chorus::torch {

NamedParameters named_parameters(const ::torch::nn::Module& module) {
  NamedParameters out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

namespace {

ShardedOptions as_buckets(const DistributedOptimizerOptions& o) {
  if (o.powersgd.matrix_approximation_rank > 0) {
    throw Error(invalid_argument(
        "DistributedOptimizer: PowerSGD compresses each gradient on its own; bucket_bytes "
        "does not apply with it"));
  }
  if (!o.groups.empty() || o.sparse_as_dense) {
    throw Error(invalid_argument(
        "DistributedOptimizer: bucket_bytes lays out every gradient in buckets; groups and "
        "sparse_as_dense do not apply with it"));
  }
  ShardedOptions b;
  b.stage = 0;
  b.bucket_bytes = o.bucket_bytes;
  b.op = o.op;
  b.gradient_predivide_factor = o.gradient_predivide_factor;
  b.backward_passes_per_step = o.backward_passes_per_step;
  b.compression = o.compression;
  b.process_set = o.process_set;
  b.name_prefix = o.name_prefix;
  return b;
}

}  // namespace

DistributedOptimizer::DistributedOptimizer(::torch::optim::Optimizer& optimizer,
                                           NamedParameters named_parameters,
                                           DistributedOptimizerOptions options)
    : optimizer_(optimizer) {
  if (options.op == ReduceOp::kAdasum) {
    delta_ = std::make_unique<AdasumDelta>(named_parameters, options);
  } else if (options.bucket_bytes > 0) {
    buckets_ = std::make_unique<ShardedReducer>(std::move(named_parameters), std::vector<int>{},
                                                as_buckets(options));
  } else {
    reducer_ = std::make_unique<GradientReducer>(std::move(named_parameters), std::move(options));
  }
}

DistributedOptimizer::~DistributedOptimizer() = default;
DistributedOptimizer::DistributedOptimizer(DistributedOptimizer&&) noexcept = default;

// Synchronized only once the reductions succeeded: after a failure (and an elastic reset in
// place), the next step() reduces its gradients again instead of applying local ones.
void DistributedOptimizer::synchronize() {
  if (delta_) {
    synchronized_ = true;  // the gradients stay local: step() reduces the delta
    return;
  }
  if (buckets_) {
    buckets_->synchronize();
  } else {
    reducer_->synchronize();
  }
  synchronized_ = true;
}

void DistributedOptimizer::step() {
  if (!synchronized_) synchronize();
  synchronized_ = false;
  if (delta_) {
    delta_->step([this] { optimizer_.step(); });
  } else {
    optimizer_.step();
  }
  chorus::mark_step();  // the step's end on this rank's timeline, for chorus-trace summary
}

void DistributedOptimizer::zero_grad() {
  // The buckets' gradients are zeroed in place, so that they stay views into the buckets.
  if (buckets_) {
    buckets_->zero_grad();
  } else {
    optimizer_.zero_grad();
  }
}

GradientReducer::PowerSgdState DistributedOptimizer::powersgd_state() const {
  return reducer_ ? reducer_->powersgd_state() : GradientReducer::PowerSgdState{};
}

void DistributedOptimizer::save(::torch::serialize::OutputArchive& archive) const {
  ::torch::serialize::OutputArchive wrapped;
  optimizer_.save(wrapped);
  archive.write("optimizer", wrapped);
  const GradientReducer::PowerSgdState powersgd = powersgd_state();
  archive.write("powersgd.iteration", ::torch::tensor(powersgd.iteration));
  for (const auto& [name, q] : powersgd.qs) archive.write("powersgd." + name, q);
}

void DistributedOptimizer::load(::torch::serialize::InputArchive& archive) {
  ::torch::serialize::InputArchive wrapped;
  archive.read("optimizer", wrapped);
  load_optimizer(optimizer_, wrapped);
  if (!reducer_) return;
  ::torch::Tensor iteration;
  archive.read("powersgd.iteration", iteration);
  GradientReducer::PowerSgdState powersgd;
  powersgd.iteration = iteration.item<int64_t>();
  const std::string prefix = "powersgd.";
  for (const std::string& key : archive.keys()) {
    if (key.rfind(prefix, 0) != 0 || key == "powersgd.iteration") continue;
    ::torch::Tensor q;
    archive.read(key, q);
    powersgd.qs.emplace_back(key.substr(prefix.size()), q);
  }
  reducer_->load_powersgd_state(powersgd);
}

int64_t DistributedOptimizer::reductions_started() const {
  if (delta_) return 0;
  return buckets_ ? buckets_->reductions_started() : reducer_->reductions_started();
}

}  // namespace chorus::torch
