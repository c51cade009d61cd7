#include "chorus/torch/sharded_reducer.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <optional>

#include "chorus/torch/tensor_ops.h"
#include "torch/accumulated_hook.h"
#include "torch/gradient_reduction.h"
#include "torch/parameter_layout.h"
#include "torch/shard_layout.h"

namespace chorus::torch {

using ::torch::Tensor;

struct ShardedReducer::State {
  struct Param {
    Tensor param;
    std::shared_ptr<::torch::autograd::Node> accumulator;  // keeps the hooked node alive
    std::size_t bucket = 0;
    int64_t offset = 0;
    int passes_left = 0;
    bool ready = false;
  };
  struct Run {
    Bucket layout;
    std::vector<ShardSlot> slots;      // parameter: index into the caller's list
    std::vector<std::size_t> members;  // index into params
    std::string name;
    Tensor params;  // stages 1 and 2: the parameters' storage
    Tensor grads;   // stages 0 and 1: the gradients' storage
    Tensor shard;   // stages 1 and 2: this rank's elements of params
    Tensor wire;    // what travels: grads (compressed) or the packed gradients (stage 2)
    std::size_t ready = 0;
    bool started = false;
    bool submitted = false;  // its collective is in flight, not harvested yet
    TensorHandle handle;
    std::optional<Error> refused;
  };

  ShardedOptions options;
  AllreduceOptions allreduce;
  int rank = 0;
  int ranks = 1;
  mutable std::mutex mu;
  std::vector<Param> params;
  std::vector<Run> buckets;
  std::vector<std::string> names;  // of params
  std::size_t given = 0;           // parameters given, frozen ones included
  std::vector<Tensor> shards;
  int64_t started_count = 0;
  std::vector<std::size_t> in_flight;  // stage 2: buckets reduce-scattering, oldest first

  Tensor grad_view(const Run& b, const Param& p) const {
    return b.grads.narrow(0, p.offset, p.param.numel()).view(p.param.sizes());
  }

  // The dtype gradients of `like` travel in.
  ::torch::ScalarType wire_type(const Tensor& like) const {
    return chorus::torch::wire_type(like.scalar_type(), options.compression);
  }

  // Starts b's reduction (mu held). Runs in an autograd hook, so a submit that throws is
  // kept for synchronize() to report.
  void start(Run& b) {
    b.started = true;
    started_count += static_cast<int64_t>(b.members.size());
    try {
      submit(b);
    } catch (const Error& e) {
      b.refused = e;
    }
  }

  void submit(Run& b) {
    ::torch::NoGradGuard no_grad;
    if (options.stage < 2) {
      for (std::size_t i : b.members) {
        Param& p = params[i];
        Tensor grad = p.param.grad();
        Tensor view = grad_view(b, p);
        if (!grad.defined()) {
          view.zero_();
        } else if (grad.is_sparse()) {
          view.copy_(grad.to_dense());
        } else if (grad.data_ptr() != view.data_ptr()) {
          view.copy_(grad);  // the trainer replaced the view (zero_grad to none)
        } else {
          continue;
        }
        p.param.mutable_grad() = view;
      }
      const bool compressed = wire_type(b.grads) != b.grads.scalar_type();
      b.wire = compressed ? b.grads.to(wire_type(b.grads)) : b.grads;
      b.handle = allreduce_async_(b.wire, b.name, allreduce);
    } else {
      const auto type = wire_type(b.params);
      release_completed();
      if (Tensor alone = unpacked(b, type); alone.defined()) {
        // A bucket of one parameter that needs no padding or cast travels from the
        // gradient itself: no packed copy.
        params[b.members.front()].param.mutable_grad() = Tensor();
        b.wire = alone;
        submit_scatter(b);
        return;
      }
      b.wire = ::torch::empty({b.layout.padded}, b.params.options().dtype(type));
      b.wire.narrow(0, b.layout.numel, b.layout.padded - b.layout.numel).zero_();
      for (std::size_t i : b.members) {
        Param& p = params[i];
        Tensor grad = p.param.grad();
        Tensor slot = b.wire.narrow(0, p.offset, p.param.numel());
        if (!grad.defined()) {
          slot.zero_();
        } else {
          slot.copy_((grad.is_sparse() ? grad.to_dense() : grad).reshape({-1}));
        }
        p.param.mutable_grad() = Tensor();  // this rank keeps only its shard of the sum
      }
      submit_scatter(b);
      return;
    }
    b.submitted = true;
  }

  // Stage 2: the gradient of b's one parameter as a flat tensor, when it can travel as it is
  // (dense, contiguous, the wire's dtype, the bucket's length without padding); else none.
  Tensor unpacked(const Run& b, ::torch::ScalarType type) const {
    if (b.members.size() != 1 || b.layout.numel != b.layout.padded) return Tensor();
    const Tensor grad = params[b.members.front()].param.grad();
    if (!grad.defined() || grad.is_sparse() || !grad.is_contiguous() ||
        grad.scalar_type() != type) {
      return Tensor();
    }
    return grad.reshape({-1});
  }

  // Stage 2: reduce-scatters b.wire; b.wire lives until the result is harvested.
  void submit_scatter(Run& b) {
    ReducescatterOptions scatter;
    scatter.op = allreduce.op;
    scatter.prescale = allreduce.prescale;
    scatter.postscale = allreduce.postscale;
    scatter.process_set = allreduce.process_set;
    b.handle = reducescatter_async(b.wire, b.name, scatter);
    in_flight.push_back(static_cast<std::size_t>(&b - buckets.data()));
    b.submitted = true;
  }

  // Stages 1 and 2: makes every parameter a view into its bucket again where the trainer
  // replaced its storage (Module::load sets the tensors it reads in place of the old ones),
  // its value copied into the bucket first (mu held).
  void rebind_parameters() {
    if (options.stage == 0) return;
    ::torch::NoGradGuard no_grad;
    for (Param& p : params) {
      Tensor view =
          buckets[p.bucket].params.narrow(0, p.offset, p.param.numel()).view(p.param.sizes());
      if (p.param.data_ptr() == view.data_ptr()) continue;
      view.copy_(p.param);
      p.param.set_data(view);
    }
  }

  void mark_ready(std::size_t i) {
    Param& p = params[i];
    p.ready = true;
    Run& b = buckets[p.bucket];
    if (++b.ready == b.members.size()) start(b);
  }

  void on_accumulated(std::size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    Param& p = params[i];
    if (last_pass(p.ready, &p.passes_left, names[i], options.backward_passes_per_step)) {
      mark_ready(i);
    }
  }

  // Waits for b's collective and leaves its result where synchronize() says, releasing what
  // travelled (mu held); a failure is kept in b.refused. Runs once per step.
  void harvest(Run& b) {
    if (!b.submitted) return;
    b.submitted = false;
    ::torch::NoGradGuard no_grad;
    try {
      Tensor out = b.handle.wait();
      if (options.stage < 2) {
        if (!b.wire.is_same(b.grads)) b.grads.copy_(b.wire);
        if (options.stage == 1) {
          b.shard.mutable_grad() = b.grads.narrow(0, rank * b.layout.shard(), b.layout.shard());
        }
      } else {
        b.shard.mutable_grad() =
            out.scalar_type() == b.params.scalar_type() ? out : out.to(b.params.scalar_type());
      }
    } catch (const Error& e) {
      if (!b.refused) b.refused = e;
    }
    b.handle = TensorHandle();
    b.wire = Tensor();
  }

  // Stage 2, before another bucket is packed (mu held): the buckets whose reduce-scatter
  // completed give back their packed buffers. Never a wait here: ranks start buckets in
  // orders of their own (a parameter unused on one rank starts at its synchronize()), so a
  // rank waiting inside backward for one could wait for a peer that waits for it.
  void release_completed() {
    for (std::size_t k : in_flight) {
      if (buckets[k].submitted && buckets[k].handle.poll()) harvest(buckets[k]);
    }
    std::erase_if(in_flight, [this](std::size_t k) { return !buckets[k].submitted; });
  }

  // Waits for b, then readies it for the next step; returns its failure, if any.
  std::optional<Error> finish(Run& b) {
    harvest(b);
    std::optional<Error> error = b.refused;
    b.ready = 0;
    b.started = false;
    b.refused.reset();
    for (std::size_t i : b.members) {
      params[i].ready = false;
      params[i].passes_left = options.backward_passes_per_step;
    }
    return error;
  }
};

namespace {

std::string kind_of(const Tensor& t) {
  return std::string(c10::toString(t.scalar_type())) + " on " + t.device().str();
}

void throw_first(const std::vector<std::optional<Error>>& errors) {
  for (const auto& e : errors) {
    if (e) throw *e;
  }
}

}  // namespace

ShardedReducer::ShardedReducer(NamedParameters parameters, std::vector<int> group_of,
                               ShardedOptions options)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  if (options.stage < 0 || options.stage > 2) {
    throw Error(invalid_argument("ShardedOptimizer: stage is 0, 1 or 2, got " +
                                 std::to_string(options.stage)));
  }
  if (options.bucket_bytes <= 0) {
    throw Error(invalid_argument("ShardedOptimizer: bucket_bytes must be positive, got " +
                                 std::to_string(options.bucket_bytes)));
  }
  if (!group_of.empty() && group_of.size() != parameters.size()) {
    throw Error(invalid_argument("ShardedOptimizer: " + std::to_string(group_of.size()) +
                                 " group indices for " + std::to_string(parameters.size()) +
                                 " parameters"));
  }
  s.allreduce = gradient_reduction(options.op, options.gradient_predivide_factor,
                                   options.backward_passes_per_step, options.process_set);
  s.options = std::move(options);
  check_same_layout(parameters, s.options.name_prefix, s.options.process_set);
  s.rank = process_set_rank(s.options.process_set);
  s.ranks = process_set_size(s.options.process_set);
  const int stage = s.options.stage;
  s.given = parameters.size();

  std::vector<ParameterShape> shapes;
  std::vector<std::size_t> given;  // params[k] is parameters[given[k]]
  for (std::size_t k = 0; k < parameters.size(); ++k) {
    const Tensor& t = parameters[k].second;
    if (!t.requires_grad()) continue;  // frozen: not reduced, not updated
    shapes.push_back({t.numel(), static_cast<int64_t>(t.element_size()),
                      group_of.empty() ? 0 : group_of[k], kind_of(t)});
    given.push_back(k);
    s.names.push_back(parameters[k].first);
    State::Param p;
    p.param = t;
    p.accumulator = ::torch::autograd::impl::grad_accumulator(t);
    if (!p.accumulator) {
      throw Error(invalid_argument("parameter '" + parameters[k].first + "' is not a leaf"));
    }
    p.passes_left = s.options.backward_passes_per_step;
    s.params.push_back(std::move(p));
  }
  ::torch::NoGradGuard no_grad;
  for (Bucket& layout : lay_out_buckets(shapes, s.options.bucket_bytes, stage == 0 ? 1 : s.ranks)) {
    State::Run b;
    b.name = s.options.name_prefix + "bucket." + std::to_string(s.buckets.size());
    const Tensor& first = s.params[layout.slots.front().parameter].param;
    auto flat = [&] { return ::torch::zeros({layout.padded}, first.options()); };
    if (stage < 2) b.grads = flat();
    if (stage > 0) {
      b.params = flat();
      b.shard = b.params.narrow(0, s.rank * layout.shard(), layout.shard());
    }
    for (const BucketSlot& slot : layout.slots) {
      State::Param& p = s.params[slot.parameter];
      p.bucket = s.buckets.size();
      p.offset = slot.offset;
      b.members.push_back(slot.parameter);
      b.slots.push_back({given[slot.parameter], slot.offset, slot.numel});
      if (stage > 0) {
        Tensor view = b.params.narrow(0, slot.offset, slot.numel).view(p.param.sizes());
        view.copy_(p.param);
        p.param.set_data(view);
      }
    }
    b.layout = std::move(layout);
    if (stage > 0) s.shards.push_back(b.shard);
    s.buckets.push_back(std::move(b));
  }
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    State::Param& p = s.params[i];
    p.param.mutable_grad() = stage < 2 ? s.grad_view(s.buckets[p.bucket], p) : Tensor();
    p.accumulator->add_post_hook(
        std::make_unique<AccumulatedHook<State>>(std::weak_ptr<State>(state_), i));
  }
}

ShardedReducer::~ShardedReducer() {
  std::lock_guard<std::mutex> lock(state_->mu);
  for (auto& b : state_->buckets) state_->finish(b);
}

void ShardedReducer::zero_grad() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  ::torch::NoGradGuard no_grad;
  for (auto& b : s.buckets) {
    if (s.options.stage < 2) b.grads.zero_();
    if (s.options.stage == 2) b.shard.mutable_grad() = Tensor();
  }
  for (auto& p : s.params) {
    if (s.options.stage == 2) {
      p.param.mutable_grad() = Tensor();
      continue;
    }
    Tensor view = s.grad_view(s.buckets[p.bucket], p);
    if (!p.param.grad().defined() || p.param.grad().data_ptr() != view.data_ptr()) {
      p.param.mutable_grad() = view;
    }
  }
}

void ShardedReducer::synchronize() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  s.rebind_parameters();
  for (auto& b : s.buckets) {
    if (b.started) continue;
    for (std::size_t i : b.members) {
      if (!s.params[i].ready) s.mark_ready(i);
    }
  }
  std::vector<std::optional<Error>> errors;
  for (auto& b : s.buckets) errors.push_back(s.finish(b));
  s.in_flight.clear();
  s.started_count = 0;
  throw_first(errors);
}

void ShardedReducer::gather_parameters() {
  State& s = *state_;
  if (s.options.stage == 0) return;
  std::vector<TensorHandle> handles;
  std::vector<std::optional<Error>> errors;
  // The last bucket holds the first parameters forward uses: it goes first.
  for (std::size_t k = s.buckets.size(); k-- > 0;) {
    State::Run& b = s.buckets[k];
    try {
      handles.push_back(allgather_into_async(b.shard, b.params,
                                             s.options.name_prefix + "gather." + std::to_string(k),
                                             s.options.process_set));
    } catch (const Error& e) {
      errors.push_back(e);
    }
  }
  for (auto& h : handles) {
    try {
      h.wait();
    } catch (const Error& e) {
      errors.push_back(e);
    }
  }
  throw_first(errors);
}

double ShardedReducer::clip_grad_norm(double max_norm, double norm_type) {
  State& s = *state_;
  if (s.options.stage == 0) {
    throw Error(failed_precondition(
        "clip_grad_norm of the shards needs stage 1 or 2; at stage 0 every rank holds the "
        "whole gradient: use torch::nn::utils::clip_grad_norm_"));
  }
  ::torch::NoGradGuard no_grad;
  const bool inf = std::isinf(norm_type);
  Tensor local = ::torch::zeros({1}, ::torch::kFloat64);
  for (const Tensor& shard : s.shards) {
    if (!shard.grad().defined()) continue;
    Tensor g = shard.grad().to(::torch::kFloat64).abs();
    local = inf ? ::torch::maximum(local, g.max().reshape({1}))
                : local + g.pow(norm_type).sum().reshape({1});
  }
  AllreduceOptions over_set;
  over_set.op = inf ? ReduceOp::kMax : ReduceOp::kSum;
  over_set.process_set = s.options.process_set;
  const double total_power =
      allreduce(local, s.options.name_prefix + "grad_norm", over_set).item<double>();
  const double total = inf ? total_power : std::pow(total_power, 1.0 / norm_type);
  const double coefficient = max_norm / (total + 1e-6);
  if (coefficient < 1.0) {
    for (auto& b : s.buckets) {
      if (s.options.stage == 1) {
        b.grads.mul_(coefficient);  // the whole gradient, which every rank holds
      } else if (b.shard.grad().defined()) {
        b.shard.mutable_grad().mul_(coefficient);
      }
    }
  }
  return total;
}

std::vector<Tensor> ShardedReducer::gather_to_parameters(
    const std::vector<Tensor>& shard_values) const {
  const State& s = *state_;
  if (s.options.stage == 0) {
    throw Error(failed_precondition("gather_to_parameters: stage 0 has no shards"));
  }
  if (shard_values.size() != s.buckets.size()) {
    throw Error(invalid_argument("gather_to_parameters: " + std::to_string(shard_values.size()) +
                                 " values for " + std::to_string(s.buckets.size()) + " buckets"));
  }
  ::torch::NoGradGuard no_grad;
  std::vector<Tensor> out(s.given);
  std::vector<std::pair<std::size_t, TensorHandle>> handles;
  std::vector<Tensor> whole(s.buckets.size());
  // Every rank gathers every bucket, with zeros where its value is undefined: whether a
  // value is defined may differ across ranks only if their optimizers differ.
  for (std::size_t k = 0; k < s.buckets.size(); ++k) {
    const State::Run& b = s.buckets[k];
    const int64_t n = b.layout.shard();
    Tensor mine = shard_values[k].defined() ? shard_values[k].reshape({-1}).contiguous()
                                            : ::torch::zeros({n}, b.shard.options());
    if (mine.numel() != n) {
      throw Error(invalid_argument("gather_to_parameters: bucket " + std::to_string(k) + " has " +
                                   std::to_string(mine.numel()) + " elements where its shard has " +
                                   std::to_string(n)));
    }
    whole[k] = ::torch::empty({b.layout.padded}, mine.options());
    handles.emplace_back(
        k, allgather_into_async(mine, whole[k],
                                s.options.name_prefix + "consolidate." + std::to_string(k),
                                s.options.process_set));
  }
  std::vector<std::optional<Error>> errors;
  for (auto& [k, h] : handles) {
    try {
      h.wait();
    } catch (const Error& e) {
      errors.push_back(e);
    }
  }
  throw_first(errors);
  for (std::size_t k = 0; k < s.buckets.size(); ++k) {
    if (!shard_values[k].defined()) continue;
    for (std::size_t m = 0; m < s.buckets[k].members.size(); ++m) {
      const ShardSlot& slot = s.buckets[k].slots[m];
      const Tensor& param = s.params[s.buckets[k].members[m]].param;
      out[slot.parameter] = whole[k].narrow(0, slot.offset, slot.numel).view(param.sizes()).clone();
    }
  }
  return out;
}

std::vector<Tensor> ShardedReducer::shard_from_parameters(const std::vector<Tensor>& values) const {
  const State& s = *state_;
  if (s.options.stage == 0) {
    throw Error(failed_precondition("shard_from_parameters: stage 0 has no shards"));
  }
  if (values.size() != s.given) {
    throw Error(invalid_argument("shard_from_parameters: " + std::to_string(values.size()) +
                                 " values for " + std::to_string(s.given) + " parameters"));
  }
  ::torch::NoGradGuard no_grad;
  std::vector<Tensor> out;
  for (const State::Run& b : s.buckets) {
    Tensor whole;
    for (const ShardSlot& slot : b.slots) {
      const Tensor& v = values[slot.parameter];
      if (!v.defined()) continue;
      if (v.numel() != slot.numel) {
        throw Error(invalid_argument(
            "shard_from_parameters: parameter " + std::to_string(slot.parameter) + " has " +
            std::to_string(slot.numel) + " elements, its value " + std::to_string(v.numel())));
      }
      if (!whole.defined()) {
        whole = ::torch::zeros({b.layout.padded}, v.options().device(b.shard.device()));
      }
      whole.narrow(0, slot.offset, slot.numel).copy_(v.reshape({-1}));
    }
    const int64_t n = b.layout.shard();
    out.push_back(whole.defined() ? whole.narrow(0, s.rank * n, n).clone() : Tensor());
  }
  return out;
}

int ShardedReducer::stage() const { return state_->options.stage; }
const std::vector<Tensor>& ShardedReducer::shards() const { return state_->shards; }
std::size_t ShardedReducer::bucket_count() const { return state_->buckets.size(); }
int ShardedReducer::group_of_bucket(std::size_t bucket) const {
  return state_->buckets.at(bucket).layout.group;
}
const std::vector<ShardSlot>& ShardedReducer::slots(std::size_t bucket) const {
  return state_->buckets.at(bucket).slots;
}
int64_t ShardedReducer::padded_numel(std::size_t bucket) const {
  return state_->buckets.at(bucket).layout.padded;
}
int ShardedReducer::shard_rank() const { return state_->options.stage == 0 ? 0 : state_->rank; }
ProcessSet ShardedReducer::process_set() const { return state_->options.process_set; }
int ShardedReducer::shard_count() const { return state_->options.stage == 0 ? 1 : state_->ranks; }

int64_t ShardedReducer::reductions_started() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->started_count;
}

int64_t ShardedReducer::gradient_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  int64_t bytes = 0;
  for (const auto& b : state_->buckets) {
    const Tensor& held = state_->options.stage < 2 ? b.grads : b.shard.grad();
    if (held.defined()) bytes += held.numel() * static_cast<int64_t>(held.element_size());
  }
  return bytes;
}

}  // namespace chorus::torch
