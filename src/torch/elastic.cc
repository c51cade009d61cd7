#include "chorus/torch/elastic.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <typeinfo>
#include <utility>
#include <vector>

#include "chorus/chorus.h"
#include "chorus/elastic.h"
#include "chorus/torch/state.h"
#include "chorus/torch/tensor_ops.h"
#include "optimizer_archive.h"

namespace chorus::torch::elastic {

using ::torch::Tensor;
using ::torch::serialize::InputArchive;
using ::torch::serialize::OutputArchive;

ElasticSampler::ElasticSampler(int64_t dataset_size, bool shuffle, uint64_t seed)
    : size_(dataset_size), shuffle_(shuffle), seed_(seed) {}

void ElasticSampler::set_epoch(int64_t epoch) { load(epoch, 0); }

void ElasticSampler::record_batch(int64_t batch_size) {
  processed_ += batch_size * ::chorus::size();
}

void ElasticSampler::load(int64_t epoch, int64_t processed) {
  epoch_ = epoch;
  processed_ = processed;
}

std::vector<int64_t> ElasticSampler::indices() const {
  std::vector<int64_t> order(static_cast<std::size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) order[static_cast<std::size_t>(i)] = i;
  if (shuffle_) {
    // Fisher-Yates with a seeded generator of fixed definition: the same order on every rank
    // and every standard library.
    std::mt19937_64 random(seed_ + static_cast<uint64_t>(epoch_));
    for (std::size_t i = order.size(); i > 1; --i) {
      std::swap(order[i - 1], order[static_cast<std::size_t>(random() % i)]);
    }
  }
  const std::size_t done = static_cast<std::size_t>(std::min(processed_, size_));
  const std::size_t left = order.size() - done;
  const std::size_t ranks = static_cast<std::size_t>(::chorus::size());
  const std::size_t each = (left + ranks - 1) / ranks;
  std::vector<int64_t> mine;
  for (std::size_t k = 0; k < each && left > 0; ++k) {
    // Position rank + k * ranks of the rest, wrapping round to pad the last turn.
    const std::size_t at = (static_cast<std::size_t>(::chorus::rank()) + k * ranks) % left;
    mine.push_back(order[done + at]);
  }
  return mine;
}

State& State::add(const std::string& name, ::torch::nn::Module& module) {
  modules_.emplace_back(name, &module);
  return *this;
}

State& State::add(const std::string& name, ::torch::optim::Optimizer& optimizer) {
  optimizers_.emplace_back(name, &optimizer);
  return *this;
}

State& State::add(const std::string& name, ShardedOptimizer& optimizer) {
  sharded_.emplace_back(name, &optimizer);
  return *this;
}

State& State::add(const std::string& name, DistributedOptimizer& optimizer) {
  distributed_.emplace_back(name, &optimizer);
  return *this;
}

State& State::add(const std::string& name, ElasticSampler& sampler) {
  samplers_.emplace_back(name, &sampler);
  return *this;
}

State& State::add(const std::string& name, int64_t& value) {
  values_.emplace_back(name, &value);
  return *this;
}

State& State::add(const std::string& name, ::at::Generator generator) {
  generators_.emplace_back(name, std::move(generator));
  return *this;
}

void State::register_reset_callback(std::function<void()> callback) {
  reset_callbacks_.push_back(std::move(callback));
}

namespace {

using ::torch::nn::Module;
using ::torch::optim::Optimizer;
using ::torch::optim::OptimizerParamGroup;

// A generator's state and back, under its lock (another thread may draw from it).
Tensor generator_state(const ::at::Generator& generator) {
  ::at::Generator g = generator;
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

void set_generator_state(::at::Generator& generator, const Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

// An archive's bytes, straight into one string grown to `hint` (the size of the last commit)
// at once: a stream would copy a state of hundreds of MB several times over as it grows.
std::string archive_bytes(OutputArchive& archive, std::size_t hint) {
  std::string out;
  out.reserve(hint + hint / 16);
  archive.save_to([&out](const void* data, std::size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  return out;
}

// A copy of `from` in memory the commit owns: `reuse`'s, when it has the same shape, type,
// layout and device (the previous commit's copy, which no writer reads any more), else new.
Tensor copy_of(const Tensor& from, const Tensor* reuse) {
  if (!from.defined()) return {};
  ::torch::NoGradGuard no_grad;
  if (reuse && reuse->defined() && reuse->sizes() == from.sizes() &&
      reuse->strides() == from.strides() && reuse->dtype() == from.dtype() &&
      reuse->device() == from.device()) {
    Tensor to = *reuse;
    to.copy_(from);
    return to;
  }
  return from.detach().clone();
}

// A plain module tree holding copies of `live`'s parameters and buffers under the same names,
// so that Module::save writes it as it writes `live`.
std::shared_ptr<Module> copy_module(const Module& live, const Module* reuse) {
  auto copy = std::make_shared<Module>();
  const auto old_parameters =
      reuse ? reuse->named_parameters(false) : decltype(live.named_parameters(false))();
  const auto old_buffers =
      reuse ? reuse->named_buffers(false) : decltype(live.named_buffers(false))();
  const auto old_children = reuse ? reuse->named_children() : decltype(live.named_children())();
  for (const auto& p : live.named_parameters(false)) {
    copy->register_parameter(p.key(), copy_of(p.value(), old_parameters.find(p.key())),
                             p.value().requires_grad());
  }
  for (const auto& b : live.named_buffers(false)) {
    copy->register_buffer(b.key(), copy_of(b.value(), old_buffers.find(b.key())));
  }
  for (const auto& c : live.named_children()) {
    if (!c.value()->is_serializable()) continue;  // Module::save leaves it out too
    const std::shared_ptr<Module>* old = old_children.find(c.key());
    copy->register_module(c.key(), copy_module(*c.value(), old ? old->get() : nullptr));
  }
  return copy;
}

void restore_module(const Module& saved, Module& live) {
  ::torch::NoGradGuard no_grad;
  const auto parameters = saved.named_parameters(false);
  const auto buffers = saved.named_buffers(false);
  const auto children = saved.named_children();
  for (auto& p : live.named_parameters(false)) {
    if (const Tensor* t = parameters.find(p.key())) p.value().copy_(*t);
  }
  for (auto& b : live.named_buffers(false)) {
    if (const Tensor* t = buffers.find(b.key())) b.value().copy_(*t);
  }
  for (const auto& c : live.named_children()) {
    if (const std::shared_ptr<Module>* s = children.find(c.key())) restore_module(**s, *c.value());
  }
}

// The tensors of one parameter's state, for the optimizers whose state a commit copies.
std::vector<Tensor*> state_tensors(::torch::optim::AdamParamState& s) {
  return {&s.exp_avg(), &s.exp_avg_sq(), &s.max_exp_avg_sq()};
}
std::vector<Tensor*> state_tensors(::torch::optim::AdamWParamState& s) {
  return {&s.exp_avg(), &s.exp_avg_sq(), &s.max_exp_avg_sq()};
}
std::vector<Tensor*> state_tensors(::torch::optim::SGDParamState& s) {
  return {&s.momentum_buffer()};
}
std::vector<Tensor*> state_tensors(::torch::optim::RMSpropParamState& s) {
  return {&s.square_avg(), &s.momentum_buffer(), &s.grad_avg()};
}
std::vector<Tensor*> state_tensors(::torch::optim::AdagradParamState& s) { return {&s.sum()}; }

// A copy of an optimizer of a type it knows: another optimizer of that type whose parameter
// groups hold the live parameters (only their identities, which name the state in the
// archive; the writer never reads them), copies of the groups' options and copies of the
// per-parameter state. Optimizer::save writes it as it writes the live one.
struct OptimizerCopier {
  bool (*is)(const Optimizer& live);
  std::unique_ptr<Optimizer> (*copy)(const Optimizer& live, Optimizer* reuse);
  void (*restore)(const Optimizer& saved, Optimizer& live);
};

template <class Opt, class Options, class ParamState>
struct CopierOf {
  static bool is(const Optimizer& live) { return typeid(live) == typeid(Opt); }

  static std::unique_ptr<ParamState> copy_state(const ParamState& from, ParamState* reuse) {
    auto to = std::make_unique<ParamState>(from);  // the step count, and the tensors shared
    std::vector<Tensor*> tensors = state_tensors(*to);
    std::vector<Tensor*> old = reuse ? state_tensors(*reuse) : std::vector<Tensor*>();
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      *tensors[i] = copy_of(*tensors[i], reuse ? old[i] : nullptr);
    }
    return to;
  }

  static std::unique_ptr<Optimizer> copy(const Optimizer& live, Optimizer* reuse) {
    std::vector<OptimizerParamGroup> groups;
    for (const OptimizerParamGroup& group : live.param_groups()) {
      groups.emplace_back(group.params(), group.options().clone());
    }
    auto copy =
        std::make_unique<Opt>(std::move(groups), static_cast<const Options&>(live.defaults()));
    for (const auto& [key, state] : live.state()) {
      ParamState* old = nullptr;
      if (reuse) {
        auto it = reuse->state().find(key);
        if (it != reuse->state().end()) old = static_cast<ParamState*>(it->second.get());
      }
      copy->state()[key] = copy_state(static_cast<const ParamState&>(*state), old);
    }
    return copy;
  }

  static void restore(const Optimizer& saved, Optimizer& live) {
    live.state().clear();
    for (const auto& [key, state] : saved.state()) {
      live.state()[key] = copy_state(static_cast<const ParamState&>(*state), nullptr);
    }
    for (std::size_t i = 0; i < live.param_groups().size() && i < saved.param_groups().size();
         ++i) {
      static_cast<Options&>(live.param_groups()[i].options()) =
          static_cast<const Options&>(saved.param_groups()[i].options());
    }
  }

  static constexpr OptimizerCopier table{&is, &copy, &restore};
};

namespace optim = ::torch::optim;
constexpr const OptimizerCopier* kCopiers[] = {
    &CopierOf<optim::Adam, optim::AdamOptions, optim::AdamParamState>::table,
    &CopierOf<optim::AdamW, optim::AdamWOptions, optim::AdamWParamState>::table,
    &CopierOf<optim::SGD, optim::SGDOptions, optim::SGDParamState>::table,
    &CopierOf<optim::RMSprop, optim::RMSpropOptions, optim::RMSpropParamState>::table,
    &CopierOf<optim::Adagrad, optim::AdagradOptions, optim::AdagradParamState>::table,
};

// The copier of `optimizer`'s type; null for a type the commit does not know, whose state
// then goes through its own save().
const OptimizerCopier* copier_of(const Optimizer& optimizer) {
  for (const OptimizerCopier* c : kCopiers) {
    if (c->is(optimizer)) return c;
  }
  return nullptr;
}

struct CopiedOptimizer {
  const OptimizerCopier* copier = nullptr;
  std::unique_ptr<Optimizer> optimizer;
};

}  // namespace

// What a commit saved. Either the state's bytes (`bytes` not empty: a ShardedOptimizer, whose
// consolidated state is gathered by a collective, or an optimizer of a type the commit cannot
// copy), or copies of the tensors and values, which serialize() turns into the same bytes.
struct State::Snapshot {
  struct Distributed {
    CopiedOptimizer wrapped;
    GradientReducer::PowerSgdState powersgd;
  };
  std::string bytes;
  // Under the names the state gave them.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> modules;
  std::vector<std::pair<std::string, CopiedOptimizer>> optimizers;
  std::vector<std::pair<std::string, Distributed>> distributed;
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> samplers;  // epoch, processed
  std::vector<std::pair<std::string, int64_t>> values;
  std::vector<std::pair<std::string, Tensor>> generators;  // their states
  // The size of the last serialization, to reserve the next one's at once.
  std::size_t size_hint = 0;
};

std::string State::serialize_live() const {
  OutputArchive top;
  for (const auto& [name, module] : modules_) {
    OutputArchive a;
    module->save(a);
    top.write("module." + name, a);
  }
  for (const auto& [name, optimizer] : optimizers_) {
    OutputArchive a;
    optimizer->save(a);
    top.write("optimizer." + name, a);
  }
  for (const auto& [name, optimizer] : sharded_) {
    OutputArchive a;
    optimizer->save(a, /*consolidated=*/true);
    top.write("sharded." + name, a);
  }
  for (const auto& [name, optimizer] : distributed_) {
    OutputArchive a;
    optimizer->save(a);
    top.write("distributed." + name, a);
  }
  for (const auto& [name, sampler] : samplers_) {
    top.write("sampler." + name, ::torch::tensor({sampler->epoch(), sampler->processed()}));
  }
  for (const auto& [name, value] : values_) top.write("value." + name, ::torch::tensor(*value));
  for (const auto& [name, generator] : generators_) {
    top.write("generator." + name, generator_state(generator));
  }
  // Straight into one string, grown to the size of the last commit at once: a stream would
  // copy a state of hundreds of MB several times over as it grows.
  return archive_bytes(top, saved_ ? saved_->size_hint : 0);
}

std::shared_ptr<State::Snapshot> State::take_snapshot(Snapshot* reuse) const {
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->size_hint = saved_ ? saved_->size_hint : 0;
  bool copyable = sharded_.empty();
  for (const auto& [name, optimizer] : optimizers_) copyable &= copier_of(*optimizer) != nullptr;
  for (const auto& [name, optimizer] : distributed_) {
    copyable &= copier_of(optimizer->optimizer()) != nullptr;
  }
  if (!copyable) {
    snapshot->bytes = serialize_live();
    snapshot->size_hint = snapshot->bytes.size();
    return snapshot;
  }
  // The previous copies line up with the state's objects when they came from a commit too.
  if (reuse && !reuse->bytes.empty()) reuse = nullptr;
  auto copy_optimizer = [](Optimizer& live, CopiedOptimizer* old) {
    CopiedOptimizer copy{copier_of(live), nullptr};
    Optimizer* memory = old && old->copier == copy.copier ? old->optimizer.get() : nullptr;
    copy.optimizer = copy.copier->copy(live, memory);
    return copy;
  };
  for (std::size_t i = 0; i < modules_.size(); ++i) {
    const Module* old =
        reuse && i < reuse->modules.size() ? reuse->modules[i].second.get() : nullptr;
    snapshot->modules.emplace_back(modules_[i].first, copy_module(*modules_[i].second, old));
  }
  for (std::size_t i = 0; i < optimizers_.size(); ++i) {
    CopiedOptimizer* old =
        reuse && i < reuse->optimizers.size() ? &reuse->optimizers[i].second : nullptr;
    snapshot->optimizers.emplace_back(optimizers_[i].first,
                                      copy_optimizer(*optimizers_[i].second, old));
  }
  for (std::size_t i = 0; i < distributed_.size(); ++i) {
    Snapshot::Distributed* old =
        reuse && i < reuse->distributed.size() ? &reuse->distributed[i].second : nullptr;
    DistributedOptimizer& live = *distributed_[i].second;
    Snapshot::Distributed copy{copy_optimizer(live.optimizer(), old ? &old->wrapped : nullptr),
                               live.powersgd_state()};
    for (auto& [name, q] : copy.powersgd.qs) q = copy_of(q, nullptr);
    snapshot->distributed.emplace_back(distributed_[i].first, std::move(copy));
  }
  for (const auto& [name, sampler] : samplers_) {
    snapshot->samplers.emplace_back(name, std::make_pair(sampler->epoch(), sampler->processed()));
  }
  for (const auto& [name, value] : values_) snapshot->values.emplace_back(name, *value);
  for (const auto& [name, generator] : generators_) {
    snapshot->generators.emplace_back(name, generator_state(generator));
  }
  return snapshot;
}

namespace {

// What DistributedOptimizer::save writes, from a commit's copy of one.
void save_distributed(const Optimizer& wrapped_copy, const GradientReducer::PowerSgdState& powersgd,
                      OutputArchive& archive) {
  OutputArchive wrapped;
  wrapped_copy.save(wrapped);
  archive.write("optimizer", wrapped);
  archive.write("powersgd.iteration", ::torch::tensor(powersgd.iteration));
  for (const auto& [name, q] : powersgd.qs) archive.write("powersgd." + name, q);
}

}  // namespace

std::string State::serialize(const Snapshot& snapshot) {
  if (!snapshot.bytes.empty()) return snapshot.bytes;
  // The archive serialize_live() writes, from the copies.
  OutputArchive top;
  for (const auto& [name, module] : snapshot.modules) {
    OutputArchive a;
    module->save(a);
    top.write("module." + name, a);
  }
  for (const auto& [name, copy] : snapshot.optimizers) {
    OutputArchive a;
    copy.optimizer->save(a);
    top.write("optimizer." + name, a);
  }
  for (const auto& [name, copy] : snapshot.distributed) {
    OutputArchive a;
    save_distributed(*copy.wrapped.optimizer, copy.powersgd, a);
    top.write("distributed." + name, a);
  }
  for (const auto& [name, sampler] : snapshot.samplers) {
    top.write("sampler." + name, ::torch::tensor({sampler.first, sampler.second}));
  }
  for (const auto& [name, value] : snapshot.values) {
    top.write("value." + name, ::torch::tensor(value));
  }
  for (const auto& [name, state] : snapshot.generators) top.write("generator." + name, state);
  return archive_bytes(top, snapshot.size_hint);
}

void State::restore_from(const Snapshot& snapshot) {
  if (!snapshot.bytes.empty()) {
    load(snapshot.bytes);
    return;
  }
  for (std::size_t i = 0; i < modules_.size(); ++i) {
    restore_module(*snapshot.modules[i].second, *modules_[i].second);
  }
  for (std::size_t i = 0; i < optimizers_.size(); ++i) {
    const CopiedOptimizer& copy = snapshot.optimizers[i].second;
    copy.copier->restore(*copy.optimizer, *optimizers_[i].second);
  }
  for (std::size_t i = 0; i < distributed_.size(); ++i) {
    // PowerSGD's state goes back through the optimizer's own load (rare: a restore).
    const Snapshot::Distributed& copy = snapshot.distributed[i].second;
    OutputArchive out;
    save_distributed(*copy.wrapped.optimizer, copy.powersgd, out);
    const std::string bytes = archive_bytes(out, 0);
    InputArchive in;
    in.load_from(bytes.data(), bytes.size());
    distributed_[i].second->load(in);
  }
  for (std::size_t i = 0; i < samplers_.size(); ++i) {
    const auto& [epoch, processed] = snapshot.samplers[i].second;
    samplers_[i].second->load(epoch, processed);
  }
  for (std::size_t i = 0; i < values_.size(); ++i) *values_[i].second = snapshot.values[i].second;
  for (std::size_t i = 0; i < generators_.size(); ++i) {
    set_generator_state(generators_[i].second, snapshot.generators[i].second);
  }
}

void State::load(const std::string& bytes) {
  c10::optional<::torch::Device> device;  // the first module's (std::optional in LibTorch 2)
  for (const auto& [name, module] : modules_) {
    for (const Tensor& p : module->parameters()) {
      device = p.device();
      break;
    }
    if (device) break;
  }
  InputArchive top;
  top.load_from(bytes.data(), bytes.size(), device);
  for (const auto& [name, module] : modules_) {
    InputArchive a;
    top.read("module." + name, a);
    module->load(a);
  }
  for (const auto& [name, optimizer] : optimizers_) {
    InputArchive a;
    top.read("optimizer." + name, a);
    load_optimizer(*optimizer, a);
  }
  for (const auto& [name, optimizer] : sharded_) {
    InputArchive a;
    top.read("sharded." + name, a);
    optimizer->load(a);
  }
  for (const auto& [name, optimizer] : distributed_) {
    InputArchive a;
    top.read("distributed." + name, a);
    optimizer->load(a);
  }
  for (const auto& [name, sampler] : samplers_) {
    Tensor t;
    top.read("sampler." + name, t);
    sampler->load(t[0].item<int64_t>(), t[1].item<int64_t>());
  }
  for (const auto& [name, value] : values_) {
    Tensor t;
    top.read("value." + name, t);
    *value = t.item<int64_t>();
  }
  for (auto& [name, generator] : generators_) {
    Tensor t;
    top.read("generator." + name, t);
    set_generator_state(generator, t.cpu());
  }
}

void State::commit() {
  // The copy before last lends its memory unless the store's writer still reads it.
  std::shared_ptr<Snapshot> reuse = std::move(spare_);
  if (reuse.use_count() != 1) reuse.reset();
  // The writer's reads of it happened before it let it go.
  std::atomic_thread_fence(std::memory_order_acquire);
  std::shared_ptr<Snapshot> snapshot = take_snapshot(reuse.get());
  reuse.reset();
  spare_ = std::move(saved_);
  saved_ = snapshot;
  ++number_;
  StatusOr<std::string> dir = ::chorus::elastic::commit_dir();
  throw_if_error(dir.status());
  if (!dir->empty()) {
    // The writer serializes this copy, which no later commit changes.
    std::shared_ptr<const Snapshot> frozen = std::move(snapshot);
    throw_if_error(::chorus::elastic::store_commit_async(*dir, number_,
                                                         [frozen] { return serialize(*frozen); }));
  }
  StatusOr<bool> added = ::chorus::elastic::hosts_added();
  throw_if_error(added.status());
  if (*added) {
    // Every node holds this commit before the job is relaunched from it.
    throw_if_error(::chorus::elastic::flush_commits());
    throw HostsUpdated();
  }
}

void State::restore() {
  if (saved_) restore_from(*saved_);
}

void State::sync() {
  // A sharded optimizer's state is gathered by every rank, so all of them copy it then.
  std::shared_ptr<Snapshot> snapshot =
      rank() == 0 || !sharded_.empty() ? take_snapshot(nullptr) : nullptr;
  std::string bytes = rank() == 0 ? serialize(*snapshot) : std::string();
  Tensor length = ::torch::tensor({static_cast<int64_t>(bytes.size())}, ::torch::kInt64);
  broadcast_(length, 0, "elastic.sync.length");
  bytes.resize(static_cast<std::size_t>(length.item<int64_t>()));
  Tensor data =
      ::torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, ::torch::kUInt8);
  broadcast_(data, 0, "elastic.sync");
  if (rank() != 0) {
    load(bytes);
    // Rank 0's bytes are this rank's saved state; the next commit copies tensors again.
    snapshot = std::make_shared<Snapshot>();
    snapshot->bytes = bytes;
  }
  snapshot->size_hint = bytes.size();
  spare_.reset();
  saved_ = std::move(snapshot);
}

bool State::resume_from_newest_commit() {
  StatusOr<std::string> dir = ::chorus::elastic::commit_dir();
  throw_if_error(dir.status());
  if (dir->empty()) return false;
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::optional<::chorus::elastic::CommittedState>> newest =
      ::chorus::elastic::newest_commit(*dir);
  throw_if_error(newest.status());
  if (!*newest) return false;
  load((*newest)->bytes);
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->bytes = std::move((*newest)->bytes);
  snapshot->size_hint = snapshot->bytes.size();
  saved_ = std::move(snapshot);
  number_ = (*newest)->number;
  if (rank() == 0) {
    std::fprintf(stderr, "chorus.elastic: resumed from commit %llu (%.1f MB) in %.2f s\n",
                 static_cast<unsigned long long>(number_), saved_->bytes.size() / 1e6,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return true;
}

bool State::restore_newest_held_commit() {
  // Serialized from this rank's copy only where it is the one the others take.
  std::shared_ptr<const Snapshot> mine = saved_;
  StatusOr<::chorus::elastic::CommittedState> held = ::chorus::elastic::newest_held_commit(
      number_, [mine] { return mine ? serialize(*mine) : std::string(); });
  throw_if_error(held.status());
  number_ = held->number;
  if (!held->bytes.empty()) {
    load(held->bytes);
    auto snapshot = std::make_shared<Snapshot>();
    snapshot->bytes = std::move(held->bytes);
    snapshot->size_hint = snapshot->bytes.size();
    spare_.reset();
    saved_ = std::move(snapshot);
  } else {
    restore();
  }
  return held->number > 0;
}

namespace {

// Resets this worker in place, again after a failure during the reset itself (at most a few
// times in a row); false when chorusrun dropped it from the job.
bool reset_in_place(const std::string& why) {
  std::fprintf(stderr, "chorus.elastic: rank %d resets in place: %s\n", rank(), why.c_str());
  constexpr int kMostTries = 5;
  for (int tries = 1;; ++tries) {
    const auto start = std::chrono::steady_clock::now();
    const Status s = ::chorus::elastic::reset();
    if (s.ok()) {
      std::fprintf(stderr, "chorus.elastic: rank %d of %d after the reset (%.2f s)\n", rank(),
                   size(),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return true;
    }
    if (s.code() == StatusCode::kFailedPrecondition) {
      std::fprintf(stderr, "chorus.elastic: %s\n", s.message().c_str());
      return false;
    }
    if (tries == kMostTries) throw_if_error(s);
    std::fprintf(stderr, "chorus.elastic: the reset failed (%s); resetting again\n",
                 s.to_string().c_str());
  }
}

}  // namespace

int run(State& state, const std::function<void(State&)>& train) {
  const bool in_place = ::chorus::elastic::resets_in_place();
  // A worker that joins a job resetting in place after its first round (an added host's)
  // takes the state the others agree on after their reset, as they do.
  bool was_reset = in_place && ::chorus::elastic::start_number() > 1;
  if (!was_reset && state.resume_from_newest_commit()) {
    for (const auto& callback : state.reset_callbacks_) callback();
  }
  bool synced = false;
  for (;;) {
    try {
      if (was_reset) {
        // Every rank takes the same state: the newest commit some rank holds, or where none
        // was made, the state every rank started from (added workers take it from rank 0).
        was_reset = false;
        // Where none was made, rank 0's state is every rank's (sync below).
        synced = state.restore_newest_held_commit();
        if (synced && rank() == 0) {
          std::fprintf(stderr, "chorus.elastic: resumed in place from commit %llu\n",
                       static_cast<unsigned long long>(state.number_));
        }
        for (const auto& callback : state.reset_callbacks_) callback();
      }
      // sync() also saves the state, which a reset before the first commit returns to.
      if (!synced) state.sync();
      synced = true;
      train(state);
      // Every rank finished: the commits still being written land before the store is
      // removed, and a write that failed fails the job here rather than passing unseen. A
      // rank lost now resets the others, whose training returns at once from the last commit.
      throw_if_error(::chorus::elastic::flush_commits());
      throw_if_error(barrier().wait());
      break;
    } catch (const HostsUpdated&) {
      // Every rank threw it at the same commit, which every node stored (commit() flushed).
      if (!in_place) return kHostsUpdatedStatus;
      if (!reset_in_place("hosts were added")) return kLeftJobStatus;
    } catch (const ::chorus::Error& e) {
      if (!in_place) throw;
      if (!reset_in_place(e.what())) return kLeftJobStatus;
    }
    was_reset = true;
  }
  StatusOr<std::string> dir = ::chorus::elastic::commit_dir();
  throw_if_error(dir.status());
  if (!dir->empty()) throw_if_error(::chorus::elastic::remove_commits(*dir));
  return 0;
}

}  // namespace chorus::torch::elastic
