#pragma once
// Host memory that this host's other ranks copy from and into: fusion buffers and the MPI
// backend's staging. Open MPI moves large messages between ranks of one host with a
// single copy that pins the peer's pages, page by page. A buffer of kHugeFrom bytes or
// more is therefore 2 MiB aligned and advised for transparent huge pages, so that a
// 256 KiB piece pins one page instead of 64 (measured: docs/performance.md). Where the
// kernel grants no huge pages (transparent huge pages off), the advice does nothing.

#include <cstddef>
#include <memory>

namespace chorus {

class HostBuffer {
 public:
  static constexpr std::size_t kHugeFrom = std::size_t{256} << 10;

  /// At least `bytes` bytes, 64-byte aligned. Grows to the largest request and stays;
  /// growing does not keep the contents.
  char* get(std::size_t bytes);
  std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> data_;
  std::size_t size_ = 0;
};

}  // namespace chorus
