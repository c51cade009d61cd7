#include "chorus/torch/tensor_ops.h"

#include <torch/torch.h>

#include <mutex>

#include "torch/convert.h"

namespace chorus::torch {

using ::torch::Tensor;

struct TensorHandle::State {
  Handle handle;
  /// Contiguous tensors the core reads and writes; they live until the handle is dropped.
  std::vector<Tensor> buffers;
  /// What wait() returns.
  std::vector<Tensor> results;
  /// In-place results on non-contiguous tensors: (destination, contiguous buffer).
  std::vector<std::pair<Tensor, Tensor>> copy_back;
  /// Outputs that the background thread allocates once their shape is agreed.
  std::shared_ptr<std::vector<Tensor>> allocated;

  std::mutex mu;
  bool finished = false;

  /// The core writes into the buffers until the collective completes, so they must not be
  /// freed before: dropping the last copy of a handle waits for its collective.
  ~State() { handle.wait(); }
};

namespace {

using State = TensorHandle::State;

std::string label(const std::string& name, const char* op) {
  return name.empty() ? std::string("unnamed ") + op + " input" : name;
}

// For an in-place collective: the buffer the core writes, registering a copy back into
// `tensor` when it is not contiguous.
Tensor in_place_buffer(State& s, const Tensor& tensor) {
  if (tensor.is_contiguous()) return tensor;
  Tensor buffer = tensor.contiguous();
  s.copy_back.emplace_back(tensor, buffer);
  return buffer;
}

// Gives the core an allocator that creates torch tensors like `like`, kept in s.allocated.
OutputAllocator allocator_into(State& s, const Tensor& like, const std::string& name) {
  s.allocated = std::make_shared<std::vector<Tensor>>();
  return
      [slot = s.allocated, like, name](const std::vector<int64_t>& shape) -> StatusOr<TensorRef> {
        try {
          slot->push_back(empty_like_with_shape(like, shape));
          return to_ref(slot->back(), name);
        } catch (const std::exception& e) {
          return internal_error("allocating the output of '" + name + "': " + e.what());
        }
      };
}

TensorHandle wrap(std::shared_ptr<State> s, Handle handle) {
  s->handle = std::move(handle);
  return TensorHandle(std::move(s));
}

}  // namespace

bool TensorHandle::poll() const { return state_ && state_->handle.poll(); }

std::vector<Tensor> TensorHandle::wait_all() {
  if (!state_) throw Error(failed_precondition("wait() on an empty TensorHandle"));
  throw_if_error(state_->handle.wait());
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->finished) {
    ::torch::NoGradGuard no_grad;
    for (auto& [destination, buffer] : state_->copy_back) destination.copy_(buffer);
    if (state_->allocated) state_->results = *state_->allocated;
    state_->finished = true;
  }
  return state_->results;
}

Tensor TensorHandle::wait() { return wait_all().at(0); }

std::vector<int64_t> TensorHandle::received_splits() const {
  if (!state_) return {};
  return state_->handle.received_splits();
}

TensorHandle allreduce_async(const Tensor& tensor, const std::string& name,
                             const AllreduceOptions& options) {
  auto s = std::make_shared<State>();
  const std::string what = label(name, "allreduce");
  Tensor input = tensor.contiguous();
  Tensor output = empty_like_with_shape(input, input.sizes().vec());
  s->buffers = {input, output};
  s->results = {output};
  return wrap(s, chorus::allreduce(name, to_ref(input, what), to_ref(output, what), options));
}

TensorHandle allreduce_async_(Tensor& tensor, const std::string& name,
                              const AllreduceOptions& options) {
  auto s = std::make_shared<State>();
  Tensor buffer = in_place_buffer(*s, tensor);
  TensorRef ref = to_ref(buffer, label(name, "allreduce"));
  s->buffers = {buffer};
  s->results = {tensor};
  return wrap(s, chorus::allreduce(name, ref, ref, options));
}

Tensor allreduce(const Tensor& tensor, const std::string& name, const AllreduceOptions& options) {
  return allreduce_async(tensor, name, options).wait();
}

Tensor& allreduce_(Tensor& tensor, const std::string& name, const AllreduceOptions& options) {
  allreduce_async_(tensor, name, options).wait();
  return tensor;
}

namespace {

std::string group_label(const std::vector<std::string>& names, std::size_t i) {
  if (i < names.size()) return names[i];
  return "grouped allreduce input " + std::to_string(i);
}

}  // namespace

TensorHandle grouped_allreduce_async(const std::vector<Tensor>& tensors,
                                     const std::vector<std::string>& names,
                                     const AllreduceOptions& options) {
  auto s = std::make_shared<State>();
  std::vector<TensorRef> inputs, outputs;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    Tensor input = tensors[i].contiguous();
    Tensor output = empty_like_with_shape(input, input.sizes().vec());
    inputs.push_back(to_ref(input, group_label(names, i)));
    outputs.push_back(to_ref(output, group_label(names, i)));
    s->buffers.push_back(input);
    s->buffers.push_back(output);
    s->results.push_back(output);
  }
  return wrap(s, chorus::grouped_allreduce(names, inputs, outputs, options));
}

TensorHandle grouped_allreduce_async_(std::vector<Tensor>& tensors,
                                      const std::vector<std::string>& names,
                                      const AllreduceOptions& options) {
  auto s = std::make_shared<State>();
  std::vector<TensorRef> refs;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    Tensor buffer = in_place_buffer(*s, tensors[i]);
    refs.push_back(to_ref(buffer, group_label(names, i)));
    s->buffers.push_back(buffer);
    s->results.push_back(tensors[i]);
  }
  return wrap(s, chorus::grouped_allreduce(names, refs, refs, options));
}

std::vector<Tensor> grouped_allreduce(const std::vector<Tensor>& tensors,
                                      const std::vector<std::string>& names,
                                      const AllreduceOptions& options) {
  return grouped_allreduce_async(tensors, names, options).wait_all();
}

std::vector<Tensor>& grouped_allreduce_(std::vector<Tensor>& tensors,
                                        const std::vector<std::string>& names,
                                        const AllreduceOptions& options) {
  grouped_allreduce_async_(tensors, names, options).wait_all();
  return tensors;
}

TensorHandle allgather_async(const Tensor& tensor, const std::string& name,
                             const ProcessSet& process_set) {
  auto s = std::make_shared<State>();
  const std::string what = label(name, "allgather");
  Tensor input = tensor.contiguous();
  s->buffers = {input};
  AllgatherOptions options;
  options.process_set = process_set;
  options.allocate = allocator_into(*s, input, what);
  return wrap(s, chorus::allgather(name, to_ref(input, what), options));
}

Tensor allgather(const Tensor& tensor, const std::string& name, const ProcessSet& process_set) {
  return allgather_async(tensor, name, process_set).wait();
}

TensorHandle broadcast_async_(Tensor& tensor, int root, const std::string& name,
                              const ProcessSet& process_set) {
  auto s = std::make_shared<State>();
  Tensor buffer = in_place_buffer(*s, tensor);
  s->buffers = {buffer};
  s->results = {tensor};
  BroadcastOptions options;
  options.process_set = process_set;
  return wrap(s, chorus::broadcast(name, to_ref(buffer, label(name, "broadcast")), root, options));
}

TensorHandle broadcast_async(const Tensor& tensor, int root, const std::string& name,
                             const ProcessSet& process_set) {
  // Detached: the result is the root's data, not a function of this rank's input.
  Tensor copy = tensor.detach().clone(::torch::MemoryFormat::Contiguous);
  return broadcast_async_(copy, root, name, process_set);
}

Tensor broadcast(const Tensor& tensor, int root, const std::string& name,
                 const ProcessSet& process_set) {
  return broadcast_async(tensor, root, name, process_set).wait();
}

Tensor& broadcast_(Tensor& tensor, int root, const std::string& name,
                   const ProcessSet& process_set) {
  broadcast_async_(tensor, root, name, process_set).wait();
  return tensor;
}

TensorHandle alltoall_async(const Tensor& tensor, const std::vector<int64_t>& splits,
                            const std::string& name, const ProcessSet& process_set) {
  auto s = std::make_shared<State>();
  const std::string what = label(name, "alltoall");
  Tensor input = tensor.contiguous();
  s->buffers = {input};
  AlltoallOptions options;
  options.process_set = process_set;
  options.allocate = allocator_into(*s, input, what);
  return wrap(s, chorus::alltoall(name, to_ref(input, what), splits, options));
}

AlltoallResult alltoall(const Tensor& tensor, const std::vector<int64_t>& splits,
                        const std::string& name, const ProcessSet& process_set) {
  TensorHandle handle = alltoall_async(tensor, splits, name, process_set);
  Tensor output = handle.wait();
  return {output, handle.received_splits()};
}

TensorHandle reducescatter_async(const Tensor& tensor, const std::string& name,
                                 const ReducescatterOptions& options) {
  auto s = std::make_shared<State>();
  const std::string what = label(name, "reducescatter");
  Tensor input = tensor.contiguous();
  s->buffers = {input};
  ReducescatterOptions with_allocator = options;
  with_allocator.allocate = allocator_into(*s, input, what);
  return wrap(s, chorus::reducescatter(name, to_ref(input, what), with_allocator));
}

Tensor reducescatter(const Tensor& tensor, const std::string& name,
                     const ReducescatterOptions& options) {
  return reducescatter_async(tensor, name, options).wait();
}

}  // namespace chorus::torch
