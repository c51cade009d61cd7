#include "collectives/gloo/gloo_backend.h"

#include <gloo/allgatherv.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>

#include <cstring>
#include <exception>
#include <utility>

namespace chorus {

GlooBackend::GlooBackend(std::shared_ptr<gloo::Context> context, HostAlgorithm algorithm,
                         double liveness_seconds, std::vector<int> job_ranks)
    : links_(std::move(context), liveness_seconds, std::move(job_ranks)),
      reduce_(links_, algorithm) {}

Status GlooBackend::allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                              ReduceOp op, kernels::Scale scale) {
  return reduce_.allreduce(send, recv, count, dtype, op, scale);
}

Status GlooBackend::reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                                  DataType dtype, ReduceOp op, kernels::Scale scale) {
  return reduce_.reducescatter(send, recv, counts, dtype, op, scale);
}

// Gloo reads its input from a buffer apart from its output: `send` inside `recv` (the
// in-place form) is copied out first.
Status GlooBackend::allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) {
  std::vector<size_t> counts(bytes.begin(), bytes.end());
  std::vector<char> mine;
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  int64_t at = 0;
  for (int r = 0; r < rank(); ++r) at += bytes[r];
  if (in == out + at) {
    mine.assign(in, in + bytes[rank()]);
    in = mine.data();
  }
  try {
    gloo::AllgathervOptions opts(links_.context());
    opts.setInput(const_cast<char*>(in), counts[rank()]);
    opts.setOutput(out, counts);
    opts.setTimeout(links_.bound());
    gloo::allgatherv(opts);
  } catch (const std::exception& e) {
    return links_.collective_failed(e.what());
  }
  return {};
}

Status GlooBackend::broadcast(void* data, int64_t bytes, int root) {
  try {
    gloo::BroadcastOptions opts(links_.context());
    opts.setOutput(static_cast<char*>(data), static_cast<size_t>(bytes));
    opts.setRoot(root);
    opts.setTimeout(links_.bound());
    gloo::broadcast(opts);
  } catch (const std::exception& e) {
    return links_.collective_failed(e.what());
  }
  return {};
}

Status GlooBackend::alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                              const std::vector<int64_t>& recv_bytes) {
  try {
    gloo::AlltoallvOptions opts(links_.context());
    opts.setInput(static_cast<char*>(const_cast<void*>(send)), send_bytes);
    opts.setOutput(static_cast<char*>(recv), recv_bytes);
    opts.setTimeout(links_.bound());
    gloo::alltoallv(opts);
  } catch (const std::exception& e) {
    return links_.collective_failed(e.what());
  }
  return {};
}

Status GlooBackend::barrier() {
  try {
    gloo::BarrierOptions opts(links_.context());
    opts.setTimeout(links_.bound());
    gloo::barrier(opts);
  } catch (const std::exception& e) {
    return links_.collective_failed(e.what());
  }
  return {};
}

}  // namespace chorus
