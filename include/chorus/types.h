#pragma once
/// \file
/// Plain value types of the public API: data types, reduction ops, devices and TensorRef.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "chorus/export.h"

namespace chorus {

/// Element types. Stable numbering: the values travel in wire messages.
enum class DataType : uint8_t {
  kUInt8 = 0,
  kInt8 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kFloat16 = 4,
  kBFloat16 = 5,
  kFloat32 = 6,
  kFloat64 = 7,
  kInt16 = 8,
};
inline constexpr int kNumDataTypes = 9;

/// Size of one element in bytes.
CHORUS_API std::size_t dtype_size(DataType dtype);
/// "float32", "bfloat16", ...
CHORUS_API const char* dtype_name(DataType dtype);

/// Reductions of allreduce and reducescatter. Stable numbering (wire format).
enum class ReduceOp : uint8_t {
  kSum = 0,
  kAverage = 1,  ///< sum divided by the process set's size (integers: truncating division)
  kMin = 2,
  kMax = 3,
  kProduct = 4,
  /// Adaptive summation (Maleki et al.): orthogonal gradients add, parallel ones average.
  /// Allreduce of floating-point tensors only; the same bits on every rank at any size.
  kAdasum = 5,
};
inline constexpr int kNumReduceOps = 6;
CHORUS_API const char* reduce_op_name(ReduceOp op);

/// Where a tensor's memory lives. index is -1 for the host.
struct Device {
  enum class Kind : uint8_t { kCPU = 0, kCUDA = 1 };
  Kind kind = Kind::kCPU;
  int index = -1;

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {Kind::kCUDA, index}; }
  bool is_cpu() const { return kind == Kind::kCPU; }
  friend bool operator==(const Device& a, const Device& b) {
    return a.kind == b.kind && a.index == b.index;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};
CHORUS_API std::string device_name(const Device& device);

/// A view of a dense, row-major tensor that the caller owns. Chorus never frees it; the
/// memory must stay valid until the Handle of the collective that uses it completes.
///
/// CUDA tensors (device = Device::cuda(i), data a device pointer on GPU i): the producer's
/// writes are ordered before Chorus reads the tensor through one of these, checked in order:
///  - `ready_event`: a cudaEvent_t (passed as void*) the caller recorded after the last
///    write. Chorus's background thread makes its own stream wait on it (no host wait). The
///    caller must not record it again, nor destroy it, until the Handle completes.
///  - `ready_stream`: a cudaStream_t (as void*) on which the tensor is produced, e.g.
///    LibTorch's current stream. Chorus records its own event on it inside the collective
///    call, on the calling thread.
///  - neither: Chorus records its event on the legacy default stream (stream 0).
/// Completion: the Handle completes once the results are in the output's device memory;
/// the producer's stream is never blocked by Chorus, and a wait() sleeps rather than spins.
/// Both fields are ignored for host tensors.
struct CHORUS_API TensorRef {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  Device device;
  void* ready_event = nullptr;   ///< CUDA only: cudaEvent_t recorded after the last write
  void* ready_stream = nullptr;  ///< CUDA only: cudaStream_t the tensor is produced on

  int64_t num_elements() const;
  std::size_t num_bytes() const {
    return static_cast<std::size_t>(num_elements()) * dtype_size(dtype);
  }
};

/// "float32[3,4] on cpu"
CHORUS_API std::string describe(const TensorRef& t);

/// A group of ranks that collectives can run within. id 0 is the global set, which always
/// exists. Obtain others from add_process_set().
struct ProcessSet {
  int32_t id = 0;
  static ProcessSet global() { return {}; }
  friend bool operator==(ProcessSet a, ProcessSet b) { return a.id == b.id; }
};

}  // namespace chorus
