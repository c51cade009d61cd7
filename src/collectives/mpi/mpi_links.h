#pragma once
// Links (collectives/links.h) over an MPI communicator: MPI_Isend and MPI_Irecv, waited
// for by wait_all (collectives/mpi/mpi_wait.h), whose roll call names the members that took no
// part as ranks of the job.

#include <mpi.h>

#include <vector>

#include "collectives/links.h"
#include "collectives/mpi/mpi_wait.h"

namespace chorus {

class MpiLinks final : public Links {
 public:
  /// Over `comm` (owned by the caller, alive as long as this); waits fail past
  /// `liveness_seconds` (0: never).
  MpiLinks(MPI_Comm comm, double liveness_seconds);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status post_recv(int peer, int tag, void* buf, int64_t bytes) override;
  Status post_send(int peer, int tag, const void* buf, int64_t bytes) override;
  int64_t max_message_bytes() const override;
  std::size_t posted() const override { return requests_.size(); }
  Status wait(std::size_t first, std::size_t n, int64_t bytes) override;
  void clear() override { requests_.clear(); }
  Status allgather(const void* send, void* all, int64_t bytes) override;

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  WaitBound bound_;
  std::vector<MPI_Request> requests_;
};

}  // namespace chorus
