#include "collectives/host_reduce.h"

#include <algorithm>

#include "collectives/backend.h"
#include "kernels/reduce_tree.h"

namespace chorus {
namespace {

std::vector<int64_t> prefix_offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  for (std::size_t i = 0; i < counts.size(); ++i) offsets[i + 1] = offsets[i] + counts[i];
  return offsets;
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t total = 0;
  for (int64_t x : v) total += x;
  return total;
}

}  // namespace

HostReduce::HostReduce(Links& links, HostAlgorithm algorithm)
    : links_(links),
      rank_(links.rank()),
      size_(links.size()),
      algorithm_(algorithm),
      tree_(links),
      sources_(static_cast<std::size_t>(links.size())) {}

Status HostReduce::allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                             ReduceOp op, kernels::Scale scale) {
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  if (size_ == 1 || count == 0) {
    kernels::reduce_ordered(recv, &send, 1, count, dtype, op, scale);
    return {};
  }
  HostAlgorithm algorithm = algorithm_;
  // A forced gather of more than the links carry in all falls back to the model's choice.
  if (algorithm == HostAlgorithm::kAuto || (algorithm == HostAlgorithm::kGatherAll &&
                                            count * esz * size_ > links_.max_message_bytes())) {
    algorithm = choose_allreduce(size_, count * esz, link_);
  }
  switch (algorithm) {
    case HostAlgorithm::kGatherAll: return gather_all_reduce(send, recv, count, dtype, op, scale);
    case HostAlgorithm::kRecursiveDoubling:
      return tree_.allreduce_doubling(send, recv, count, dtype, op, scale);
    case HostAlgorithm::kHalvingDoubling:
      return tree_.allreduce_halving(send, recv, count, dtype, op, scale);
    default: break;
  }
  even_blocks(count, size_, &blocks_);
  const std::vector<int64_t>& counts = blocks_;
  std::vector<int64_t> offsets = prefix_offsets(counts);
  char* out = static_cast<char*>(recv);
  Status s = pipelined_reduce_scatter(send, out + offsets[rank_] * esz, counts, dtype, op, scale);
  if (!s.ok()) return s;
  return share_blocks(out, counts, offsets, esz);
}

Status HostReduce::gather_all_reduce(const void* send, void* recv, int64_t count, DataType dtype,
                                     ReduceOp op, kernels::Scale scale) {
  const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
  char* all = scratch_.get(static_cast<std::size_t>(bytes * size_));
  if (Status s = links_.allgather(send, all, bytes); !s.ok()) return s;
  for (int q = 0; q < size_; ++q) sources_[q] = all + q * bytes;
  kernels::reduce_tree(recv, sources_.data(), size_, count, dtype, op, scale);
  return {};
}

// Every rank sends its block to every other and receives theirs, all at once.
Status HostReduce::share_blocks(char* out, const std::vector<int64_t>& counts,
                                const std::vector<int64_t>& offsets, int64_t esz) {
  for (int64_t c : counts) {
    if (c * esz > links_.max_message_bytes()) {
      return invalid_argument(
          "allreduce: " + std::to_string(c * esz) + " bytes for one rank exceed the " +
          std::to_string(links_.max_message_bytes()) + " one message may carry");
    }
  }
  links_.clear();
  const int64_t mine = counts[rank_] * esz;
  for (int k = 1; k < size_; ++k) {
    const int to = (rank_ + k) % size_;
    const int from = (rank_ - k + size_) % size_;
    if (Status s = links_.post_recv(from, kShareTag, out + offsets[from] * esz, counts[from] * esz);
        !s.ok()) {
      return s;
    }
    if (Status s = links_.post_send(to, kShareTag, out + offsets[rank_] * esz, mine); !s.ok()) {
      return s;
    }
  }
  const int64_t theirs = (offsets[size_] - counts[rank_]) * esz;
  return links_.wait(0, links_.posted(), theirs + mine * (size_ - 1));
}

Status HostReduce::reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                                 DataType dtype, ReduceOp op, kernels::Scale scale) {
  if (size_ == 1) {
    kernels::reduce_ordered(recv, &send, 1, counts[0], dtype, op, scale);
    return {};
  }
  HostAlgorithm algorithm = algorithm_;
  if (algorithm != HostAlgorithm::kDirect && algorithm != HostAlgorithm::kHalvingDoubling) {
    algorithm =
        choose_reducescatter(size_, sum(counts) * static_cast<int64_t>(dtype_size(dtype)), link_);
  }
  if (algorithm == HostAlgorithm::kHalvingDoubling) {
    return tree_.reducescatter_halving(send, recv, counts, dtype, op, scale);
  }
  return pipelined_reduce_scatter(send, recv, counts, dtype, op, scale);
}

Status HostReduce::pipelined_reduce_scatter(const void* send, void* recv,
                                            const std::vector<int64_t>& counts, DataType dtype,
                                            ReduceOp op, kernels::Scale scale) {
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  const std::vector<int64_t> offsets = prefix_offsets(counts);
  const int64_t mine = counts[rank_];
  const int64_t mine_bytes = mine * esz;
  const int64_t chunk = std::max<int64_t>(1, kChunkBytes / esz);
  const int peers = size_ - 1;
  auto slot = [&](int p) { return p < rank_ ? p : p - 1; };
  auto chunks_of = [&](int64_t n) { return (n + chunk - 1) / chunk; };
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  char* staging = scratch_.get(static_cast<std::size_t>(mine_bytes * peers));

  // Receives of this rank's block from every peer, chunk by chunk: message c*peers+slot(p).
  const int64_t my_chunks = chunks_of(mine);
  links_.clear();
  for (int64_t c = 0; c < my_chunks; ++c) {
    const int64_t len = std::min(chunk, mine - c * chunk) * esz;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      if (Status s = links_.post_recv(p, kReduceScatterTag,
                                      staging + slot(p) * mine_bytes + c * chunk * esz, len);
          !s.ok()) {
        return s;
      }
    }
  }
  // Sends of every peer's block, starting with the next rank so that not every rank hits
  // rank 0 first.
  const std::size_t first_send = links_.posted();
  for (int k = 1; k < size_; ++k) {
    const int p = (rank_ + k) % size_;
    for (int64_t c = 0; c < chunks_of(counts[p]); ++c) {
      const int64_t len = std::min(chunk, counts[p] - c * chunk) * esz;
      if (Status s =
              links_.post_send(p, kReduceScatterTag, in + (offsets[p] + c * chunk) * esz, len);
          !s.ok()) {
        return s;
      }
    }
  }
  // Combine each chunk in rank order as soon as every peer's piece of it arrived.
  for (int64_t c = 0; c < my_chunks; ++c) {
    const int64_t len = std::min(chunk, mine - c * chunk);
    if (Status s = links_.wait(static_cast<std::size_t>(c * peers), static_cast<std::size_t>(peers),
                               2 * len * esz * peers);
        !s.ok()) {
      return s;
    }
    for (int q = 0; q < size_; ++q) {
      sources_[q] = q == rank_ ? in + (offsets[rank_] + c * chunk) * esz
                               : staging + slot(q) * mine_bytes + c * chunk * esz;
    }
    kernels::reduce_tree(out + c * chunk * esz, sources_.data(), size_, len, dtype, op, scale);
  }
  return links_.wait(first_send, links_.posted() - first_send, (offsets[size_] - mine) * esz);
}

}  // namespace chorus
