#pragma once
// Shared memory that the ranks of one host map together: the host's doorbell board
// (core/doorbell.h) and the reductions through shared memory (collectives/shm/shm_backend.h).
// Rank 0 of the host creates the segment and sends its name; the others map it; its name
// is removed once every rank answered, so nothing stays in /dev/shm however the job ends.

#include <cstddef>
#include <functional>
#include <string>

#include "chorus/status.h"

namespace chorus {

class ControlTransport;

class SharedSegment {
 public:
  SharedSegment() = default;
  ~SharedSegment();
  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  /// Maps `bytes` of zero-filled shared memory, reserved at once, on every member of
  /// `host`, whose members must all run on this host. Rank 0 runs `init` on the new
  /// segment before the others see it. All or none: where any member could not map it,
  /// every member stays unmapped and `why` says why; that is not an error, only a failed
  /// exchange is. `what` names the segment (letters and dashes). Collective over `host`.
  Status join(ControlTransport& host, const std::string& what, std::size_t bytes,
              const std::function<void(void*)>& init, std::string* why);

  void* data() const { return data_; }
  bool mapped() const { return data_ != nullptr; }

 private:
  void unmap();

  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace chorus
