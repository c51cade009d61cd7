#include "chorus/torch/tensor_ops.h"

#include <torch/torch.h>

#include <algorithm>
#include <functional>
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
  /// Outputs that the background thread allocates once their shape is agreed, one slot
  /// per tensor (sized before the submit).
  std::shared_ptr<std::vector<Tensor>> allocated;

  /// Turns the results into what wait() returns (sparse_allreduce: one sparse tensor from
  /// the gathered indices and values); runs once, on the first wait().
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> combine;

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

// Gives the core an allocator that creates output `index` as a torch tensor like `like`,
// kept in s.allocated[index]. Made on the submitting thread, whose current stream a CUDA
// output is allocated for and ordered after (OutputMaker).
OutputAllocator allocator_into(State& s, std::size_t index, const Tensor& like,
                               const std::string& name) {
  if (!s.allocated) s.allocated = std::make_shared<std::vector<Tensor>>();
  if (s.allocated->size() <= index) s.allocated->resize(index + 1);
  return [slot = s.allocated, index, make = OutputMaker(like),
          name](const std::vector<int64_t>& shape) -> StatusOr<TensorRef> {
    try {
      auto [tensor, ref] = make(shape, name);
      (*slot)[index] = std::move(tensor);
      return ref;
    } catch (const std::exception& e) {
      return internal_error("allocating the output of '" + name + "': " + e.what());
    }
  };
}

// A call the core refused (bad arguments, a name in flight) throws here, on this rank only.
TensorHandle wrap(std::shared_ptr<State> s, Handle handle) {
  if (handle.refused()) throw Error(handle.status());
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
    if (state_->combine) state_->results = state_->combine(state_->results);
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

std::string group_label(const std::vector<std::string>& names, std::size_t i,
                        const char* op = "allreduce") {
  if (i < names.size()) return names[i];
  return std::string("grouped ") + op + " input " + std::to_string(i);
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
  options.allocate = allocator_into(*s, 0, input, what);
  return wrap(s, chorus::allgather(name, to_ref(input, what), options));
}

TensorHandle allgather_into_async(const Tensor& input, const Tensor& output,
                                  const std::string& name, const ProcessSet& process_set) {
  const std::string what = label(name, "allgather");
  if (!input.is_contiguous() || !output.is_contiguous() || input.dim() != output.dim() ||
      input.scalar_type() != output.scalar_type() || input.device() != output.device()) {
    throw Error(invalid_argument("allgather '" + what +
                                 "': the output must be contiguous, of the input's dtype, "
                                 "device and number of dimensions"));
  }
  auto s = std::make_shared<State>();
  s->buffers = {input, output};
  s->results = {output};
  AllgatherOptions options;
  options.process_set = process_set;
  options.allocate = [ref = to_ref(output, what), rows = output.size(0),
                      what](const std::vector<int64_t>& shape) -> StatusOr<TensorRef> {
    if (shape.empty() || shape[0] != rows) {
      return invalid_argument("allgather '" + what + "': the ranks gather " +
                              std::to_string(shape.empty() ? 0 : shape[0]) +
                              " rows into an output of " + std::to_string(rows));
    }
    return ref;
  };
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

TensorHandle reduce_async_(Tensor& tensor, int root, const std::string& name,
                           const ReduceOptions& options) {
  auto s = std::make_shared<State>();
  Tensor buffer = in_place_buffer(*s, tensor);
  TensorRef ref = to_ref(buffer, label(name, "reduce"));
  s->buffers = {buffer};
  s->results = {tensor};
  return wrap(s, chorus::reduce(name, ref, ref, root, options));
}

TensorHandle reduce_async(const Tensor& tensor, int root, const std::string& name,
                          const ReduceOptions& options) {
  // The ranks other than the root return this copy of their input as it was.
  Tensor copy = tensor.detach().clone(::torch::MemoryFormat::Contiguous);
  return reduce_async_(copy, root, name, options);
}

Tensor reduce(const Tensor& tensor, int root, const std::string& name,
              const ReduceOptions& options) {
  return reduce_async(tensor, root, name, options).wait();
}

Tensor& reduce_(Tensor& tensor, int root, const std::string& name, const ReduceOptions& options) {
  reduce_async_(tensor, root, name, options).wait();
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
  options.allocate = allocator_into(*s, 0, input, what);
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
  with_allocator.allocate = allocator_into(*s, 0, input, what);
  return wrap(s, chorus::reducescatter(name, to_ref(input, what), with_allocator));
}

Tensor reducescatter(const Tensor& tensor, const std::string& name,
                     const ReducescatterOptions& options) {
  return reducescatter_async(tensor, name, options).wait();
}

namespace {

// Contiguous inputs of a grouped allgather or reducescatter, with one allocator per tensor.
std::vector<TensorRef> grouped_inputs(State& s, const std::vector<Tensor>& tensors,
                                      const std::vector<std::string>& names, const char* op,
                                      std::vector<OutputAllocator>* allocate) {
  std::vector<TensorRef> refs;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string what = group_label(names, i, op);
    Tensor input = tensors[i].contiguous();
    s.buffers.push_back(input);
    refs.push_back(to_ref(input, what));
    allocate->push_back(allocator_into(s, i, input, what));
  }
  return refs;
}

}  // namespace

namespace {

TensorHandle start_grouped_allgather(std::shared_ptr<State> s, const std::vector<Tensor>& tensors,
                                     const std::vector<std::string>& names,
                                     const ProcessSet& process_set) {
  GroupedAllgatherOptions options;
  options.process_set = process_set;
  std::vector<TensorRef> refs = grouped_inputs(*s, tensors, names, "allgather", &options.allocate);
  return wrap(std::move(s), chorus::grouped_allgather(names, refs, options));
}

}  // namespace

TensorHandle grouped_allgather_async(const std::vector<Tensor>& tensors,
                                     const std::vector<std::string>& names,
                                     const ProcessSet& process_set) {
  return start_grouped_allgather(std::make_shared<State>(), tensors, names, process_set);
}

namespace {

std::string sizes_string(const std::vector<int64_t>& sizes) {
  std::string out = "[";
  for (std::size_t d = 0; d < sizes.size(); ++d) out += (d ? "," : "") + std::to_string(sizes[d]);
  return out + "]";
}

// The coalesced sum of every rank's sparse tensor, from the gathered layouts, indices and
// values (sparse_allreduce_async). Ranks that sent non-zeros must agree on the layout.
Tensor sparse_from_ranks(const std::vector<Tensor>& gathered, const std::vector<int64_t>& sizes,
                         const std::string& what) {
  // Each rank's header: nnz, sparse_dim, then its tensor's sizes.
  const Tensor headers = gathered[0].cpu().contiguous();
  const int64_t* h = headers.data_ptr<int64_t>();
  const std::size_t header_length = 2 + sizes.size();
  if (headers.numel() % static_cast<int64_t>(header_length) != 0) {
    throw Error(Status(StatusCode::kMismatch,
                       "sparse_allreduce '" + what + "': ranks reduce tensors of different ranks"));
  }
  std::vector<Tensor> indices, values;
  int64_t sparse_dim = -1, index_at = 0, value_at = 0;
  for (int64_t r = 0; r * static_cast<int64_t>(header_length) < headers.numel(); ++r) {
    const int64_t* mine = h + r * static_cast<int64_t>(header_length);
    const int64_t nnz = mine[0];
    const int64_t dim = mine[1];
    if (!std::equal(sizes.begin(), sizes.end(), mine + 2)) {
      throw Error(Status(StatusCode::kMismatch,
                         "sparse_allreduce '" + what + "': rank " + std::to_string(r) +
                             " reduces a tensor of sizes " +
                             sizes_string(std::vector<int64_t>(mine + 2, mine + header_length)) +
                             ", this rank " + sizes_string(sizes)));
    }
    if (nnz == 0) continue;
    if (sparse_dim >= 0 && dim != sparse_dim) {
      throw Error(Status(StatusCode::kMismatch, "sparse_allreduce '" + what +
                                                    "': ranks send sparse tensors with " +
                                                    std::to_string(sparse_dim) + " and " +
                                                    std::to_string(dim) + " sparse dimensions"));
    }
    sparse_dim = dim;
    std::vector<int64_t> value_shape = {nnz};
    value_shape.insert(value_shape.end(), sizes.begin() + dim, sizes.end());
    const int64_t value_count = ::c10::multiply_integers(value_shape);
    indices.push_back(gathered[1].narrow(0, index_at, nnz * dim).reshape({nnz, dim}));
    values.push_back(gathered[2].narrow(0, value_at, value_count).reshape(value_shape));
    index_at += nnz * dim;
    value_at += value_count;
  }
  if (indices.empty()) {  // no rank has a non-zero: an empty tensor, fully sparse
    const auto dims = static_cast<int64_t>(sizes.size());
    return ::torch::sparse_coo_tensor(::torch::zeros({dims, 0}, gathered[1].options()),
                                      ::torch::zeros({0}, gathered[2].options()), sizes);
  }
  return ::torch::sparse_coo_tensor(::torch::cat(indices).t(), ::torch::cat(values), sizes)
      .coalesce();
}

}  // namespace

TensorHandle sparse_allreduce_async(const Tensor& tensor, const std::string& name,
                                    const AllreduceOptions& options) {
  const std::string what = label(name, "sparse allreduce");
  if (!tensor.defined() || !tensor.is_sparse()) {
    throw Error(invalid_argument("sparse_allreduce_async: '" + what +
                                 "' is not a sparse COO tensor; reduce dense tensors with "
                                 "allreduce_async"));
  }
  const ReduceOp op = options.op;
  if (op != ReduceOp::kSum && op != ReduceOp::kAverage) {
    throw Error(invalid_argument("sparse_allreduce_async: '" + what + "' asks for op " +
                                 reduce_op_name(op) +
                                 "; sparse tensors reduce by sum or average only"));
  }
  if (options.prescale != 1.0 || options.postscale != 1.0) {
    throw Error(invalid_argument("sparse_allreduce_async: '" + what +
                                 "' has scale factors, which sparse reductions do not take"));
  }
  const int64_t n = process_set_size(options.process_set);
  auto s = std::make_shared<State>();
  s->combine = [sizes = tensor.sizes().vec(), op, n, what](const std::vector<Tensor>& gathered) {
    Tensor sum = sparse_from_ranks(gathered, sizes, what);
    if (op == ReduceOp::kSum) return std::vector<Tensor>{sum};
    Tensor values = sum.values();
    values =
        values.is_floating_point() || values.is_complex() ? values / n : values.div(n, "trunc");
    return std::vector<Tensor>{::torch::sparse_coo_tensor(sum.indices(), values, sizes).coalesce()};
  };
  // Each rank's [nnz, sparse_dim, sizes...], its indices (nnz rows of sparse_dim) and its
  // values, flattened: a rank without non-zeros may hold any layout (zero_grad() resets it).
  Tensor coalesced = tensor.coalesce();
  std::vector<int64_t> layout = {coalesced._nnz(), coalesced.sparse_dim()};
  layout.insert(layout.end(), coalesced.sizes().begin(), coalesced.sizes().end());
  Tensor header = ::torch::tensor(layout, ::torch::kInt64);
  std::vector<std::string> names;
  if (!name.empty()) names = {name + ".layout", name + ".indices", name + ".values"};
  return start_grouped_allgather(
      std::move(s),
      {header.to(tensor.device()), coalesced._indices().t().contiguous().reshape({-1}),
       coalesced._values().contiguous().reshape({-1})},
      names, options.process_set);
}

std::vector<Tensor> grouped_allgather(const std::vector<Tensor>& tensors,
                                      const std::vector<std::string>& names,
                                      const ProcessSet& process_set) {
  return grouped_allgather_async(tensors, names, process_set).wait_all();
}

TensorHandle grouped_reducescatter_async(const std::vector<Tensor>& tensors,
                                         const std::vector<std::string>& names,
                                         const ReducescatterOptions& options) {
  auto s = std::make_shared<State>();
  GroupedReducescatterOptions grouped;
  grouped.op = options.op;
  grouped.prescale = options.prescale;
  grouped.postscale = options.postscale;
  grouped.process_set = options.process_set;
  std::vector<TensorRef> refs =
      grouped_inputs(*s, tensors, names, "reducescatter", &grouped.allocate);
  return wrap(s, chorus::grouped_reducescatter(names, refs, grouped));
}

std::vector<Tensor> grouped_reducescatter(const std::vector<Tensor>& tensors,
                                          const std::vector<std::string>& names,
                                          const ReducescatterOptions& options) {
  return grouped_reducescatter_async(tensors, names, options).wait_all();
}

}  // namespace chorus::torch
