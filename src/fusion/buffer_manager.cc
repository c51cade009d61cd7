#include "fusion/buffer_manager.h"

#include <cstdlib>
#include <new>

namespace chorus {

void FusionBuffer::Free::operator()(char* p) const { std::free(p); }

char* FusionBuffer::get(std::size_t bytes) {
  if (bytes > capacity_) return nullptr;
  if (!data_) {
    std::size_t rounded = (capacity_ + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (p == nullptr) throw std::bad_alloc();
    data_.reset(static_cast<char*>(p));
  }
  return data_.get();
}

}  // namespace chorus
