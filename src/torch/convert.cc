#include "torch/convert.h"

#include <c10/core/ScalarType.h>

// CHORUS_TORCH_CUDA: CMake found a LibTorch built with CUDA (cmake/ChorusOptions.cmake).
// The header alone would not tell: Debian's CPU-only LibTorch ships it too.
#if CHORUS_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "chorus/status.h"
#include "chorus/torch/tensor_ops.h"

namespace chorus::torch {

DataType to_chorus_dtype(::torch::ScalarType type, const std::string& name) {
  switch (type) {
    case ::torch::kUInt8: return DataType::kUInt8;
    case ::torch::kInt8: return DataType::kInt8;
    case ::torch::kInt16: return DataType::kInt16;
    case ::torch::kInt32: return DataType::kInt32;
    case ::torch::kInt64: return DataType::kInt64;
    case ::torch::kFloat16: return DataType::kFloat16;
    case ::torch::kBFloat16: return DataType::kBFloat16;
    case ::torch::kFloat32: return DataType::kFloat32;
    case ::torch::kFloat64: return DataType::kFloat64;
    default:
      throw Error(invalid_argument("tensor '" + name + "' has dtype " +
                                   std::string(c10::toString(type)) +
                                   ", which Chorus does not support (uint8, int8, int16, int32, "
                                   "int64, float16, bfloat16, float32, float64)"));
  }
}

void throw_if_error(const Status& status) {
  if (!status.ok()) throw Error(status);
}

Device to_device(const ::torch::Tensor& tensor) {
  if (tensor.is_cuda()) return Device::cuda(tensor.get_device());
  return Device::cpu();
}

TensorRef to_ref(const ::torch::Tensor& tensor, const std::string& name) {
  if (!tensor.defined()) throw Error(invalid_argument("tensor '" + name + "' is undefined"));
  if (!tensor.is_cpu() && !tensor.is_cuda()) {
    throw Error(invalid_argument("tensor '" + name + "' is on device " + tensor.device().str() +
                                 "; Chorus takes CPU or CUDA tensors"));
  }
  TensorRef ref;
  ref.data = tensor.data_ptr();
  ref.dtype = to_chorus_dtype(tensor.scalar_type(), name);
  ref.shape = tensor.sizes().vec();
  ref.device = to_device(tensor);
#if CHORUS_TORCH_CUDA
  // Torch queues a tensor's producers on the current stream of its device, which need not
  // be the legacy default stream Chorus waits for otherwise (types.h). Read on the calling
  // thread: for an input, the trainer's (or autograd's) thread submitting it; for an output
  // that the background thread allocates, the submitter's stream (OutputMaker).
  if (tensor.is_cuda()) {
    ref.ready_stream = c10::cuda::getCurrentCUDAStream(tensor.device().index()).stream();
  }
#endif
  return ref;
}

OutputMaker::OutputMaker(const ::torch::Tensor& like) : like_(like) {
#if CHORUS_TORCH_CUDA
  if (like.is_cuda()) stream_ = c10::cuda::getCurrentCUDAStream(like.device().index()).unwrap();
#endif
}

std::pair<::torch::Tensor, TensorRef> OutputMaker::operator()(const std::vector<int64_t>& shape,
                                                              const std::string& name) const {
#if CHORUS_TORCH_CUDA
  if (stream_) {
    // Allocated and described with the caller's stream current: the block comes from its
    // pool, and to_ref() names it as the output's ready_stream.
    c10::cuda::CUDAStreamGuard guard(
        c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, *stream_));
    ::torch::Tensor out = empty_like_with_shape(like_, shape);
    return {out, to_ref(out, name)};
  }
#endif
  ::torch::Tensor out = empty_like_with_shape(like_, shape);
  return {out, to_ref(out, name)};
}

::torch::Tensor empty_like_with_shape(const ::torch::Tensor& like,
                                      const std::vector<int64_t>& shape) {
  return ::torch::empty(shape, like.options().memory_format(::torch::MemoryFormat::Contiguous));
}

}  // namespace chorus::torch
