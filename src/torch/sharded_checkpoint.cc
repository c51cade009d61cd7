// ShardedOptimizer's checkpoints: a rank's shard, and the consolidated state that reshards.
// LibTorch's optimizers keep their per-parameter state in types of their own (SGD's momentum,
// Adam's moments and step count); the state of a shard is read and written through the
// serialize() every one of them has, so any optimizer whose state is element-wise tensors and
// scalars is consolidated without knowing its type.

#include <torch/torch.h>

#include <map>
#include <sstream>

#include "chorus/torch/sharded_optimizer.h"
#include "optimizer_archive.h"

namespace chorus::torch {

using ::torch::Tensor;
using ::torch::serialize::InputArchive;
using ::torch::serialize::OutputArchive;

namespace {

constexpr const char* kShardFormat = "chorus.sharded.shard.v1";
constexpr const char* kWholeFormat = "chorus.sharded.whole.v1";

using Entries = std::map<std::string, c10::IValue>;

::torch::optim::OptimizerParamState* state_of(::torch::optim::Optimizer& optimizer,
                                              const Tensor& shard) {
  auto it = optimizer.state().find(c10::guts::to_string(shard.unsafeGetTensorImpl()));
  return it == optimizer.state().end() ? nullptr : it->second.get();
}

InputArchive reread(OutputArchive& out) {
  std::ostringstream bytes;
  out.save_to(bytes);
  std::istringstream in(bytes.str());
  InputArchive archive;
  archive.load_from(in);
  return archive;
}

Entries entries_of(const ::torch::optim::OptimizerParamState& state) {
  OutputArchive out;
  state.serialize(out);
  InputArchive in = reread(out);
  Entries entries;
  for (const std::string& key : in.keys()) in.read(key, entries[key]);
  return entries;
}

bool element_wise(const c10::IValue& value, const Tensor& shard) {
  return value.isTensor() && value.toTensor().dim() > 0 &&
         value.toTensor().numel() == shard.numel();
}

std::string text_of(InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value.toStringRef();
}

}  // namespace

void ShardedOptimizer::save(OutputArchive& archive, bool consolidated) {
  const std::vector<Tensor>& shards = reducer_.shards();
  if (!consolidated) {
    archive.write("format", c10::IValue(std::string(kShardFormat)));
    archive.write("shard", ::torch::tensor({static_cast<int64_t>(reducer_.shard_rank()),
                                            static_cast<int64_t>(reducer_.shard_count())}));
    OutputArchive state;
    optimizer_.save(state);
    archive.write("optimizer", state);
    return;
  }
  std::vector<Entries> per_shard;
  std::map<std::string, bool> keys;  // key -> element-wise
  for (const Tensor& shard : shards) {
    auto* state = state_of(optimizer_, shard);
    per_shard.push_back(state ? entries_of(*state) : Entries());
    for (const auto& [key, value] : per_shard.back()) {
      auto [it, fresh] = keys.emplace(key, element_wise(value, shard));
      if (!fresh) it->second = it->second && element_wise(value, shard);
    }
  }
  std::vector<Entries> per_parameter(names_.size());
  for (const auto& [key, is_element_wise] : keys) {
    if (is_element_wise) {
      std::vector<Tensor> values;
      for (const Entries& e : per_shard) {
        auto it = e.find(key);
        values.push_back(it == e.end() ? Tensor() : it->second.toTensor());
      }
      std::vector<Tensor> whole = reducer_.gather_to_parameters(values);
      for (std::size_t i = 0; i < whole.size(); ++i) {
        if (whole[i].defined()) per_parameter[i][key] = whole[i];
      }
      continue;
    }
    for (std::size_t b = 0; b < shards.size(); ++b) {
      auto it = per_shard[b].find(key);
      if (it == per_shard[b].end()) continue;
      for (const ShardSlot& slot : reducer_.slots(b))
        per_parameter[slot.parameter][key] = it->second;
    }
  }
  archive.write("format", c10::IValue(std::string(kWholeFormat)));
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (per_parameter[i].empty()) continue;
    OutputArchive entry;
    for (const auto& [key, value] : per_parameter[i]) entry.write(key, value);
    entry.write("name", c10::IValue(names_[i]));
    archive.write("parameter." + std::to_string(i), entry);
  }
  archive.write("parameters", ::torch::tensor(static_cast<int64_t>(names_.size())));
  for (std::size_t g = 0; g < optimizer_.param_groups().size(); ++g) {
    OutputArchive options;
    optimizer_.param_groups()[g].options().serialize(options);
    archive.write("group." + std::to_string(g), options);
  }
}

void ShardedOptimizer::load(InputArchive& archive) {
  const std::string format = text_of(archive, "format");
  if (format == kWholeFormat) {
    load_consolidated(archive);
    return;
  }
  if (format != kShardFormat) {
    throw Error(invalid_argument("ShardedOptimizer::load: not a ShardedOptimizer's state ('" +
                                 format + "')"));
  }
  Tensor shard;
  archive.read("shard", shard);
  const int64_t saved_rank = shard[0].item<int64_t>(), saved_count = shard[1].item<int64_t>();
  if (saved_rank != reducer_.shard_rank() || saved_count != reducer_.shard_count()) {
    throw Error(invalid_argument("ShardedOptimizer::load: the state of shard " +
                                 std::to_string(saved_rank) + " of " + std::to_string(saved_count) +
                                 " given to shard " + std::to_string(reducer_.shard_rank()) +
                                 " of " + std::to_string(reducer_.shard_count()) +
                                 "; load a consolidated checkpoint on another number of ranks"));
  }
  InputArchive state;
  archive.read("optimizer", state);
  load_optimizer(optimizer_, state);
}

void ShardedOptimizer::load_consolidated(InputArchive& archive) {
  Tensor count;
  archive.read("parameters", count);
  if (count.item<int64_t>() != static_cast<int64_t>(names_.size())) {
    throw Error(invalid_argument("ShardedOptimizer::load: the state is of " +
                                 std::to_string(count.item<int64_t>()) +
                                 " parameters, this "
                                 "optimizer has " +
                                 std::to_string(names_.size())));
  }
  std::vector<Entries> per_parameter(names_.size());
  for (std::size_t i = 0; i < names_.size(); ++i) {
    InputArchive entry;
    if (!archive.try_read("parameter." + std::to_string(i), entry)) continue;
    if (text_of(entry, "name") != names_[i]) {
      throw Error(invalid_argument("ShardedOptimizer::load: parameter " + std::to_string(i) +
                                   " is '" + names_[i] + "' here but '" + text_of(entry, "name") +
                                   "' in the state"));
    }
    for (const std::string& key : entry.keys()) {
      if (key != "name") entry.read(key, per_parameter[i][key]);
    }
  }
  const std::vector<Tensor>& shards = reducer_.shards();
  // Each shard's entries: element-wise values cut from the parameters', the others from the
  // first parameter of its bucket that has them.
  std::vector<Entries> per_shard(shards.size());
  std::map<std::string, bool> keys;
  for (const Entries& e : per_parameter) {
    for (const auto& [key, value] : e) {
      auto [it, fresh] = keys.emplace(key, value.isTensor() && value.toTensor().dim() > 0);
      if (!fresh) it->second = it->second && value.isTensor() && value.toTensor().dim() > 0;
    }
  }
  for (const auto& [key, is_element_wise] : keys) {
    if (is_element_wise) {
      std::vector<Tensor> values;
      for (const Entries& e : per_parameter) {
        auto it = e.find(key);
        values.push_back(it == e.end() ? Tensor() : it->second.toTensor());
      }
      std::vector<Tensor> cut = reducer_.shard_from_parameters(values);
      for (std::size_t b = 0; b < shards.size(); ++b) {
        if (cut[b].defined()) per_shard[b][key] = cut[b].to(shards[b].device());
      }
      continue;
    }
    for (std::size_t b = 0; b < shards.size(); ++b) {
      for (const ShardSlot& slot : reducer_.slots(b)) {
        auto it = per_parameter[slot.parameter].find(key);
        if (it == per_parameter[slot.parameter].end()) continue;
        per_shard[b][key] = it->second;
        break;
      }
    }
  }
  // The optimizer makes its state objects on its first step: one step on zero gradients,
  // whose effect on the shards is undone, gives every shard one to fill in.
  {
    ::torch::NoGradGuard no_grad;
    optimizer_.state().clear();
    std::vector<Tensor> values, grads;
    for (Tensor shard : shards) {  // a handle of the shard's own tensor
      values.push_back(shard.clone());
      grads.push_back(shard.grad());
      shard.mutable_grad() = ::torch::zeros_like(shard);
    }
    optimizer_.step();
    for (std::size_t b = 0; b < shards.size(); ++b) {
      Tensor shard = shards[b];
      shard.copy_(values[b]);
      shard.mutable_grad() = grads[b];
    }
  }
  for (std::size_t b = 0; b < shards.size(); ++b) {
    auto* state = state_of(optimizer_, shards[b]);
    if (state == nullptr) continue;
    if (per_shard[b].empty()) {
      optimizer_.state().erase(c10::guts::to_string(shards[b].unsafeGetTensorImpl()));
      continue;
    }
    OutputArchive out;
    for (const auto& [key, value] : per_shard[b]) out.write(key, value);
    InputArchive in = reread(out);
    state->serialize(in);
  }
  for (std::size_t g = 0; g < optimizer_.param_groups().size(); ++g) {
    InputArchive options;
    if (archive.try_read("group." + std::to_string(g), options)) {
      optimizer_.param_groups()[g].options().serialize(options);
    }
  }
}

}  // namespace chorus::torch
