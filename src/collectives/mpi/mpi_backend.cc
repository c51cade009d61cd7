#include "collectives/mpi/mpi_backend.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/mpi_wait.h"

namespace chorus {
namespace {

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
    : comm_(comm),
      bound_{comm, liveness_seconds},
      links_(comm, liveness_seconds),
      reduce_(links_, algorithm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Status MpiBackend::allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                             ReduceOp op, kernels::Scale scale) {
  return reduce_.allreduce(send, recv, count, dtype, op, scale);
}

Status MpiBackend::reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                                 DataType dtype, ReduceOp op, kernels::Scale scale) {
  return reduce_.reducescatter(send, recv, counts, dtype, op, scale);
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
