#include "torch/adasum_delta.h"

#include <torch/torch.h>

#include <optional>

#include "chorus/torch/tensor_ops.h"
#include "torch/gradient_reduction.h"
#include "torch/parameter_layout.h"

namespace chorus::torch {

AdasumDelta::AdasumDelta(const NamedParameters& parameters,
                         const DistributedOptimizerOptions& options)
    : compression_(options.compression) {
  if (options.gradient_predivide_factor != 1.0) {
    throw Error(invalid_argument("gradient_predivide_factor applies only to op average"));
  }
  if (!options.groups.empty() || options.bucket_bytes > 0 ||
      options.powersgd.matrix_approximation_rank > 0) {
    throw Error(invalid_argument(
        "DistributedOptimizer: op adasum reduces each parameter's delta at step(); groups, "
        "bucket_bytes and PowerSGD do not apply with it"));
  }
  if (options.backward_passes_per_step < 1) {
    throw Error(invalid_argument("backward_passes_per_step must be at least 1, got " +
                                 std::to_string(options.backward_passes_per_step)));
  }
  check_same_layout(parameters, options.name_prefix, options.process_set);
  adasum_.op = ReduceOp::kAdasum;
  adasum_.process_set = options.process_set;
  for (const auto& [name, param] : parameters) {
    if (!param.requires_grad()) continue;
    names_.push_back(options.name_prefix + "delta." + name);
    params_.push_back(param);
    starts_.push_back(::torch::empty_like(param, ::torch::MemoryFormat::Contiguous));
  }
}

void AdasumDelta::step(const std::function<void()>& local_step) {
  ::torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) starts_[i].copy_(params_[i]);
  local_step();
  std::vector<::torch::Tensor> wires;
  std::vector<TensorHandle> handles;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    wires.push_back(on_the_wire(params_[i] - starts_[i], compression_));
    handles.push_back(allreduce_async_(wires.back(), names_[i], adasum_));
  }
  std::optional<Error> failed;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    try {
      handles[i].wait();
      params_[i].copy_(starts_[i].add_(wires[i].to(params_[i].scalar_type())));
    } catch (const Error& e) {
      if (!failed) failed = e;
    }
  }
  if (failed) throw *failed;
}

}  // namespace chorus::torch
