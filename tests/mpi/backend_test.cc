// The MPI backend's reductions on both of its paths, with no runtime around them: point to
// point messages (a set across hosts) and shared memory (a set on one host). For every
// dtype and op, sizes on both sides of each path's thresholds and several chunks long, in
// place and out of place, every rank's result must have the bits of the same reduction
// computed locally from every rank's input in rank order.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collectives/mpi_backend.h"
#include "collectives/mpi_world.h"
#include "kernels/reduce_kernels.h"
#include "test_data.h"

namespace chorus {
namespace {

using testing::all_dtypes;

int g_rank = 0;
int g_size = 1;
Group* g_shared = nullptr;    // reduces through shared memory
Group* g_messages = nullptr;  // reduces by messages

// Not exact in the 16-bit types: the order of combination shows in the bits.
double input(DataType t, int rank, int64_t i) {
  const double v = testing::value(t, rank, i);
  return testing::is_float(t) ? v + 0.1 * static_cast<double>((i + rank) % 7) : v;
}

std::vector<unsigned char> filled(DataType t, int rank, int64_t count) {
  std::vector<unsigned char> b(static_cast<std::size_t>(count) * dtype_size(t) + 1);
  for (int64_t i = 0; i < count; ++i) testing::store(t, b.data(), i, input(t, rank, i));
  return b;
}

// Every rank's inputs combined in rank order here, elements [first, first + count).
std::vector<unsigned char> expected(DataType t, ReduceOp op, kernels::Scale scale, int64_t total,
                                    int64_t first, int64_t count) {
  std::vector<std::vector<unsigned char>> inputs;
  std::vector<const void*> sources;
  for (int r = 0; r < g_size; ++r) inputs.push_back(filled(t, r, total));
  for (int r = 0; r < g_size; ++r) sources.push_back(inputs[r].data() + first * dtype_size(t));
  std::vector<unsigned char> out(static_cast<std::size_t>(count) * dtype_size(t) + 1);
  kernels::reduce_ordered(out.data(), sources.data(), g_size, count, t, op, scale);
  return out;
}

std::string describe(const char* path, DataType t, ReduceOp op, int64_t count, bool in_place) {
  return std::string(path) + " " + dtype_name(t) + " " + reduce_op_name(op) + " x" +
         std::to_string(count) + (in_place ? " in place" : " out of place") + " on rank " +
         std::to_string(g_rank);
}

void check_allreduce(Group* group, const char* path, DataType t, ReduceOp op, int64_t count,
                     bool in_place, kernels::Scale scale = {}) {
  std::vector<unsigned char> send = filled(t, g_rank, count);
  std::vector<unsigned char> out(send.size(), 0xAB);
  void* recv = in_place ? send.data() : out.data();
  Status s = group->backend().allreduce(send.data(), recv, count, t, op, scale);
  ASSERT_TRUE(s.ok()) << describe(path, t, op, count, in_place) << ": " << s.to_string();
  const std::vector<unsigned char> want = expected(t, op, scale, count, 0, count);
  EXPECT_EQ(0, std::memcmp(recv, want.data(), count * dtype_size(t)))
      << describe(path, t, op, count, in_place);
}

// Sizes per rank count: one element; an odd count under the MPI path's gather-all bound;
// one that runs the MPI path's chunks and several shared-memory chunks, with a remainder.
std::vector<int64_t> counts_for(DataType t) {
  const int64_t bytes = 3 * (256 << 10) + 5 * 1024;
  return {1, 7, 1001, bytes / static_cast<int64_t>(dtype_size(t)) * g_size / 2 + 3};
}

class BothPaths : public ::testing::TestWithParam<const char*> {
 protected:
  Group* group() const { return std::string(GetParam()) == "shared" ? g_shared : g_messages; }
};

TEST_P(BothPaths, AllreduceEveryDtypeOpAndSize) {
  for (DataType t : all_dtypes()) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      for (int64_t count : counts_for(t)) {
        for (bool in_place : {true, false})
          check_allreduce(group(), GetParam(), t, op, count, in_place);
      }
    }
  }
}

TEST_P(BothPaths, AllreduceAverageWithPostscale) {
  const kernels::Scale scale{g_size, 0.5};
  for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt32}) {
    for (int64_t count : counts_for(t))
      check_allreduce(group(), GetParam(), t, ReduceOp::kSum, count, false, scale);
  }
}

TEST_P(BothPaths, ReducescatterUnevenBlocksInPlace) {
  for (DataType t : all_dtypes()) {
    // Rank q's block grows with q; the last rank's is empty.
    std::vector<int64_t> blocks;
    int64_t total = 0, first = 0;
    for (int q = 0; q < g_size; ++q) {
      blocks.push_back(q + 1 == g_size && g_size > 1 ? 0 : 40000 * (q + 1) + 3);
      if (q < g_rank) first += blocks.back();
      total += blocks.back();
    }
    std::vector<unsigned char> send = filled(t, g_rank, total);
    void* recv = send.data() + first * dtype_size(t);
    Status s = group()->backend().reducescatter(send.data(), recv, blocks, t, ReduceOp::kSum, {});
    ASSERT_TRUE(s.ok()) << s.to_string();
    const std::vector<unsigned char> want =
        expected(t, ReduceOp::kSum, {}, total, first, blocks[g_rank]);
    EXPECT_EQ(0, std::memcmp(recv, want.data(), blocks[g_rank] * dtype_size(t)))
        << GetParam() << " reducescatter " << dtype_name(t) << " on rank " << g_rank;
  }
}

INSTANTIATE_TEST_SUITE_P(Backend, BothPaths, ::testing::Values("shared", "messages"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace chorus

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 2;
  {
    chorus::StatusOr<std::unique_ptr<chorus::World>> world = chorus::init_mpi_world();
    if (!world.ok()) {
      std::fprintf(stderr, "init_mpi_world: %s\n", world.status().to_string().c_str());
      return rc;
    }
    chorus::g_rank = (*world)->rank();
    chorus::g_size = (*world)->size();
    std::vector<int> all(chorus::g_size);
    for (int r = 0; r < chorus::g_size; ++r) all[r] = r;
    auto shared = (*world)->create_group(all);
    auto messages = (*world)->create_group(all);
    if (!shared.ok() || !messages.ok()) return rc;
    std::string why;
    // Every rank of an mpirun test runs on this host: the segment must map.
    chorus::Status s = (*shared)->join_host(&why);
    if (!s.ok() || !why.empty()) {
      std::fprintf(stderr, "rank %d: no shared memory for the backend: %s %s\n", chorus::g_rank,
                   s.to_string().c_str(), why.c_str());
      return rc;
    }
    chorus::g_shared = shared->get();
    chorus::g_messages = messages->get();
    if (chorus::g_rank != 0) ::testing::GTEST_FLAG(brief) = true;
    rc = RUN_ALL_TESTS();
    shared->reset();
    messages->reset();
    (void)(*world)->finalize();
  }
  MPI_Finalize();
  return rc;
}
