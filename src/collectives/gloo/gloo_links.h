#pragma once
// Links (collectives/links.h) over a Gloo context: one unbound buffer per message, the tag as
// Gloo's slot, every wait bounded by the liveness bound. The host reductions over these give
// the bits they give over MPI for the same set size (collectives/host_reduce.h), which is
// what lets a job without an MPI launcher reduce as an MPI job does.
//
// A wait that runs out fails with ABORTED naming the peers whose messages had not completed,
// as ranks of the job (`job_ranks`, index = member); the context is out of step from then on.

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <memory>
#include <vector>

#include "collectives/links.h"

namespace chorus {

class GlooLinks final : public Links {
 public:
  /// Over `context` (connected, shared with the group); waits fail after `liveness_seconds`
  /// (0: never). `job_ranks`: the members as ranks of the job, for messages (empty: the same).
  GlooLinks(std::shared_ptr<gloo::Context> context, double liveness_seconds,
            std::vector<int> job_ranks = {});

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  Status post_recv(int peer, int tag, void* buf, int64_t bytes) override;
  Status post_send(int peer, int tag, const void* buf, int64_t bytes) override;
  int64_t max_message_bytes() const override { return INT64_MAX; }
  std::size_t posted() const override { return messages_.size(); }
  Status wait(std::size_t first, std::size_t n, int64_t bytes) override;
  void clear() override { messages_.clear(); }
  Status allgather(const void* send, void* all, int64_t bytes) override;

  /// The context, for the group's collectives that Gloo runs whole (collectives/gloo/
  /// gloo_backend.h), and their bound.
  const std::shared_ptr<gloo::Context>& context() const { return context_; }
  std::chrono::milliseconds bound() const;
  /// The failure of such a collective that threw `gloo_error`: Gloo does not say which peer
  /// it waited for, so every other member is named.
  Status collective_failed(const char* gloo_error) const;

 private:
  struct Message {
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    int peer;
    bool receive;
  };

  Status ran_out(const std::vector<int>& late, const char* what) const;

  std::shared_ptr<gloo::Context> context_;
  double liveness_seconds_;
  std::vector<int> job_ranks_;
  std::vector<Message> messages_;
};

}  // namespace chorus
