// The host-memory reductions of both providers, with no runtime around them: the MPI
// backend's point-to-point messages (a set across hosts) and the shared-memory backend (a
// set on one host, collectives/shm/shm_backend.h). For every
// dtype and op, sizes from one element to several chunks long, in place and out of place,
// every rank's result must have the bits of the same reduction computed here from every
// rank's input: in rank order for shared memory, and by the combination tree
// (kernels/reduce_tree.h, itself checked against its definition in
// tests/unit/reduce_tree_test.cc) for messages, with each algorithm forced and chosen per
// call. tests/cluster/netns_algorithms.sh runs the EveryAlgorithm cases across hosts.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collectives/cost_model.h"
#include "collectives/mpi/mpi_backend.h"
#include "collectives/mpi/mpi_world.h"
#include "kernels/reduce_kernels.h"
#include "kernels/reduce_tree.h"
#include "test_data.h"

namespace chorus {
namespace {

using testing::all_dtypes;

int g_rank = 0;
int g_size = 1;
Backend* g_shared = nullptr;      // reduces through shared memory
Group* g_messages = nullptr;      // reduces by messages
MPI_Comm g_comm = MPI_COMM_NULL;  // for backends made by the tests

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

using Combine = void (*)(void*, const void* const*, int, int64_t, DataType, ReduceOp,
                         kernels::Scale);

// Every rank's inputs combined here (by `combine`), elements [first, first + count).
std::vector<unsigned char> expected(Combine combine, DataType t, ReduceOp op, kernels::Scale scale,
                                    int64_t total, int64_t first, int64_t count) {
  std::vector<std::vector<unsigned char>> inputs;
  std::vector<const void*> sources;
  for (int r = 0; r < g_size; ++r) inputs.push_back(filled(t, r, total));
  for (int r = 0; r < g_size; ++r) sources.push_back(inputs[r].data() + first * dtype_size(t));
  std::vector<unsigned char> out(static_cast<std::size_t>(count) * dtype_size(t) + 1);
  combine(out.data(), sources.data(), g_size, count, t, op, scale);
  return out;
}

std::string describe(const char* path, DataType t, ReduceOp op, int64_t count, bool in_place) {
  return std::string(path) + " " + dtype_name(t) + " " + reduce_op_name(op) + " x" +
         std::to_string(count) + (in_place ? " in place" : " out of place") + " on rank " +
         std::to_string(g_rank);
}

void check_allreduce(Backend& backend, Combine combine, const char* path, DataType t, ReduceOp op,
                     int64_t count, bool in_place, kernels::Scale scale = {}) {
  std::vector<unsigned char> send = filled(t, g_rank, count);
  std::vector<unsigned char> out(send.size(), 0xAB);
  void* recv = in_place ? send.data() : out.data();
  Status s = backend.allreduce(send.data(), recv, count, t, op, scale);
  ASSERT_TRUE(s.ok()) << describe(path, t, op, count, in_place) << ": " << s.to_string();
  const std::vector<unsigned char> want = expected(combine, t, op, scale, count, 0, count);
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
  bool shared() const { return std::string(GetParam()) == "shared"; }
  Backend& backend() const { return shared() ? *g_shared : g_messages->backend(); }
  Combine combine() const { return shared() ? &kernels::reduce_ordered : &kernels::reduce_tree; }
};

TEST_P(BothPaths, AllreduceEveryDtypeOpAndSize) {
  for (DataType t : all_dtypes()) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      for (int64_t count : counts_for(t)) {
        for (bool in_place : {true, false})
          check_allreduce(backend(), combine(), GetParam(), t, op, count, in_place);
      }
    }
  }
}

TEST_P(BothPaths, AllreduceAverageWithPostscale) {
  const kernels::Scale scale{g_size, 0.5};
  for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt32}) {
    for (int64_t count : counts_for(t))
      check_allreduce(backend(), combine(), GetParam(), t, ReduceOp::kSum, count, false, scale);
  }
}

void check_reducescatter(Backend& backend, Combine combine, const char* path) {
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
    Status s = backend.reducescatter(send.data(), recv, blocks, t, ReduceOp::kSum, {});
    ASSERT_TRUE(s.ok()) << s.to_string();
    const std::vector<unsigned char> want =
        expected(combine, t, ReduceOp::kSum, {}, total, first, blocks[g_rank]);
    EXPECT_EQ(0, std::memcmp(recv, want.data(), blocks[g_rank] * dtype_size(t)))
        << path << " reducescatter " << dtype_name(t) << " on rank " << g_rank;
  }
}

TEST_P(BothPaths, ReducescatterUnevenBlocksInPlace) {
  check_reducescatter(backend(), combine(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Backend, BothPaths, ::testing::Values("shared", "messages"),
                         [](const auto& info) { return std::string(info.param); });

// The messages path with one algorithm forced (or auto), on a backend of its own.
class EveryAlgorithm : public ::testing::TestWithParam<HostAlgorithm> {
 protected:
  EveryAlgorithm() : backend_(g_comm, GetParam(), /*liveness_seconds=*/60) {}
  const char* name() const { return kHostAlgorithmWords.name(GetParam()); }
  MpiBackend backend_;
};

// The dtypes whose bits show the order of combination, on every size; the rest of the
// matrix is AllreduceEveryDtypeAndOp.
TEST_P(EveryAlgorithm, AllreduceBitsOfTheTree) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                     DataType::kFloat64, DataType::kInt32}) {
    for (int64_t count : counts_for(t)) {
      for (bool in_place : {true, false})
        check_allreduce(backend_, &kernels::reduce_tree, name(), t, ReduceOp::kSum, count,
                        in_place);
    }
    check_allreduce(backend_, &kernels::reduce_tree, name(), t, ReduceOp::kSum, 1001, false,
                    kernels::Scale{g_size, 0.5});
  }
}

TEST_P(EveryAlgorithm, AllreduceEveryDtypeAndOp) {
  for (DataType t : all_dtypes()) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      for (int64_t count : {int64_t{3}, int64_t{70001}})
        check_allreduce(backend_, &kernels::reduce_tree, name(), t, op, count, true);
    }
  }
}

TEST_P(EveryAlgorithm, ReducescatterUnevenBlocks) {
  check_reducescatter(backend_, &kernels::reduce_tree, name());
}

// Floats over many magnitudes: their sums depend on the order of combination.
std::vector<float> spread(int rank, int64_t count) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const double mantissa = static_cast<double>((i * 7919 + rank * 104729) % 2001 - 1000) / 1000;
    v[i] = static_cast<float>(std::ldexp(mantissa, static_cast<int>((i + 3 * rank) % 25) - 12));
  }
  return v;
}

// Fusion cannot change a result: a small and a large tensor reduced together give the bits
// each gives alone (though auto picks a different algorithm for each size), on every rank.
TEST_P(EveryAlgorithm, FusedAndAloneGiveTheSameBits) {
  const int64_t small = 7, large = 300001;
  std::vector<float> fused = spread(g_rank, small + large);
  std::vector<float> a(fused.begin(), fused.begin() + small);
  std::vector<float> b(fused.begin() + small, fused.end());
  const DataType t = DataType::kFloat32;
  ASSERT_TRUE(
      backend_.allreduce(fused.data(), fused.data(), small + large, t, ReduceOp::kSum, {}).ok());
  ASSERT_TRUE(backend_.allreduce(a.data(), a.data(), small, t, ReduceOp::kSum, {}).ok());
  ASSERT_TRUE(backend_.allreduce(b.data(), b.data(), large, t, ReduceOp::kSum, {}).ok());
  EXPECT_EQ(0, std::memcmp(fused.data(), a.data(), small * 4)) << name() << " on rank " << g_rank;
  EXPECT_EQ(0, std::memcmp(fused.data() + small, b.data(), large * 4))
      << name() << " on rank " << g_rank;
  // The same bits on every rank: rank 0's result, broadcast, must equal this rank's.
  std::vector<float> root = fused;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, g_comm);
  EXPECT_EQ(0, std::memcmp(root.data(), fused.data(), fused.size() * 4))
      << name() << ": rank " << g_rank << " differs from rank 0";
  // And these inputs do tell orders apart: from four ranks on, the tree is not rank order.
  if (g_size >= 4) {
    std::vector<std::vector<float>> all;
    std::vector<const void*> sources;
    for (int r = 0; r < g_size; ++r) all.push_back(spread(r, small + large));
    for (const auto& row : all) sources.push_back(row.data());
    std::vector<float> linear(small + large);
    kernels::reduce_ordered(linear.data(), sources.data(), g_size, small + large, t, ReduceOp::kSum,
                            {});
    EXPECT_NE(0, std::memcmp(linear.data(), fused.data(), fused.size() * 4));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Backend, EveryAlgorithm,
    ::testing::Values(HostAlgorithm::kAuto, HostAlgorithm::kGatherAll, HostAlgorithm::kDirect,
                      HostAlgorithm::kRecursiveDoubling, HostAlgorithm::kHalvingDoubling),
    [](const auto& info) { return std::string(kHostAlgorithmWords.name(info.param)); });

}  // namespace
}  // namespace chorus

// --across-hosts: the ranks run on different hosts (tests/cluster/netns_algorithms.sh), so
// no shared-memory group is made, and only the messages cases may run.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const bool across_hosts = argc > 1 && std::string(argv[1]) == "--across-hosts";
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
    // Otherwise every rank runs on this host: the segment must map.
    chorus::StatusOr<std::unique_ptr<chorus::Backend>> shm =
        across_hosts ? std::unique_ptr<chorus::Backend>() : (*shared)->shared_memory(&why);
    if (!shm.ok() || (!across_hosts && !*shm)) {
      std::fprintf(stderr, "rank %d: no shared memory for the backend: %s %s\n", chorus::g_rank,
                   shm.status().to_string().c_str(), why.c_str());
      return rc;
    }
    chorus::g_shared = shm->get();
    chorus::g_messages = messages->get();
    MPI_Comm_dup(MPI_COMM_WORLD, &chorus::g_comm);
    MPI_Comm_set_errhandler(chorus::g_comm, MPI_ERRORS_RETURN);
    if (chorus::g_rank != 0) ::testing::GTEST_FLAG(brief) = true;
    rc = RUN_ALL_TESTS();
    shm->reset();
    shared->reset();
    messages->reset();
    MPI_Comm_free(&chorus::g_comm);
    (void)(*world)->finalize();
  }
  MPI_Finalize();
  return rc;
}
