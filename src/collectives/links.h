#pragma once
// Point-to-point messages among the members of one group, for the host algorithms that
// reduce by messages (collectives/host_reduce.h, collectives/host_tree.h). The algorithms
// decide the combination order; a transport only carries bytes, so every transport gives the
// same bits for the same set size. MPI provides one (collectives/mpi/mpi_links.h), Gloo another
// (collectives/gloo/gloo_links.h).
//
// Messages between two members with one tag arrive in the order they were posted. A message
// is posted, then waited for by its number (posted() before posting it); nothing moves for
// sure until it is waited for. Every wait is bounded: past the group's liveness bound it
// fails with ABORTED naming the members that took no part, and the group is out of step.
// Called from the thread that runs the cycles only, like every Backend.

#include <cstddef>
#include <cstdint>

#include "chorus/status.h"

namespace chorus {

class Links {
 public:
  virtual ~Links() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Starts receiving `bytes` from `peer` into `buf`, which stays untouched by the caller
  /// until the message is waited for.
  virtual Status post_recv(int peer, int tag, void* buf, int64_t bytes) = 0;
  /// Starts sending `bytes` of `buf` to `peer`; `buf` stays unchanged until waited for.
  virtual Status post_send(int peer, int tag, const void* buf, int64_t bytes) = 0;
  /// The most bytes one message (and one allgather in all) may carry.
  virtual int64_t max_message_bytes() const = 0;
  /// Messages posted since clear(); the next one posted gets this number.
  virtual std::size_t posted() const = 0;
  /// Waits for messages [first, first + n), which move about `bytes` into and out of this
  /// member (for how long to poll before sleeping).
  virtual Status wait(std::size_t first, std::size_t n, int64_t bytes) = 0;
  /// Forgets the messages posted, every one of them waited for.
  virtual void clear() = 0;

  /// Every member's `bytes` of `send` into `all`, in rank order (this member's too), by the
  /// transport's own allgather (moving bytes in any order changes no bit); bounded like wait().
  /// Independent of the messages posted.
  virtual Status allgather(const void* send, void* all, int64_t bytes) = 0;
};

}  // namespace chorus
