#include "fusion/fusion_buffer.h"

namespace chorus {

char* FusionBuffer::get(std::size_t bytes) {
  if (bytes > capacity_) return nullptr;
  return data_.get(capacity_);
}

}  // namespace chorus
