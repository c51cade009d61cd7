#pragma once
// Who a rank's process is, as its peers on the same host can check: its pid and its pid
// namespace, kept in shared memory (the host's board, a shared-memory reducer's segment) so
// that a rank waiting for a peer can tell a peer that exited from one that is only late.

#include <atomic>
#include <cstdint>

namespace chorus {

/// Lives in shared memory: written once by its owner, read by its peers.
struct SharedProcessId {
  std::atomic<int64_t> pid{0};             ///< 0: not yet known
  std::atomic<uint64_t> pid_namespace{0};  ///< inode of /proc/<pid>/ns/pid; 0: unknown

  /// Records the calling process.
  void set_to_this_process();
  /// True only when the process is known to have exited: it was recorded, in the caller's
  /// pid namespace (pids compare only within one), and no such process exists any more.
  bool exited() const;
};

}  // namespace chorus
