#include "chorus/torch/sharded_optimizer.h"

#include <unordered_map>

#include "chorus/chorus.h"

namespace chorus::torch {

namespace {

// The optimizer's parameter group of each parameter given, checked: every trainable
// parameter is in exactly one group, and the optimizer holds no parameter that was not given.
std::vector<int> groups_of(::torch::optim::Optimizer& optimizer, const NamedParameters& named) {
  if (!optimizer.state().empty()) {
    throw Error(invalid_argument(
        "ShardedOptimizer: the optimizer has state already; wrap it before its first step "
        "(restore a checkpoint through the ShardedOptimizer)"));
  }
  std::unordered_map<const void*, int> group;
  const auto& groups = optimizer.param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const auto& p : groups[g].params()) {
      if (!group.emplace(p.unsafeGetTensorImpl(), static_cast<int>(g)).second) {
        throw Error(invalid_argument("ShardedOptimizer: a parameter is in two parameter groups"));
      }
    }
  }
  std::vector<int> out;
  std::size_t found = 0;
  for (const auto& [name, param] : named) {
    auto it = group.find(param.unsafeGetTensorImpl());
    if (it != group.end()) ++found;
    if (it == group.end() && param.requires_grad()) {
      throw Error(invalid_argument("ShardedOptimizer: parameter '" + name +
                                   "' is in none of the optimizer's parameter groups"));
    }
    out.push_back(it == group.end() ? 0 : it->second);
  }
  if (found != group.size()) {
    throw Error(invalid_argument("ShardedOptimizer: the optimizer holds " +
                                 std::to_string(group.size() - found) +
                                 " parameters that are not among the named parameters given"));
  }
  return out;
}

ShardedOptions sharding_stage(ShardedOptions options) {
  if (options.stage != 1 && options.stage != 2) {
    throw Error(invalid_argument("ShardedOptimizer: stage is 1 or 2, got " +
                                 std::to_string(options.stage) +
                                 " (stage 0 is DistributedOptimizer's gradient buckets)"));
  }
  return options;
}

}  // namespace

ShardedOptimizer::ShardedOptimizer(::torch::optim::Optimizer& optimizer,
                                   NamedParameters named_parameters, ShardedOptions options)
    : optimizer_(optimizer),
      names_([&named_parameters] {
        std::vector<std::string> names;
        for (const auto& item : named_parameters) names.push_back(item.first);
        return names;
      }()),
      reducer_(named_parameters, groups_of(optimizer, named_parameters),
               sharding_stage(std::move(options))) {
  auto& groups = optimizer_.param_groups();
  for (auto& group : groups) group.params().clear();
  for (std::size_t b = 0; b < reducer_.bucket_count(); ++b) {
    groups.at(static_cast<std::size_t>(reducer_.group_of_bucket(b)))
        .params()
        .push_back(reducer_.shards()[b]);
  }
}

void ShardedOptimizer::synchronize() {
  synchronized_ = true;
  reducer_.synchronize();
}

void ShardedOptimizer::step() {
  if (!synchronized_) reducer_.synchronize();
  synchronized_ = false;
  optimizer_.step();
  reducer_.gather_parameters();
  chorus::mark_step();
}

void ShardedOptimizer::zero_grad() { reducer_.zero_grad(); }

double ShardedOptimizer::clip_grad_norm(double max_norm, double norm_type) {
  if (!synchronized_) synchronize();
  return reducer_.clip_grad_norm(max_norm, norm_type);
}

}  // namespace chorus::torch
