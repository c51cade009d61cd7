#include "collectives/shm/shm_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <numeric>
#include <string>
#include <thread>
#include <utility>

#include "base/logging.h"
#include "collectives/backoff.h"
#include "transport/control_transport.h"

namespace chorus {
namespace {

// A buffer's regions add up to about kBufferBytes, each at least kMinRegionBytes: every
// chunk costs one or two waits for the others, so regions much smaller than that would
// make a large tensor pay a wait every few kilobytes.
constexpr std::size_t kBufferBytes = std::size_t{256} << 10;
constexpr std::size_t kMinRegionBytes = std::size_t{16} << 10;

}  // namespace

std::size_t ShmBackend::region_bytes(int size) {
  const std::size_t bytes =
      std::max(kBufferBytes / static_cast<std::size_t>(size), kMinRegionBytes);
  return bytes / 64 * 64;
}

std::size_t ShmBackend::segment_bytes(int size) {
  const auto n = static_cast<std::size_t>(size);
  return sizeof(Counter) * n + 2 * n * n * region_bytes(size);
}

void ShmBackend::init_segment(void* base, int size) {
  for (int i = 0; i < size; ++i) new (static_cast<Counter*>(base) + i) Counter();
}

ShmBackend::ShmBackend(SharedSegment segment, int rank, int size, double liveness_seconds,
                       std::vector<int> job_ranks)
    : segment_(std::move(segment)),
      rank_(rank),
      size_(size),
      liveness_seconds_(liveness_seconds),
      job_ranks_(std::move(job_ranks)),
      region_(region_bytes(size)),
      counters_(static_cast<Counter*>(segment_.data())),
      buffers_(static_cast<char*>(segment_.data()) + sizeof(Counter) * size),
      sources_(size),
      offsets_(size + 1) {
  if (job_ranks_.empty()) {
    job_ranks_.resize(static_cast<std::size_t>(size));
    std::iota(job_ranks_.begin(), job_ranks_.end(), 0);
  }
  counters_[rank_].process.set_to_this_process();
}

StatusOr<std::unique_ptr<Backend>> ShmBackend::join(ControlTransport& control,
                                                    double liveness_seconds, std::string* why) {
  SharedSegment segment;
  const int size = control.size();
  if (Status s = segment.join(
          control, "reduce", segment_bytes(size), [size](void* p) { init_segment(p, size); }, why);
      !s.ok()) {
    return s;
  }
  if (!segment.mapped()) return std::unique_ptr<Backend>();
  std::vector<int> members(static_cast<std::size_t>(size));
  std::iota(members.begin(), members.end(), 0);
  return std::unique_ptr<Backend>(std::make_unique<ShmBackend>(
      std::move(segment), control.rank(), size, liveness_seconds, control.job_ranks(members)));
}

StatusOr<std::unique_ptr<Backend>> shared_memory_provider(Group& group, bool allowed,
                                                          const std::string& label) {
  std::string why = "CHORUS_SHARED_MEMORY=0";
  std::unique_ptr<Backend> provider;
  if (allowed) {
    why.clear();
    StatusOr<std::unique_ptr<Backend>> shared = group.shared_memory(&why);
    if (!shared.ok()) return shared.status();
    provider = std::move(shared).value();
  }
  if (!provider)
    log().debug("{}: no shared memory for reductions ({}); MPI moves them", label, why);
  return provider;
}

char* ShmBackend::region(int owner, uint64_t chunk, int block) const {
  const std::size_t buffer = static_cast<std::size_t>(owner) * 2 + chunk % 2;
  return buffers_ + (buffer * size_ + block) * region_;
}

Status ShmBackend::allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                             ReduceOp op, kernels::Scale scale) {
  if (count == 0) return {};
  const auto bytes = static_cast<std::size_t>(count) * dtype_size(dtype);
  if (bytes <= region_) return allreduce_whole(send, recv, count, dtype, op, scale);
  even_blocks(count, size_, &blocks_);
  return reduce(send, recv, blocks_, dtype, op, scale, /*share=*/true);
}

// Every rank's whole input fits in one region: each rank publishes it in its own buffer,
// arrives once, and combines every element itself, in rank order as a block's owner would.
// One wait instead of two. The buffer is reused two calls later, after every rank arrived
// in the next call, and so had finished reading this one.
Status ShmBackend::allreduce_whole(const void* send, void* recv, int64_t count, DataType dtype,
                                   ReduceOp op, kernels::Scale scale) {
  const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
  std::memcpy(region(rank_, chunks_, 0), send, static_cast<std::size_t>(bytes));
  if (Status s = arrive_and_wait(bytes * size_); !s.ok()) return s;
  for (int q = 0; q < size_; ++q) sources_[q] = q == rank_ ? send : region(q, chunks_, 0);
  kernels::reduce_ordered(recv, sources_.data(), size_, count, dtype, op, scale);
  ++chunks_;
  return {};
}

Status ShmBackend::reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                                 DataType dtype, ReduceOp op, kernels::Scale scale) {
  return reduce(send, recv, counts, dtype, op, scale, /*share=*/false);
}

// `share`: recv is the whole output and every rank gets every block (allreduce); otherwise
// recv is this rank's block.
Status ShmBackend::reduce(const void* send, void* recv, const std::vector<int64_t>& counts,
                          DataType dtype, ReduceOp op, kernels::Scale scale, bool share) {
  const auto esz = static_cast<int64_t>(dtype_size(dtype));
  const int64_t per = static_cast<int64_t>(region_) / esz;  // of each block, per chunk
  int64_t longest = 0;
  for (int q = 0; q < size_; ++q) {
    offsets_[q + 1] = offsets_[q] + counts[q];
    longest = std::max(longest, counts[q]);
  }
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  char* own_out = share ? out + offsets_[rank_] * esz : out;
  for (int64_t first = 0; first < longest; first += per, ++chunks_) {
    auto piece_bytes = [&](int q) { return std::clamp<int64_t>(counts[q] - first, 0, per) * esz; };
    for (int q = 0; q < size_; ++q) {
      if (q != rank_ && piece_bytes(q) > 0) {
        std::memcpy(region(rank_, chunks_, q), in + (offsets_[q] + first) * esz, piece_bytes(q));
      }
    }
    if (Status s = arrive_and_wait(per * esz * size_); !s.ok()) return s;
    const int64_t mine = piece_bytes(rank_);
    if (mine > 0) {
      for (int q = 0; q < size_; ++q) {
        sources_[q] = q == rank_ ? in + (offsets_[q] + first) * esz : region(q, chunks_, rank_);
      }
      kernels::reduce_ordered(own_out + first * esz, sources_.data(), size_, mine / esz, dtype, op,
                              scale);
    }
    if (!share) continue;
    if (mine > 0) std::memcpy(region(rank_, chunks_, rank_), own_out + first * esz, mine);
    if (Status s = arrive_and_wait(per * esz); !s.ok()) return s;
    for (int q = 0; q < size_; ++q) {
      if (q != rank_ && piece_bytes(q) > 0) {
        std::memcpy(out + (offsets_[q] + first) * esz, region(q, chunks_, q), piece_bytes(q));
      }
    }
  }
  return {};
}

Status ShmBackend::arrive_and_wait(int64_t bytes) {
  // Tight polling for the first kSpins reads (a peer that is running arrives within
  // microseconds), then a yield per read, so that a peer waiting for this core gets it.
  // Once napping, the awaited process is checked every kCheckEvery naps (a few ms), and so
  // is the liveness bound.
  constexpr int kSpins = 1000;
  constexpr int kClockEvery = 64;
  constexpr int kCheckEvery = 64;
  ++arrivals_;
  counters_[rank_].arrivals.store(arrivals_, std::memory_order_release);
  const auto start = std::chrono::steady_clock::now();
  const auto spin_until = poll_deadline(bytes);
  const auto limit = std::chrono::duration<double>(liveness_seconds_);
  bool spinning = true;
  Backoff backoff(std::chrono::microseconds(50), /*eager=*/false);
  int64_t reads = 0;
  int64_t naps = 0;
  for (int q = 0; q < size_; ++q) {
    while (counters_[q].arrivals.load(std::memory_order_acquire) < arrivals_) {
      ++reads;
      if (spinning && reads % kClockEvery == 0) {
        spinning = std::chrono::steady_clock::now() < spin_until;
      }
      if (spinning) {
        if (reads > kSpins) std::this_thread::yield();
        continue;
      }
      backoff.pause();
      if (++naps % kCheckEvery != 0) continue;
      if (counters_[q].process.exited()) {
        return Status(StatusCode::kAborted,
                      "rank " + std::to_string(job_rank(q)) + " (pid " +
                          std::to_string(counters_[q].process.pid.load(std::memory_order_relaxed)) +
                          ", on this host) exited in the middle of a reduction; rank " +
                          std::to_string(job_rank(rank_)) + " was waiting for it");
      }
      if (liveness_seconds_ > 0 && std::chrono::steady_clock::now() - start > limit) {
        return ran_out();
      }
    }
  }
  return {};
}

// The members that have not arrived are known exactly: their counters are behind this
// rank's. They may be alive (stopped, or stuck outside Chorus) or have left the call after
// their own part failed; either way the segment's turns are out of step from here on.
Status ShmBackend::ran_out() const {
  std::string late;
  for (int q = 0; q < size_; ++q) {
    if (counters_[q].arrivals.load(std::memory_order_acquire) < arrivals_)
      late += (late.empty() ? "" : ", ") + std::to_string(job_rank(q));
  }
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", liveness_seconds_);
  return Status(StatusCode::kAborted, "rank " + std::to_string(job_rank(rank_)) +
                                          " stopped waiting in a shared-memory reduction after " +
                                          secs + " s (CHORUS_LIVENESS_SECONDS): ranks [" + late +
                                          "] took no part in it");
}

}  // namespace chorus
