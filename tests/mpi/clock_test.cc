// The clock offsets measured at init (collectives/clock_offset.h), against clocks shifted by
// known amounts: rank r reads the steady clock plus r * 1.5 s, minus 0.37 s on odd ranks.
// Cristian's bound makes the check exact rather than timed: the true offset lies within the
// reported uncertainty, however slow the machine was.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdlib>

#include "collectives/clock_offset.h"
#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/mpi_links.h"

namespace chorus::testing {
namespace {

int g_rank = 0;
int g_size = 1;

// The job's links, bounded as a runtime's are by default.
Links& world_links() {
  static MpiLinks links(MPI_COMM_WORLD, 60);
  return links;
}

int64_t injected_shift_ns(int rank) {
  return int64_t{rank} * 1'500'000'000 - (rank % 2 ? 370'000'000 : 0);
}

TEST(ClockOffset, FindsAnInjectedShiftWithinItsBound) {
  const int64_t shift = injected_shift_ns(g_rank);
  StatusOr<ClockOffset> offset =
      measure_clock_offset(world_links(), [shift] { return steady_clock_ns() + shift; });
  ASSERT_TRUE(offset.ok()) << offset.status().to_string();
  EXPECT_LE(std::llabs(offset->offset_ns - shift), offset->uncertainty_ns)
      << "rank " << g_rank << ": measured " << offset->offset_ns << " ns, injected " << shift
      << " ns, bound " << offset->uncertainty_ns << " ns";
  if (g_rank == 0) EXPECT_EQ(offset->uncertainty_ns, 0);
  // Generous: a round trip on one host takes microseconds; a second means nothing was kept.
  EXPECT_LT(offset->uncertainty_ns, 1'000'000'000);

  // The origin is one instant: each rank's origin, taken back to rank 0's clock with the
  // injected shift, is rank 0's, up to that rank's bound.
  const int64_t on_rank0 = offset->origin_ns - shift;
  int64_t mine[3] = {on_rank0, -on_rank0, offset->uncertainty_ns};
  int64_t most[3] = {0, 0, 0};
  MPI_Allreduce(mine, most, 3, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_LE(most[0] + most[1], 2 * most[2])
      << "the ranks' origins are " << most[0] + most[1] << " ns apart, bound " << most[2] << " ns";
}

TEST(ClockOffset, AnUnshiftedClockHasAnOffsetWithinItsBound) {
  StatusOr<ClockOffset> offset = measure_clock_offset(world_links(), steady_clock_ns, 3);
  ASSERT_TRUE(offset.ok()) << offset.status().to_string();
  // One host, one steady clock: the offset is 0 up to the bound.
  EXPECT_LE(std::llabs(offset->offset_ns), offset->uncertainty_ns);
}

}  // namespace
}  // namespace chorus::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  MPI_Init(&argc, &argv);
  chorus::mpi_detail::t_mpi_thread = true;  // this thread set MPI up, as init_mpi_world's does
  MPI_Comm_rank(MPI_COMM_WORLD, &chorus::testing::g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &chorus::testing::g_size);
  if (chorus::testing::g_rank != 0) ::testing::GTEST_FLAG(brief) = true;
  int rc = RUN_ALL_TESTS();
  // Every rank's verdict decides the job's.
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
