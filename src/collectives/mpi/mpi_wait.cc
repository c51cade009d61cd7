#include "collectives/mpi/mpi_wait.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "collectives/backoff.h"
#include "collectives/mpi/mpi_check.h"

namespace chorus {
namespace {

// The roll call of a data wait: a tag of its own, apart from the algorithms' and the
// control transport's (which has its own communicator too).
constexpr int kDataRollCallTag = 7390;

Status ran_out(const WaitBound& bound) {
  int rank = 0, size = 1;
  MPI_Comm_rank(bound.comm, &rank);
  MPI_Comm_size(bound.comm, &size);
  std::vector<bool> heard(static_cast<std::size_t>(size), false);
  heard[rank] = true;
  announce_here(bound.comm, kDataRollCallTag);
  const std::vector<int> gone =
      ranks_in_job(bound.comm, listen_for(bound.comm, kDataRollCallTag, std::move(heard)));
  const int me = ranks_in_job(bound.comm, {rank}).front();
  std::string ranks;
  for (int r : gone) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", bound.seconds);
  const std::string who = gone.empty() ? "every member answered the roll call, so one of them "
                                         "is stuck waiting for another"
                                       : "ranks [" + ranks + "] took no part in it";
  return Status(StatusCode::kAborted, "rank " + std::to_string(me) +
                                          " stopped waiting for a collective's data after " + secs +
                                          " s (CHORUS_LIVENESS_SECONDS): " + who);
}

}  // namespace

std::vector<int> ranks_in_job(MPI_Comm comm, const std::vector<int>& ranks) {
  std::vector<int> out(ranks.size(), MPI_UNDEFINED);
  MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  if (MPI_Comm_group(comm, &mine) == MPI_SUCCESS &&
      MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
    MPI_Group_translate_ranks(mine, static_cast<int>(ranks.size()), ranks.data(), world,
                              out.data());
  }
  if (mine != MPI_GROUP_NULL) MPI_Group_free(&mine);
  if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == MPI_UNDEFINED) out[i] = ranks[i];
  }
  return out;
}

Status wait_all(int n, MPI_Request* requests, int64_t bytes, const WaitBound& bound) {
  // The clock is read every kClockEvery tests while spinning (a read costs about as much as
  // a test), and at every pause after.
  constexpr int kClockEvery = 16;
  const auto start = std::chrono::steady_clock::now();
  const auto spin_until = poll_deadline(bytes);
  const auto limit = std::chrono::duration<double>(bound.seconds);
  bool spinning = true;
  Backoff backoff(std::chrono::microseconds(50), /*eager=*/false);
  for (int done = 0, tests = 1;; tests += spinning ? 1 : 0) {
    CHORUS_MPI_CHECK(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return {};
    if (spinning && tests % kClockEvery == 0) {
      spinning = std::chrono::steady_clock::now() < spin_until;
    }
    if (spinning) continue;
    backoff.pause();
    if (bound.seconds > 0 && std::chrono::steady_clock::now() - start > limit) {
      return ran_out(bound);
    }
  }
}

void announce_here(MPI_Comm comm, int tag) {
  static const char here = 1;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Isend(&here, 1, MPI_BYTE, r, tag, comm, &req) == MPI_SUCCESS) MPI_Request_free(&req);
  }
}

std::vector<int> listen_for(MPI_Comm comm, int tag, std::vector<bool> heard) {
  const auto until = std::chrono::steady_clock::now() + kRollCallGrace;
  while (std::find(heard.begin(), heard.end(), false) != heard.end() &&
         std::chrono::steady_clock::now() < until) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, tag, comm, &flag, &status) != MPI_SUCCESS) break;
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    char byte = 0;
    MPI_Recv(&byte, 1, MPI_BYTE, status.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE);
    heard[status.MPI_SOURCE] = true;
  }
  std::vector<int> out;
  for (int r = 0; r < static_cast<int>(heard.size()); ++r) {
    if (!heard[r]) out.push_back(r);
  }
  return out;
}

}  // namespace chorus
