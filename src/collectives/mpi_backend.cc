#include "collectives/mpi_backend.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "collectives/mpi_check.h"
#include "collectives/mpi_wait.h"
#include "kernels/reduce_tree.h"

namespace chorus {
namespace {

constexpr int kReduceScatterTag = 7301;
constexpr int kShareTag = 7302;

std::vector<int64_t> prefix_offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  for (std::size_t i = 0; i < counts.size(); ++i) offsets[i + 1] = offsets[i] + counts[i];
  return offsets;
}

Status int_counts(const std::vector<int64_t>& bytes, const char* what, std::vector<int>* counts,
                  std::vector<int>* displs) {
  counts->resize(bytes.size());
  displs->resize(bytes.size());
  int64_t offset = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] > INT_MAX || offset > INT_MAX) {
      return invalid_argument(std::string(what) + ": " + std::to_string(bytes[i]) +
                              " bytes for one rank exceed the MPI backend's 2 GiB limit");
    }
    (*counts)[i] = static_cast<int>(bytes[i]);
    (*displs)[i] = static_cast<int>(offset);
    offset += bytes[i];
  }
  return {};
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t total = 0;
  for (int64_t x : v) total += x;
  return total;
}

}  // namespace

MpiBackend::MpiBackend(MPI_Comm comm, HostAlgorithm algorithm, double liveness_seconds)
    : comm_(comm), algorithm_(algorithm), bound_{comm, liveness_seconds} {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  sources_.resize(size_);
  tree_ = std::make_unique<MpiTree>(comm_, rank_, size_, bound_);
}

char* MpiBackend::scratch(std::size_t bytes) { return scratch_.get(bytes); }

const std::vector<int64_t>& MpiBackend::blocks(int64_t count) {
  even_blocks(count, size_, &blocks_);
  return blocks_;
}

Status MpiBackend::allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                             ReduceOp op, kernels::Scale scale) {
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  if (size_ == 1 || count == 0) {
    kernels::reduce_ordered(recv, &send, 1, count, dtype, op, scale);
    return {};
  }
  HostAlgorithm algorithm = algorithm_;
  // MPI_Allgather counts in int: a forced gather of more falls back to the model's choice.
  if (algorithm == HostAlgorithm::kAuto ||
      (algorithm == HostAlgorithm::kGatherAll && count * esz * size_ > INT_MAX)) {
    algorithm = choose_allreduce(size_, count * esz, link_);
  }
  switch (algorithm) {
    case HostAlgorithm::kGatherAll: return gather_all_reduce(send, recv, count, dtype, op, scale);
    case HostAlgorithm::kRecursiveDoubling:
      return tree_->allreduce_doubling(send, recv, count, dtype, op, scale);
    case HostAlgorithm::kHalvingDoubling:
      return tree_->allreduce_halving(send, recv, count, dtype, op, scale);
    default: break;
  }
  const std::vector<int64_t>& counts = blocks(count);
  std::vector<int64_t> offsets = prefix_offsets(counts);
  char* out = static_cast<char*>(recv);
  Status s = pipelined_reduce_scatter(send, out + offsets[rank_] * esz, counts, dtype, op, scale);
  if (!s.ok()) return s;
  return share_blocks(out, counts, offsets, esz);
}

Status MpiBackend::gather_all_reduce(const void* send, void* recv, int64_t count, DataType dtype,
                                     ReduceOp op, kernels::Scale scale) {
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  const int64_t bytes = count * esz;
  char* all = scratch(static_cast<std::size_t>(bytes * size_));
  MPI_Request request;
  CHORUS_MPI_CHECK(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, all,
                                  static_cast<int>(bytes), MPI_BYTE, comm_, &request));
  if (Status s = wait_all(1, &request, bytes * size_, bound_); !s.ok()) return s;
  for (int q = 0; q < size_; ++q) sources_[q] = all + q * bytes;
  kernels::reduce_tree(recv, sources_.data(), size_, count, dtype, op, scale);
  return {};
}

// Every rank sends its block to every other and receives theirs, all at once.
Status MpiBackend::share_blocks(char* out, const std::vector<int64_t>& counts,
                                const std::vector<int64_t>& offsets, int64_t esz) {
  for (int64_t c : counts) {
    if (c * esz > INT_MAX) {
      return invalid_argument("allreduce: " + std::to_string(c * esz) +
                              " bytes for one rank exceed the MPI backend's 2 GiB limit");
    }
  }
  requests_.assign(static_cast<std::size_t>(2 * (size_ - 1)), MPI_REQUEST_NULL);
  const int mine = static_cast<int>(counts[rank_] * esz);
  for (int k = 1; k < size_; ++k) {
    const int to = (rank_ + k) % size_;
    const int from = (rank_ - k + size_) % size_;
    CHORUS_MPI_CHECK(MPI_Irecv(out + offsets[from] * esz, static_cast<int>(counts[from] * esz),
                               MPI_BYTE, from, kShareTag, comm_, &requests_[2 * (k - 1)]));
    CHORUS_MPI_CHECK(MPI_Isend(out + offsets[rank_] * esz, mine, MPI_BYTE, to, kShareTag, comm_,
                               &requests_[2 * (k - 1) + 1]));
  }
  const int64_t theirs = (offsets[size_] - counts[rank_]) * esz;
  return wait_all(static_cast<int>(requests_.size()), requests_.data(),
                  theirs + int64_t{mine} * (size_ - 1), bound_);
}

Status MpiBackend::reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
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
    return tree_->reducescatter_halving(send, recv, counts, dtype, op, scale);
  }
  return pipelined_reduce_scatter(send, recv, counts, dtype, op, scale);
}

Status MpiBackend::pipelined_reduce_scatter(const void* send, void* recv,
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
  char* staging = scratch(static_cast<std::size_t>(mine_bytes * peers));

  // Receives of this rank's block from every peer, chunk by chunk: request c*peers+slot(p).
  const int64_t my_chunks = chunks_of(mine);
  requests_.assign(static_cast<std::size_t>(my_chunks * peers), MPI_REQUEST_NULL);
  for (int64_t c = 0; c < my_chunks; ++c) {
    const int64_t len = std::min(chunk, mine - c * chunk) * esz;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      CHORUS_MPI_CHECK(MPI_Irecv(staging + slot(p) * mine_bytes + c * chunk * esz,
                                 static_cast<int>(len), MPI_BYTE, p, kReduceScatterTag, comm_,
                                 &requests_[c * peers + slot(p)]));
    }
  }
  // Sends of every peer's block, starting with the next rank so that not every rank hits
  // rank 0 first.
  const std::size_t first_send = requests_.size();
  for (int k = 1; k < size_; ++k) {
    const int p = (rank_ + k) % size_;
    for (int64_t c = 0; c < chunks_of(counts[p]); ++c) {
      const int64_t len = std::min(chunk, counts[p] - c * chunk) * esz;
      requests_.push_back(MPI_REQUEST_NULL);
      CHORUS_MPI_CHECK(MPI_Isend(in + (offsets[p] + c * chunk) * esz, static_cast<int>(len),
                                 MPI_BYTE, p, kReduceScatterTag, comm_, &requests_.back()));
    }
  }
  // Combine each chunk in rank order as soon as every peer's piece of it arrived.
  for (int64_t c = 0; c < my_chunks; ++c) {
    const int64_t len = std::min(chunk, mine - c * chunk);
    if (Status s = wait_all(peers, &requests_[c * peers], 2 * len * esz * peers, bound_); !s.ok()) {
      return s;
    }
    for (int q = 0; q < size_; ++q) {
      sources_[q] = q == rank_ ? in + (offsets[rank_] + c * chunk) * esz
                               : staging + slot(q) * mine_bytes + c * chunk * esz;
    }
    kernels::reduce_tree(out + c * chunk * esz, sources_.data(), size_, len, dtype, op, scale);
  }
  return wait_all(static_cast<int>(requests_.size() - first_send), requests_.data() + first_send,
                  (offsets[size_] - mine) * esz, bound_);
}

Status MpiBackend::allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) {
  std::vector<int> counts, displs;
  if (Status s = int_counts(bytes, "allgather", &counts, &displs); !s.ok()) return s;
  char* out = static_cast<char*>(recv);
  const void* source = send == out + displs[rank_] ? MPI_IN_PLACE : send;
  MPI_Request request;
  CHORUS_MPI_CHECK(MPI_Iallgatherv(source, counts[rank_], MPI_BYTE, out, counts.data(),
                                   displs.data(), MPI_BYTE, comm_, &request));
  return wait_all(1, &request, sum(bytes), bound_);
}

Status MpiBackend::broadcast(void* data, int64_t bytes, int root) {
  constexpr int64_t kPiece = int64_t{1} << 30;
  char* p = static_cast<char*>(data);
  for (int64_t done = 0; done < bytes; done += kPiece) {
    MPI_Request request;
    const int64_t piece = std::min(kPiece, bytes - done);
    CHORUS_MPI_CHECK(
        MPI_Ibcast(p + done, static_cast<int>(piece), MPI_BYTE, root, comm_, &request));
    if (Status s = wait_all(1, &request, piece, bound_); !s.ok()) return s;
  }
  return {};
}

Status MpiBackend::alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                             const std::vector<int64_t>& recv_bytes) {
  std::vector<int> scounts, sdispls, rcounts, rdispls;
  if (Status s = int_counts(send_bytes, "alltoall", &scounts, &sdispls); !s.ok()) return s;
  if (Status s = int_counts(recv_bytes, "alltoall", &rcounts, &rdispls); !s.ok()) return s;
  MPI_Request request;
  CHORUS_MPI_CHECK(MPI_Ialltoallv(send, scounts.data(), sdispls.data(), MPI_BYTE, recv,
                                  rcounts.data(), rdispls.data(), MPI_BYTE, comm_, &request));
  return wait_all(1, &request, sum(send_bytes) + sum(recv_bytes), bound_);
}

Status MpiBackend::barrier() {
  MPI_Request request;
  CHORUS_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  return wait_all(1, &request, 0, bound_);
}

}  // namespace chorus
