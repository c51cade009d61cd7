#include "kernels/host_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace chorus {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kLine = 64;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

void HostBuffer::Free::operator()(char* p) const { std::free(p); }

char* HostBuffer::get(std::size_t bytes) {
  if (data_ && bytes <= size_) return data_.get();
  const bool huge = bytes >= kHugeFrom;
  const std::size_t align = huge ? kHugePage : kLine;
  const std::size_t size = round_up(bytes == 0 ? 1 : bytes, align);
  data_.reset();
  void* p = std::aligned_alloc(align, size);
  if (p == nullptr) throw std::bad_alloc();
  if (huge) madvise(p, size, MADV_HUGEPAGE);  // advice: failure leaves small pages
  data_.reset(static_cast<char*>(p));
  size_ = size;
  return data_.get();
}

}  // namespace chorus
