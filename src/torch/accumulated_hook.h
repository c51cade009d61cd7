#pragma once
// What the two gradient engines (GradientReducer, ShardedReducer) share: the hook they put on
// every parameter's gradient accumulator, and the count of backward passes it keeps.

#include <torch/csrc/autograd/function_hook.h>

#include <memory>
#include <string>
#include <utility>

#include "chorus/status.h"

namespace chorus::torch {

/// Runs after the autograd engine accumulated parameter `index`'s gradient of one backward
/// pass: calls `State::on_accumulated(index)` while the engine's state lives.
template <class State>
class AccumulatedHook : public ::torch::autograd::FunctionPostHook {
 public:
  AccumulatedHook(std::weak_ptr<State> state, std::size_t index)
      : state_(std::move(state)), index_(index) {}

  ::torch::autograd::variable_list operator()(
      const ::torch::autograd::variable_list& outputs,
      const ::torch::autograd::variable_list& /*inputs*/) override {
    if (auto state = state_.lock()) state->on_accumulated(index_);
    return outputs;
  }

 private:
  std::weak_ptr<State> state_;
  std::size_t index_;
};

/// Counts one backward pass of parameter `name`, whose gradient is `ready` once its
/// `passes` of this step came: one too many throws, naming it. Whether this pass was the
/// last of the step.
inline bool last_pass(bool ready, int* passes_left, const std::string& name, int passes) {
  if (ready) {
    throw Error(failed_precondition("gradient of '" + name + "' computed " +
                                    std::to_string(passes + 1) +
                                    " times before step() or synchronize(); "
                                    "backward_passes_per_step is " +
                                    std::to_string(passes)));
  }
  return --*passes_left == 0;
}

}  // namespace chorus::torch
