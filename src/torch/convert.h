#pragma once
// torch::Tensor <-> TensorRef, for the adapter's own files.

#include <c10/core/Stream.h>
#include <torch/types.h>

#include <optional>
#include <string>
#include <utility>

#include "chorus/types.h"

namespace chorus::torch {

/// A view of `tensor`, which must be contiguous. Throws chorus::Error for an unsupported
/// dtype or device, naming the tensor.
TensorRef to_ref(const ::torch::Tensor& tensor, const std::string& name);
/// The core's device of `tensor`.
Device to_device(const ::torch::Tensor& tensor);
/// An empty contiguous tensor of `shape` with the dtype and device of `like`.
::torch::Tensor empty_like_with_shape(const ::torch::Tensor& like,
                                      const std::vector<int64_t>& shape);

/// Makes the outputs of a collective whose shape is agreed later (allgather, alltoall,
/// reducescatter), on the background thread, for a caller that submitted on another.
/// A CUDA output comes from the caching allocator's pool of the stream that was current on
/// the submitting thread when this was made, and its TensorRef names that stream as its
/// ready_stream: Chorus then writes it only after the work queued there, which may still
/// use the block (a tensor the trainer freed with kernels pending), and the trainer gets a
/// tensor that its own stream may use and free.
class OutputMaker {
 public:
  /// On the submitting thread.
  explicit OutputMaker(const ::torch::Tensor& like);
  /// An empty tensor of `shape` like the one given, and its TensorRef named `name`.
  std::pair<::torch::Tensor, TensorRef> operator()(const std::vector<int64_t>& shape,
                                                   const std::string& name) const;

 private:
  ::torch::Tensor like_;
  std::optional<c10::Stream> stream_;  // CUDA: the submitting thread's current stream
};

}  // namespace chorus::torch
