#include "collectives/gloo/gloo_links.h"

#include <gloo/allgather.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <numeric>
#include <string>
#include <utility>

namespace chorus {
namespace {

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

}  // namespace

GlooLinks::GlooLinks(std::shared_ptr<gloo::Context> context, double liveness_seconds,
                     std::vector<int> job_ranks)
    : context_(std::move(context)),
      liveness_seconds_(liveness_seconds),
      job_ranks_(std::move(job_ranks)) {
  if (job_ranks_.empty()) {
    job_ranks_.resize(static_cast<std::size_t>(context_->size));
    std::iota(job_ranks_.begin(), job_ranks_.end(), 0);
  }
}

std::chrono::milliseconds GlooLinks::bound() const {
  // Gloo takes no "for ever": a day stands for it.
  if (liveness_seconds_ <= 0) return std::chrono::hours(24);
  return std::chrono::milliseconds(static_cast<int64_t>(liveness_seconds_ * 1000));
}

Status GlooLinks::post_recv(int peer, int tag, void* buf, int64_t bytes) {
  try {
    auto buffer = context_->createUnboundBuffer(buf, static_cast<std::size_t>(bytes));
    buffer->recv(peer, static_cast<uint64_t>(tag));
    messages_.push_back({std::move(buffer), peer, true});
  } catch (const std::exception& e) {
    return Status(StatusCode::kAborted, std::string("gloo: receiving from rank ") +
                                            std::to_string(job_ranks_[peer]) + ": " + e.what());
  }
  return {};
}

Status GlooLinks::post_send(int peer, int tag, const void* buf, int64_t bytes) {
  try {
    // Gloo's buffers are not const; a send only reads it.
    auto buffer =
        context_->createUnboundBuffer(const_cast<void*>(buf), static_cast<std::size_t>(bytes));
    buffer->send(peer, static_cast<uint64_t>(tag));
    messages_.push_back({std::move(buffer), peer, false});
  } catch (const std::exception& e) {
    return Status(StatusCode::kAborted, std::string("gloo: sending to rank ") +
                                            std::to_string(job_ranks_[peer]) + ": " + e.what());
  }
  return {};
}

// Every message of the range gets the time left until one deadline; the peers of those not
// done by then are the ones named.
Status GlooLinks::wait(std::size_t first, std::size_t n, int64_t bytes) {
  (void)bytes;  // Gloo's own loop moves the bytes; nothing to poll here
  const auto deadline = std::chrono::steady_clock::now() + bound();
  std::vector<int> late;
  std::string why;
  for (std::size_t i = first; i < first + n; ++i) {
    Message& m = messages_[i];
    const auto left = std::max(std::chrono::milliseconds(1),
                               std::chrono::duration_cast<std::chrono::milliseconds>(
                                   deadline - std::chrono::steady_clock::now()));
    try {
      if (m.receive ? m.buffer->waitRecv(left) : m.buffer->waitSend(left)) continue;
    } catch (const std::exception& e) {
      if (why.empty()) why = e.what();
    }
    if (std::find(late.begin(), late.end(), job_ranks_[m.peer]) == late.end())
      late.push_back(job_ranks_[m.peer]);
  }
  if (late.empty()) return {};
  std::sort(late.begin(), late.end());
  return ran_out(late, why.empty() ? "" : why.c_str());
}

Status GlooLinks::ran_out(const std::vector<int>& late, const char* what) const {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", liveness_seconds_);
  return Status(StatusCode::kAborted, "rank " + std::to_string(job_ranks_[context_->rank]) +
                                          " stopped waiting for a collective's data after " + secs +
                                          " s (CHORUS_LIVENESS_SECONDS): ranks " +
                                          ranks_text(late) + " took no part in it" +
                                          (*what ? std::string(" (gloo: ") + what + ")" : ""));
}

Status GlooLinks::allgather(const void* send, void* all, int64_t bytes) {
  try {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(static_cast<char*>(const_cast<void*>(send)), static_cast<std::size_t>(bytes));
    opts.setOutput(static_cast<char*>(all), static_cast<std::size_t>(bytes) * context_->size);
    opts.setTimeout(bound());
    gloo::allgather(opts);
  } catch (const std::exception& e) {
    return collective_failed(e.what());
  }
  return {};
}

Status GlooLinks::collective_failed(const char* gloo_error) const {
  std::vector<int> everyone;
  for (int r = 0; r < context_->size; ++r) {
    if (r != context_->rank) everyone.push_back(job_ranks_[r]);
  }
  return ran_out(everyone, gloo_error);
}

}  // namespace chorus
