#pragma once
/// \file
/// Collectives on torch::Tensor. Any dtype the core supports (uint8, int8, int16, int32,
/// int64, float16, bfloat16, float32, float64), contiguous or not: a non-contiguous input is
/// copied into a contiguous buffer, and an in-place variant copies the result back into
/// the caller's tensor when the handle is waited on.
///
/// The *_async functions return at once; the work runs on Chorus's background thread.
/// The tensors involved must not be modified until the handle's wait() returns.
///
/// Errors: a call that the core refuses on this rank (a bad argument, a name already in
/// flight: Handle::refused()) throws chorus::Error at the call, with kInvalidArgument for
/// argument errors; nothing reaches the other ranks. A collective that fails after it
/// started (ranks that disagree, a stall) throws from wait(), on every rank.

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "chorus/chorus.h"

namespace chorus::torch {

/// An asynchronous collective on torch tensors. Copies share the same operation. Dropping the
/// last copy waits for the collective, whose tensors the core writes until it completes: a
/// caller that holds a lock others need meanwhile (Python's GIL) releases it first, as
/// chorus.torch's handles do.
class TensorHandle {
 public:
  struct State;
  TensorHandle() = default;
  explicit TensorHandle(std::shared_ptr<State> state) : state_(std::move(state)) {}

  /// True once the collective finished, successfully or not.
  bool poll() const;
  /// Blocks until done and returns the (first) result; throws chorus::Error on failure.
  /// The first wait() also finishes the operation on the trainer's thread (copies back
  /// into non-contiguous destinations); later calls return the same tensors.
  ::torch::Tensor wait();
  /// Like wait(), every result: one per tensor of a grouped allreduce.
  std::vector<::torch::Tensor> wait_all();
  /// alltoall: rows received from each rank. Valid after wait().
  std::vector<int64_t> received_splits() const;

 private:
  std::shared_ptr<State> state_;
};

TensorHandle allreduce_async(const ::torch::Tensor& tensor, const std::string& name = {},
                             const AllreduceOptions& options = {});
/// In place: the result lands in `tensor`.
TensorHandle allreduce_async_(::torch::Tensor& tensor, const std::string& name = {},
                              const AllreduceOptions& options = {});
::torch::Tensor allreduce(const ::torch::Tensor& tensor, const std::string& name = {},
                          const AllreduceOptions& options = {});
::torch::Tensor& allreduce_(::torch::Tensor& tensor, const std::string& name = {},
                            const AllreduceOptions& options = {});

/// Negotiated and fused as one unit; `names` is empty or has one name per tensor.
TensorHandle grouped_allreduce_async(const std::vector<::torch::Tensor>& tensors,
                                     const std::vector<std::string>& names = {},
                                     const AllreduceOptions& options = {});
TensorHandle grouped_allreduce_async_(std::vector<::torch::Tensor>& tensors,
                                      const std::vector<std::string>& names = {},
                                      const AllreduceOptions& options = {});
std::vector<::torch::Tensor> grouped_allreduce(const std::vector<::torch::Tensor>& tensors,
                                               const std::vector<std::string>& names = {},
                                               const AllreduceOptions& options = {});
std::vector<::torch::Tensor>& grouped_allreduce_(std::vector<::torch::Tensor>& tensors,
                                                 const std::vector<std::string>& names = {},
                                                 const AllreduceOptions& options = {});

/// Concatenation of every rank's tensor along dimension 0, in rank order (the first
/// dimension may differ per rank).
TensorHandle allgather_async(const ::torch::Tensor& tensor, const std::string& name = {},
                             const ProcessSet& process_set = {});
::torch::Tensor allgather(const ::torch::Tensor& tensor, const std::string& name = {},
                          const ProcessSet& process_set = {});

/// `root` is the root's rank within the process set (chorus::broadcast), not its global
/// rank. The out-of-place form leaves `tensor` untouched.
TensorHandle broadcast_async(const ::torch::Tensor& tensor, int root, const std::string& name = {},
                             const ProcessSet& process_set = {});
TensorHandle broadcast_async_(::torch::Tensor& tensor, int root, const std::string& name = {},
                              const ProcessSet& process_set = {});
::torch::Tensor broadcast(const ::torch::Tensor& tensor, int root, const std::string& name = {},
                          const ProcessSet& process_set = {});
::torch::Tensor& broadcast_(::torch::Tensor& tensor, int root, const std::string& name = {},
                            const ProcessSet& process_set = {});

/// The reduction over the process set on `root` (its rank within the set, as broadcast):
/// the same bits allreduce gives there. The other ranks get their own tensor back (the
/// out-of-place form: a copy of it; in place: `tensor` untouched).
TensorHandle reduce_async(const ::torch::Tensor& tensor, int root, const std::string& name = {},
                          const ReduceOptions& options = {});
TensorHandle reduce_async_(::torch::Tensor& tensor, int root, const std::string& name = {},
                           const ReduceOptions& options = {});
::torch::Tensor reduce(const ::torch::Tensor& tensor, int root, const std::string& name = {},
                       const ReduceOptions& options = {});
::torch::Tensor& reduce_(::torch::Tensor& tensor, int root, const std::string& name = {},
                         const ReduceOptions& options = {});

/// splits[i] rows of dimension 0 go to rank i; empty splits mean equal blocks.
TensorHandle alltoall_async(const ::torch::Tensor& tensor, const std::vector<int64_t>& splits = {},
                            const std::string& name = {}, const ProcessSet& process_set = {});
struct AlltoallResult {
  ::torch::Tensor output;
  std::vector<int64_t> received_splits;
};
AlltoallResult alltoall(const ::torch::Tensor& tensor, const std::vector<int64_t>& splits = {},
                        const std::string& name = {}, const ProcessSet& process_set = {});

/// Reduces over the process set; rank r keeps block r of dimension 0.
TensorHandle reducescatter_async(const ::torch::Tensor& tensor, const std::string& name = {},
                                 const ReducescatterOptions& options = {});
::torch::Tensor reducescatter(const ::torch::Tensor& tensor, const std::string& name = {},
                              const ReducescatterOptions& options = {});

/// Sums (kSum) or averages (kAverage) a sparse COO tensor over the process set, such as an
/// nn::Embedding's sparse gradient: every rank's layout, indices and values travel as one
/// grouped allgather (named "<name>.layout", "<name>.indices" and "<name>.values"), so
/// traffic grows with the non-zeros, not the tensor's size. wait() returns the coalesced
/// sum; kAverage divides the values by the set size (integers truncating). Ranks' tensors
/// must agree on size and dtype, and ranks with non-zeros on the sparse dimensions; their
/// non-zero counts may differ, zero included. No scale factors.
TensorHandle sparse_allreduce_async(const ::torch::Tensor& tensor, const std::string& name = {},
                                    const AllreduceOptions& options = {});

/// Allgathers or reduce-scatters of a list, negotiated as one unit (chorus::grouped_allgather);
/// wait_all() returns one result per tensor. `names` is empty or has one name per tensor.
/// options.allocate of the reducescatter is not used (each output is a new tensor).
TensorHandle grouped_allgather_async(const std::vector<::torch::Tensor>& tensors,
                                     const std::vector<std::string>& names = {},
                                     const ProcessSet& process_set = {});
/// Allgather into a tensor the caller owns: `output` (contiguous, on input's device and
/// dtype, with size-of-set times input's rows) receives every rank's `input` in rank order.
/// `input` may be this rank's block inside `output` (a sharded optimizer gathers its updated
/// shard in place). Every rank's input must have the same shape.
TensorHandle allgather_into_async(const ::torch::Tensor& input, const ::torch::Tensor& output,
                                  const std::string& name = {}, const ProcessSet& process_set = {});

std::vector<::torch::Tensor> grouped_allgather(const std::vector<::torch::Tensor>& tensors,
                                               const std::vector<std::string>& names = {},
                                               const ProcessSet& process_set = {});
TensorHandle grouped_reducescatter_async(const std::vector<::torch::Tensor>& tensors,
                                         const std::vector<std::string>& names = {},
                                         const ReducescatterOptions& options = {});
std::vector<::torch::Tensor> grouped_reducescatter(const std::vector<::torch::Tensor>& tensors,
                                                   const std::vector<std::string>& names = {},
                                                   const ReducescatterOptions& options = {});

/// The core's dtype for a torch dtype; throws chorus::Error for dtypes Chorus does not
/// reduce (bool, complex, ...), naming the tensor.
DataType to_chorus_dtype(::torch::ScalarType type, const std::string& name);
/// Throws chorus::Error for a failed status, with the status' message.
void throw_if_error(const Status& status);

}  // namespace chorus::torch
