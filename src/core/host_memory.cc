#include "core/host_memory.h"

#include <cstring>

namespace chorus {

Status HostMemory::copy(const std::vector<gpu::CopyItem>& items, DataType dtype,
                        kernels::Scale scale) {
  // The host's copies carry a factor only: a divisor is the reduction's (scales_on_unpack).
  if (scale.divisor != 1) {
    return internal_error("a host copy was asked to divide by " + std::to_string(scale.divisor));
  }
  for (const gpu::CopyItem& item : items) {
    kernels::scale_copy(item.dst, item.src, item.count, dtype, scale.factor);
  }
  return {};
}

Status HostMemory::zero(void* dst, std::size_t bytes) {
  std::memset(dst, 0, bytes);
  return {};
}

StatusOr<char*> HostMemory::zeros(std::size_t bytes) {
  char* p = zeros_.get(bytes);
  std::memset(p, 0, bytes);
  return p;
}

}  // namespace chorus
