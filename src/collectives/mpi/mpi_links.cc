#include "collectives/mpi/mpi_links.h"

#include <climits>
#include <string>

#include "collectives/mpi/mpi_check.h"

namespace chorus {
namespace {

// MPI counts bytes in int.
Status fits(int64_t bytes) {
  if (bytes <= INT_MAX) return {};
  return invalid_argument(std::to_string(bytes) +
                          " bytes in one message exceed the MPI backend's 2 GiB limit");
}

}  // namespace

// MPI counts bytes in int.
int64_t MpiLinks::max_message_bytes() const { return INT_MAX; }

MpiLinks::MpiLinks(MPI_Comm comm, double liveness_seconds)
    : comm_(comm), bound_{comm, liveness_seconds} {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Status MpiLinks::post_recv(int peer, int tag, void* buf, int64_t bytes) {
  if (Status s = fits(bytes); !s.ok()) return s;
  requests_.push_back(MPI_REQUEST_NULL);
  CHORUS_MPI_CHECK(
      MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &requests_.back()));
  return {};
}

Status MpiLinks::post_send(int peer, int tag, const void* buf, int64_t bytes) {
  if (Status s = fits(bytes); !s.ok()) return s;
  requests_.push_back(MPI_REQUEST_NULL);
  CHORUS_MPI_CHECK(
      MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &requests_.back()));
  return {};
}

Status MpiLinks::wait(std::size_t first, std::size_t n, int64_t bytes) {
  return wait_all(static_cast<int>(n), requests_.data() + first, bytes, bound_);
}

// MPI_Iallgather counts in int; its algorithm takes log P rounds, as the cost model has it.
Status MpiLinks::allgather(const void* send, void* all, int64_t bytes) {
  if (Status s = fits(bytes * size_); !s.ok()) return s;
  MPI_Request request;
  CHORUS_MPI_CHECK(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, all,
                                  static_cast<int>(bytes), MPI_BYTE, comm_, &request));
  return wait_all(1, &request, bytes * size_, bound_);
}

}  // namespace chorus
