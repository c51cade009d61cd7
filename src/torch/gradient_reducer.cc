#include "chorus/torch/gradient_reducer.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <mutex>
#include <optional>

#include "chorus/elastic.h"
#include "chorus/torch/tensor_ops.h"
#include "torch/accumulated_hook.h"
#include "torch/gradient_reduction.h"
#include "torch/parameter_layout.h"
#include "torch/powersgd.h"

namespace chorus::torch {

using ::torch::Tensor;

struct GradientReducer::State {
  struct Param {
    std::string name;  // the collective's name
    Tensor param;
    std::shared_ptr<::torch::autograd::Node> accumulator;  // keeps the hooked node alive
    std::size_t group = 0;
    int passes_left = 0;
    bool ready = false;     // its gradient for this step is complete
    bool sparse = false;    // a sparse gradient came (without sparse_as_dense)
    int64_t densified = 0;  // this step's sparse gradient went dense: its sparse_dim
  };
  // Parameters reduced by one collective: a grouped allreduce, or a plain one for a single
  // parameter.
  struct Group {
    std::vector<std::size_t> members;
    std::size_t ready = 0;
    bool started = false;
    std::vector<Tensor> grads;  // the dense gradients being reduced
    std::vector<Tensor> wires;  // their 16-bit copies, with compression
    TensorHandle handle;        // the dense reduction, when there is one
    bool dense_started = false;
    std::vector<std::pair<std::size_t, TensorHandle>> sparse;  // (parameter, its reduction)
    std::optional<Error> refused;  // a submit that failed: synchronize() reports it
  };

  DistributedOptimizerOptions options;
  AllreduceOptions allreduce;
  mutable std::mutex mu;
  std::vector<Param> params;
  std::vector<Group> groups;
  std::unique_ptr<PowerSgd> powersgd;  // with options.powersgd
  int64_t started_count = 0;
  bool layouts_agreed = false;
  NamedParameters all_parameters;  // as given, frozen ones too
  // The job's start (chorus::elastic::start_number) of the last agreement on the
  // parameters; -1: none yet.
  int64_t agreed_in = -1;

  // The ranks wrap the same parameters, and reduce sparse gradients alike (two small
  // collectives). At construction in a job's first start; again at the first synchronize()
  // of each later start, where an elastic reset in place brought workers that joined the
  // round (which construct their optimizer while the others do not).
  void agree_on_parameters() {
    check_same_layout(all_parameters, options.name_prefix, options.process_set);
    // Ranks that reduced one gradient dense and the other sparse would wait for each other.
    const bool dense = options.sparse_as_dense;
    Tensor both = max_over_set(::torch::tensor({dense ? 1 : 0, dense ? 0 : 1}, ::torch::kInt64),
                               "sparse_as_dense");
    if (both[0].item<int64_t>() == 1 && both[1].item<int64_t>() == 1) {
      throw Error(Status(StatusCode::kMismatch,
                         "DistributedOptimizer: sparse_as_dense differs across ranks; every rank "
                         "must pass the same value"));
    }
  }

  // The largest value of each entry of `local` over the set (mu held).
  Tensor max_over_set(Tensor local, const std::string& what) const {
    AllreduceOptions max;
    max.op = ReduceOp::kMax;
    max.process_set = options.process_set;
    return chorus::torch::allreduce(local, options.name_prefix + what, max);
  }

  // At the first synchronize(), before the gradients that backward did not produce here are
  // filled in: the ranks agree on which parameters had sparse gradients (one small
  // allreduce), so that a rank without such a gradient sends an empty sparse one, not dense
  // zeros.
  void agree_on_layouts() {
    const auto n = static_cast<int64_t>(params.size());
    Tensor local = ::torch::zeros({n}, ::torch::kInt64);
    for (int64_t i = 0; i < n; ++i) local[i] = params[i].sparse ? 1 : 0;
    Tensor agreed = max_over_set(local, "sparse_layout");
    for (int64_t i = 0; i < n; ++i) params[i].sparse = agreed[i].item<int64_t>() == 1;
  }

  // p's gradient for this step, defined (mu held). Sparse stays sparse unless
  // sparse_as_dense, decided from the gradient itself every step.
  Tensor gradient_of(Param& p) {
    Tensor grad = p.param.grad();
    if (!grad.defined()) {
      // No gradient on this rank this step: contribute zeros so the others don't wait, in
      // the layout this parameter's gradients had before (an empty sparse tensor may have
      // any sparse dimensions: sparse_allreduce_async ignores them).
      p.param.mutable_grad() = p.sparse
                                   ? ::torch::sparse_coo_tensor(p.param.sizes(), p.param.options())
                                   : ::torch::zeros_like(p.param);
    } else if (grad.is_sparse() && options.sparse_as_dense) {
      p.densified = grad.sparse_dim();
      p.param.mutable_grad() = grad.to_dense();
    } else if (grad.is_sparse()) {
      p.sparse = true;
    }
    return p.param.grad();
  }

  // Starts g's reduction (mu held): its dense gradients as one (grouped) allreduce, each
  // sparse one as a sparse allreduce. Runs in an autograd hook, so a submit that throws is
  // kept for synchronize() to report; what was submitted before it is still waited for.
  void start(Group& g) {
    g.started = true;
    started_count += static_cast<int64_t>(g.members.size());
    try {
      submit(g);
    } catch (const Error& e) {
      g.refused = e;
    }
  }

  void submit(Group& g) {
    std::vector<std::string> names;
    for (std::size_t i : g.members) {
      Tensor grad = gradient_of(params[i]);
      if (grad.is_sparse()) {
        AllreduceOptions sparse;
        sparse.op = allreduce.op;
        sparse.process_set = allreduce.process_set;
        g.sparse.emplace_back(i, sparse_allreduce_async(grad, params[i].name, sparse));
        continue;
      }
      if (powersgd && powersgd->begin(i, grad)) continue;  // P's allreduce started
      g.grads.push_back(grad);
      names.push_back(params[i].name);
    }
    if (g.grads.empty()) return;
    std::vector<Tensor>* wire = &g.grads;
    if (options.compression != Compression::kNone) {
      for (const Tensor& grad : g.grads) g.wires.push_back(on_the_wire(grad, options.compression));
      wire = &g.wires;
    }
    g.handle = wire->size() == 1 ? allreduce_async_(wire->front(), names.front(), allreduce)
                                 : grouped_allreduce_async_(*wire, names, allreduce);
    g.dense_started = true;
  }

  void mark_ready(std::size_t i) {
    Param& p = params[i];
    p.ready = true;
    Group& g = groups[p.group];
    if (++g.ready == g.members.size()) start(g);
  }

  // The autograd engine accumulated parameter i's gradient of one backward pass.
  void on_accumulated(std::size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    Param& p = params[i];
    if (last_pass(p.ready, &p.passes_left, p.name, options.backward_passes_per_step)) {
      mark_ready(i);
    }
  }

  // Waits for g and leaves its results in the gradients; returns the failure, if any.
  std::optional<Error> finish(Group& g) {
    std::optional<Error> error = g.refused;
    if (g.started) {
      ::torch::NoGradGuard no_grad;
      try {
        if (g.dense_started) g.handle.wait();
        for (std::size_t k = 0; k < g.wires.size(); ++k) {
          if (!g.wires[k].is_same(g.grads[k])) g.grads[k].copy_(g.wires[k]);
        }
      } catch (const Error& e) {
        if (!error) error = e;
      }
      // A gradient that arrived sparse is given back sparse (with its sparse dimensions), as
      // Horovod does, so that optimizers that need sparse gradients (SparseAdam) work with
      // sparse_as_dense too.
      for (std::size_t i : g.members) {
        Param& p = params[i];
        if (p.densified > 0 && !error) {
          p.param.mutable_grad() = p.param.grad().to_sparse(p.densified);
        }
        p.densified = 0;
      }
      for (auto& [i, handle] : g.sparse) {  // every one is waited for, even after a failure
        try {
          params[i].param.mutable_grad() = handle.wait();
        } catch (const Error& e) {
          if (!error) error = e;
        }
      }
    }
    Group fresh;
    fresh.members = std::move(g.members);
    g = std::move(fresh);
    for (std::size_t i : g.members) {
      params[i].ready = false;
      params[i].passes_left = options.backward_passes_per_step;
    }
    return error;
  }
};

namespace {

// For each given parameter, the group it belongs to in `groups` (or none), checked.
std::vector<std::optional<std::size_t>> group_of(
    const std::vector<std::vector<std::size_t>>& groups, std::size_t count) {
  std::vector<std::optional<std::size_t>> out(count);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (std::size_t i : groups[g]) {
      if (i >= count) {
        throw Error(invalid_argument("group " + std::to_string(g) + " names parameter " +
                                     std::to_string(i) + " of " + std::to_string(count)));
      }
      if (out[i]) {
        throw Error(invalid_argument("parameter " + std::to_string(i) + " is in groups " +
                                     std::to_string(*out[i]) + " and " + std::to_string(g)));
      }
      out[i] = g;
    }
  }
  return out;
}

}  // namespace

GradientReducer::GradientReducer(NamedParameters parameters, DistributedOptimizerOptions options)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.allreduce = gradient_reduction(options.op, options.gradient_predivide_factor,
                                   options.backward_passes_per_step, options.process_set);
  s.options = std::move(options);
  const auto given_group = group_of(s.options.groups, parameters.size());
  s.all_parameters = parameters;
  // In a job's later start (a worker joining an elastic job resetting in place), the others
  // construct nothing: the agreement waits for the round's first synchronize().
  if (const int64_t start = ::chorus::elastic::start_number(); start <= 1) {
    s.agree_on_parameters();
    s.agreed_in = start;
  }
  std::vector<std::optional<std::size_t>> slot_of_group(s.options.groups.size());
  for (std::size_t k = 0; k < parameters.size(); ++k) {
    auto& [name, param] = parameters[k];
    if (!param.requires_grad()) continue;  // frozen: nothing to reduce
    State::Param p;
    p.name = s.options.name_prefix + name;
    p.param = param;
    p.accumulator = ::torch::autograd::impl::grad_accumulator(param);
    if (!p.accumulator) throw Error(invalid_argument("parameter '" + name + "' is not a leaf"));
    p.passes_left = s.options.backward_passes_per_step;
    std::optional<std::size_t>* slot = given_group[k] ? &slot_of_group[*given_group[k]] : nullptr;
    if (!slot || !*slot) {
      s.groups.emplace_back();
      if (slot) *slot = s.groups.size() - 1;
    }
    p.group = slot ? **slot : s.groups.size() - 1;
    s.groups[p.group].members.push_back(s.params.size());
    s.params.push_back(std::move(p));
  }
  if (s.options.powersgd.matrix_approximation_rank > 0) {
    if (s.options.op != ReduceOp::kAverage || s.options.gradient_predivide_factor != 1.0 ||
        s.options.compression != Compression::kNone || !s.options.groups.empty()) {
      throw Error(
          invalid_argument("PowerSGD averages full-precision gradients one by one: op average, no "
                           "gradient_predivide_factor, no fp16/bf16 compression, no groups"));
    }
    std::vector<Tensor> tensors;
    std::vector<std::string> names;
    for (const State::Param& p : s.params) {
      tensors.push_back(p.param);
      names.push_back(p.name);
    }
    s.powersgd =
        std::make_unique<PowerSgd>(s.options.powersgd, tensors, names, s.options.process_set);
  }
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    s.params[i].accumulator->add_post_hook(
        std::make_unique<AccumulatedHook<State>>(std::weak_ptr<State>(state_), i));
  }
}

GradientReducer::~GradientReducer() {
  std::lock_guard<std::mutex> lock(state_->mu);
  for (auto& g : state_->groups) state_->finish(g);
}

void GradientReducer::synchronize() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  // An agreement that fails (a rank lost) starts nothing more; the reductions started are
  // still waited for, so that the next step starts from a clean slate (an elastic reset).
  std::optional<Error> first_error;
  try {
    if (const int64_t start = ::chorus::elastic::start_number(); s.agreed_in != start) {
      s.agree_on_parameters();
      s.agreed_in = start;
      s.layouts_agreed = false;
    }
    if (!s.layouts_agreed) {
      s.layouts_agreed = true;
      // Under sparse_as_dense (the same on every rank: checked at construction) no gradient
      // is reduced sparse, so there is nothing to agree on.
      if (!s.options.sparse_as_dense) s.agree_on_layouts();
    }
  } catch (const Error& e) {
    first_error = e;
  }
  for (auto& g : s.groups) {
    if (g.started || first_error) continue;
    for (std::size_t i : g.members) {
      if (!s.params[i].ready) s.mark_ready(i);
    }
  }
  for (auto& g : s.groups) {
    std::optional<Error> error = s.finish(g);
    if (error && !first_error) first_error = error;
  }
  if (s.powersgd) {
    std::optional<Error> error = s.powersgd->finish();
    if (error && !first_error) first_error = error;
  }
  s.started_count = 0;
  if (first_error) throw *first_error;
}

GradientReducer::PowerSgdState GradientReducer::powersgd_state() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->powersgd) return {};
  return {state_->powersgd->iteration(), state_->powersgd->state()};
}

void GradientReducer::load_powersgd_state(const PowerSgdState& state) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->powersgd) state_->powersgd->load(state.iteration, state.qs);
}

int64_t GradientReducer::reductions_started() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->started_count;
}

}  // namespace chorus::torch
