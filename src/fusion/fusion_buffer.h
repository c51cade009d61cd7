#pragma once
// Host fusion buffers. One buffer per process set, allocated once at the size of the fusion
// threshold the first time a batch needs it, and reused by every step after. Used by the
// thread that runs the runtime's cycle only (core/cycle.h).

#include <cstddef>

#include "kernels/host_buffer.h"

namespace chorus {

class FusionBuffer {
 public:
  explicit FusionBuffer(std::size_t capacity) : capacity_(capacity) {}
  /// A buffer of `capacity` bytes (64-byte aligned); `bytes` must not exceed it.
  char* get(std::size_t bytes);
  std::size_t capacity() const { return capacity_; }

 private:
  const std::size_t capacity_;
  HostBuffer data_;
};

}  // namespace chorus
