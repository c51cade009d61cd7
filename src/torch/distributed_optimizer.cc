#include "chorus/torch/distributed_optimizer.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <mutex>
#include <optional>

#include "chorus/torch/tensor_ops.h"
#include "torch/parameter_layout.h"

namespace chorus::torch {

using ::torch::Tensor;

struct DistributedOptimizer::State {
  struct Param {
    std::string name;  // the collective's name
    Tensor param;
    std::shared_ptr<::torch::autograd::Node> accumulator;  // keeps the hooked node alive
    int passes_left = 0;
    bool started = false;
    Tensor grad;  // the gradient being reduced
    Tensor wire;  // its 16-bit copy, with compression
    TensorHandle handle;
  };

  DistributedOptimizerOptions options;
  AllreduceOptions allreduce;
  std::mutex mu;
  std::vector<Param> params;
  int64_t started_count = 0;

  // Starts the reduction of p's gradient (mu held).
  void start(Param& p) {
    p.grad = p.param.grad();
    if (!p.grad.defined()) {
      // No gradient on this rank this step: contribute zeros so the others don't wait.
      p.param.mutable_grad() = ::torch::zeros_like(p.param);
      p.grad = p.param.grad();
    }
    const auto type = p.grad.scalar_type();
    const bool compress = options.compression != Compression::kNone &&
                          (type == ::torch::kFloat32 || type == ::torch::kFloat64);
    if (compress) {
      p.wire = p.grad.to(options.compression == Compression::kFloat16 ? ::torch::kFloat16
                                                                      : ::torch::kBFloat16);
      p.handle = allreduce_async_(p.wire, p.name, allreduce);
    } else {
      p.handle = allreduce_async_(p.grad, p.name, allreduce);
    }
    p.started = true;
    ++started_count;
  }

  // The autograd engine accumulated parameter i's gradient of one backward pass.
  void on_accumulated(std::size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    Param& p = params[i];
    if (p.started) {
      throw Error(failed_precondition(
          "gradient of '" + p.name + "' computed " +
          std::to_string(options.backward_passes_per_step + 1) +
          " times before step() or synchronize(); backward_passes_per_step is " +
          std::to_string(options.backward_passes_per_step)));
    }
    if (--p.passes_left == 0) start(p);
  }
};

namespace {

// Runs after the autograd engine accumulated a parameter's gradient.
class AccumulatedHook : public ::torch::autograd::FunctionPostHook {
 public:
  AccumulatedHook(std::weak_ptr<DistributedOptimizer::State> state, std::size_t index)
      : state_(std::move(state)), index_(index) {}

  ::torch::autograd::variable_list operator()(
      const ::torch::autograd::variable_list& outputs,
      const ::torch::autograd::variable_list& /*inputs*/) override {
    if (auto state = state_.lock()) state->on_accumulated(index_);
    return outputs;
  }

 private:
  std::weak_ptr<DistributedOptimizer::State> state_;
  std::size_t index_;
};

AllreduceOptions reduction_of(const DistributedOptimizerOptions& o) {
  if (o.op != ReduceOp::kAverage && o.op != ReduceOp::kSum) {
    throw Error(
        invalid_argument(std::string("DistributedOptimizer op must be average or sum, not ") +
                         reduce_op_name(o.op)));
  }
  if (o.gradient_predivide_factor <= 0) {
    throw Error(invalid_argument("gradient_predivide_factor must be positive, got " +
                                 std::to_string(o.gradient_predivide_factor)));
  }
  if (o.gradient_predivide_factor != 1.0 && o.op != ReduceOp::kAverage) {
    throw Error(invalid_argument("gradient_predivide_factor applies only to op average"));
  }
  if (o.backward_passes_per_step < 1) {
    throw Error(invalid_argument("backward_passes_per_step must be at least 1, got " +
                                 std::to_string(o.backward_passes_per_step)));
  }
  AllreduceOptions a;
  a.op = o.op;
  a.prescale = 1.0 / o.gradient_predivide_factor;
  a.postscale = o.gradient_predivide_factor;
  a.process_set = o.process_set;
  return a;
}

}  // namespace

NamedParameters named_parameters(const ::torch::nn::Module& module) {
  NamedParameters out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

DistributedOptimizer::DistributedOptimizer(::torch::optim::Optimizer& optimizer,
                                           NamedParameters named_parameters,
                                           DistributedOptimizerOptions options)
    : optimizer_(optimizer), state_(std::make_shared<State>()) {
  state_->allreduce = reduction_of(options);
  state_->options = std::move(options);
  const DistributedOptimizerOptions& o = state_->options;
  check_same_layout(named_parameters, o.name_prefix, o.process_set);
  for (auto& [name, param] : named_parameters) {
    if (!param.requires_grad()) continue;  // frozen: nothing to reduce
    State::Param p;
    p.name = o.name_prefix + name;
    p.param = param;
    p.accumulator = ::torch::autograd::impl::grad_accumulator(param);
    if (!p.accumulator) {
      throw Error(invalid_argument("parameter '" + name + "' is not a leaf tensor"));
    }
    p.passes_left = o.backward_passes_per_step;
    state_->params.push_back(std::move(p));
  }
  for (std::size_t i = 0; i < state_->params.size(); ++i) {
    state_->params[i].accumulator->add_post_hook(
        std::make_unique<AccumulatedHook>(std::weak_ptr<State>(state_), i));
  }
}

// Reductions still in flight finish first: dropping their TensorHandles waits for them.
DistributedOptimizer::~DistributedOptimizer() = default;

void DistributedOptimizer::synchronize() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto& p : s.params) {
    if (!p.started && p.param.requires_grad()) s.start(p);
  }
  std::optional<Error> first_error;
  for (auto& p : s.params) {
    if (p.started) {
      try {
        p.handle.wait();
        if (p.wire.defined()) {
          ::torch::NoGradGuard no_grad;
          p.grad.copy_(p.wire);
        }
      } catch (const Error& e) {
        if (!first_error) first_error = e;
      }
    }
    p.started = false;
    p.passes_left = s.options.backward_passes_per_step;
    p.handle = TensorHandle();
    p.grad = Tensor();
    p.wire = Tensor();
  }
  s.started_count = 0;
  synchronized_ = true;
  if (first_error) throw *first_error;
}

void DistributedOptimizer::step() {
  if (!synchronized_) synchronize();
  synchronized_ = false;
  optimizer_.step();
}

void DistributedOptimizer::zero_grad() { optimizer_.zero_grad(); }

int64_t DistributedOptimizer::reductions_started() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->started_count;
}

}  // namespace chorus::torch
