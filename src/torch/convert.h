#pragma once
// torch::Tensor <-> TensorRef, for the adapter's own files.

#include <torch/types.h>

#include <string>

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

}  // namespace chorus::torch
