// Whole runtimes, several in one process: each rank is a thread with its own Runtime (its
// background thread, negotiation, executor) over an in-memory world (in_memory_world.h),
// and calls the public API as a trainer does. Real data crosses the ranks, so every result
// is checked element by element; every layout runs on one host (the host's board, trainer
// threads running cycles) and on several. A rendezvous that waits too long fails the job on
// every rank, so no test hangs.

#include "core/runtime.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "in_memory_world.h"
#include "runtime_job.h"

namespace chorus::testing {
namespace {

struct Layout {
  const char* name;
  std::vector<std::string> hosts;  // rank r runs on hosts[r]
};

const Layout kOneRank = {"np1", {"a"}};
const std::vector<Layout> kOneHost = {{"np2_one_host", {"a", "a"}},
                                      {"np3_one_host", {"a", "a", "a"}}};
const std::vector<Layout> kSeveralHosts = {{"np3_three_hosts", {"a", "b", "c"}},
                                           {"np5_two_hosts", {"a", "a", "a", "b", "b"}}};

std::vector<Layout> join(std::vector<Layout> a, const std::vector<Layout>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) { return info.param.name; }

// Sums (the API's default op averages, as Horovod's does).
AllreduceOptions summing(ProcessSet set = {}) {
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  o.process_set = set;
  return o;
}

// Every layout.
class RuntimeTest : public ::testing::TestWithParam<Layout> {
 protected:
  int n() const { return static_cast<int>(GetParam().hosts.size()); }
  InMemoryJob job_{GetParam().hosts};
};
// Layouts of two ranks or more.
class MultiRankTest : public RuntimeTest {};
// Layouts of two ranks or more, all on one host.
class OneHostTest : public RuntimeTest {};

// Tensors of odd sizes, submitted together (so that they fuse) and one by one, summed and
// averaged: integer-valued floats, so that every sum is exact.
TEST_P(RuntimeTest, AllreduceSumsEveryRanksData) {
  const int n = this->n();
  run_job(job_, [&](int rank) {
    const std::vector<int64_t> sizes = {1, 3, 17, 1000, 4099};
    std::vector<std::vector<float>> data;
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      data.emplace_back(sizes[t]);
      for (int64_t i = 0; i < sizes[t]; ++i) data[t][i] = float(rank * 1000 + i % 1000);
    }
    const AllreduceOptions sum = summing();
    std::vector<Handle> handles;
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      TensorRef ref = tensor(data[t], DataType::kFloat32);
      handles.push_back(allreduce("grad." + std::to_string(t), ref, ref, sum));
    }
    std::vector<int64_t> counts(7, rank + 1);
    TensorRef cref = tensor(counts, DataType::kInt64);
    handles.push_back(allreduce("count", cref, cref));  // the default op averages
    // Every handle waited for before any check can return: the buffers outlive the work.
    for (const Handle& h : handles) {
      EXPECT_TRUE(h.wait().ok()) << "rank " << rank << ": " << h.status().to_string();
    }
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      for (int64_t i = 0; i < sizes[t]; ++i) {
        const float want = float(1000 * n * (n - 1) / 2 + n * (i % 1000));
        ASSERT_EQ(data[t][i], want) << "rank " << rank << " tensor " << t << " element " << i;
      }
    }
    for (int64_t c : counts) EXPECT_EQ(c, (n * (n + 1) / 2) / n) << "rank " << rank;
  });
}

// Allgather of a different row count per rank, broadcast from the last rank, alltoall with
// uneven splits, reducescatter of rows that do not divide evenly.
TEST_P(RuntimeTest, DataMovementGivesEveryRankItsBlocks) {
  const int n = this->n();
  run_job(job_, [&](int rank) {
    // allgather: rank r gives r + 1 rows of 2, each element 100 r + row.
    std::vector<int32_t> mine(2 * (rank + 1));
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = 100 * rank + int32_t(i / 2);
    Handle gathered = allgather("gather", tensor(mine, DataType::kInt32, {rank + 1, 2}));
    // broadcast: the last rank's values reach everyone.
    std::vector<double> b(5, rank == n - 1 ? 7.5 : -1.0);
    Handle broadcasted = broadcast("bcast", tensor(b, DataType::kFloat64), n - 1);
    // alltoall: to rank d, d + 1 rows of one element, 10 rank + d.
    std::vector<int64_t> splits;
    std::vector<int16_t> out;
    for (int d = 0; d < n; ++d) {
      splits.push_back(d + 1);
      out.insert(out.end(), d + 1, int16_t(10 * rank + d));
    }
    Handle exchanged = alltoall("a2a", tensor(out, DataType::kInt16), splits);
    // reducescatter: 2n + 1 rows of 3, row i holding i + rank.
    const int64_t rows = 2 * n + 1;
    std::vector<float> rs(rows * 3);
    for (int64_t i = 0; i < rows * 3; ++i) rs[i] = float(i / 3 + rank);
    ReducescatterOptions sum;
    sum.op = ReduceOp::kSum;
    Handle scattered = reducescatter("rs", tensor(rs, DataType::kFloat32, {rows, 3}), sum);
    // Every handle waited for before any check can return: the buffers outlive the work.
    for (const Handle* h : {&gathered, &broadcasted, &exchanged, &scattered}) h->wait();

    ASSERT_TRUE(gathered.wait().ok()) << gathered.status().to_string();
    const TensorRef& g = gathered.output();
    ASSERT_EQ(g.shape, (std::vector<int64_t>{n * (n + 1) / 2, 2}));
    const auto* gv = static_cast<const int32_t*>(g.data);
    int64_t at = 0;
    for (int r = 0; r < n; ++r) {
      for (int row = 0; row <= r; ++row, ++at) {
        EXPECT_EQ(gv[2 * at], 100 * r + row) << "rank " << rank << " row " << at;
        EXPECT_EQ(gv[2 * at + 1], 100 * r + row) << "rank " << rank << " row " << at;
      }
    }
    ASSERT_TRUE(broadcasted.wait().ok()) << broadcasted.status().to_string();
    for (double v : b) EXPECT_EQ(v, 7.5) << "rank " << rank;
    ASSERT_TRUE(exchanged.wait().ok()) << exchanged.status().to_string();
    ASSERT_EQ(exchanged.received_splits(), std::vector<int64_t>(n, rank + 1));
    const auto* ev = static_cast<const int16_t*>(exchanged.output().data);
    for (int s = 0; s < n; ++s) {
      for (int k = 0; k <= rank; ++k) EXPECT_EQ(ev[s * (rank + 1) + k], 10 * s + rank);
    }
    ASSERT_TRUE(scattered.wait().ok()) << scattered.status().to_string();
    // Rank r's block: 2 rows, and one more on rank 0 (2n + 1 rows over n ranks).
    const int64_t first = 2 * rank + (rank > 0 ? 1 : 0);
    const int64_t count = 2 + (rank == 0 ? 1 : 0);
    ASSERT_EQ(scattered.output().shape, (std::vector<int64_t>{count, 3}));
    const auto* sv = static_cast<const float*>(scattered.output().data);
    for (int64_t i = 0; i < count * 3; ++i) {
      EXPECT_EQ(sv[i], float(n * (first + i / 3) + n * (n - 1) / 2)) << "rank " << rank;
    }
  });
}

// One rank's tensor has another shape: every rank's handle fails, naming the collective and
// the ranks' shapes, and the job goes on.
TEST_P(RuntimeTest, ShapeMismatchFailsOnEveryRankAndTheJobGoesOn) {
  const int n = this->n();
  run_job(job_, [&](int rank) {
    std::vector<float> v(rank == n - 1 ? 5 : 4, 1.0f);
    TensorRef ref = tensor(v, DataType::kFloat32);
    Status s = allreduce("odd.one", ref, ref).wait();
    if (n == 1) {
      EXPECT_TRUE(s.ok()) << s.to_string();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kMismatch) << "rank " << rank << ": " << s.to_string();
      EXPECT_NE(s.message().find("odd.one"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("[5]"), std::string::npos) << s.message();
    }
    std::vector<float> w(3, float(rank));
    TensorRef wref = tensor(w, DataType::kFloat32);
    ASSERT_TRUE(allreduce("after", wref, wref, summing()).wait().ok());
    EXPECT_EQ(w[0], float(n * (n - 1) / 2));
  });
}

// A set of the first and last ranks: created on every rank, used by its members only (the
// others are refused at once), removed on every rank.
TEST_P(RuntimeTest, ProcessSetRunsItsMembersOnly) {
  const int n = this->n();
  run_job(job_, [&](int rank) {
    const std::vector<int> members = n == 1 ? std::vector<int>{0} : std::vector<int>{0, n - 1};
    StatusOr<ProcessSet> set = add_process_set(members);
    ASSERT_TRUE(set.ok()) << set.status().to_string();
    const bool member = rank == 0 || rank == n - 1;
    EXPECT_EQ(process_set_size(*set), static_cast<int>(members.size()));
    EXPECT_EQ(process_set_rank(*set), member ? (rank == 0 ? 0 : 1) : -1);
    std::vector<int32_t> v(9, rank + 1);
    TensorRef ref = tensor(v, DataType::kInt32);
    Handle h = allreduce("in.set", ref, ref, summing(*set));
    if (member) {
      ASSERT_TRUE(h.wait().ok()) << h.status().to_string();
      for (int32_t x : v) EXPECT_EQ(x, n == 1 ? 1 : 1 + n);
    } else {
      EXPECT_TRUE(h.refused());
      EXPECT_NE(h.status().message().find("not a member"), std::string::npos)
          << h.status().to_string();
    }
    ASSERT_TRUE(remove_process_set(*set).ok());
    EXPECT_EQ(process_set_size(*set), -1);
  });
}

// A setting that every rank must share (the fusion threshold) differs on the last rank: start
// fails on every rank, naming the variable, instead of some ranks waiting for the others.
TEST_P(MultiRankTest, DisagreeingSettingFailsStartOnEveryRank) {
  const int n = this->n();
  std::mutex mu;
  std::vector<Status> starts(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Options o;
      o.fusion_threshold_bytes = r == n - 1 ? 1 << 20 : 1 << 21;
      StatusOr<std::shared_ptr<Runtime>> rt = Runtime::start(o, job_.world(r));
      std::lock_guard<std::mutex> lock(mu);
      starts[r] = rt.status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(starts[r].ok()) << "rank " << r;
    EXPECT_NE(starts[r].message().find("CHORUS_FUSION_THRESHOLD"), std::string::npos)
        << "rank " << r << ": " << starts[r].to_string();
  }
}

// Rank 0 shuts down while the others wait on a collective: theirs fail with kAborted, saying
// that another rank shut down, instead of waiting for rank 0 for ever.
TEST_P(MultiRankTest, ShutdownOnOneRankStopsEveryRank) {
  run_job(job_, [&](int rank) {
    if (rank == 0) return;  // run_job shuts it down at once
    std::vector<float> v(4, 1.0f);
    TensorRef ref = tensor(v, DataType::kFloat32);
    Status s = allreduce("never.matched", ref, ref).wait();
    EXPECT_EQ(s.code(), StatusCode::kAborted) << "rank " << rank << ": " << s.to_string();
    EXPECT_NE(s.message().find("shutdown"), std::string::npos) << s.to_string();
  });
}

// On one host, a trainer that waits for each collective right after submitting it runs the
// cycles itself (core/cycle_driver.h), and the results stay right.
TEST_P(OneHostTest, WaitingTrainerRunsCycles) {
  const int n = this->n();
  std::vector<std::shared_ptr<Runtime>> runtimes = run_job(job_, [&](int rank) {
    std::vector<float> v(16);
    TensorRef ref = tensor(v, DataType::kFloat32);
    for (int step = 0; step < 200; ++step) {
      std::fill(v.begin(), v.end(), float(rank + step));
      ASSERT_TRUE(allreduce("step", ref, ref, summing()).wait().ok()) << "step " << step;
      ASSERT_EQ(v[15], float(n * step + n * (n - 1) / 2)) << "step " << step;
    }
  });
  uint64_t by_trainers = 0;
  for (const auto& rt : runtimes) by_trainers += rt ? rt->trainer_cycles() : 0;
  EXPECT_GT(by_trainers, 0u) << "no cycle of 200 synchronous allreduces ran on a trainer thread";
}

INSTANTIATE_TEST_SUITE_P(Layouts, RuntimeTest,
                         ::testing::ValuesIn(join({kOneRank}, join(kOneHost, kSeveralHosts))),
                         layout_name);
INSTANTIATE_TEST_SUITE_P(Layouts, MultiRankTest, ::testing::ValuesIn(join(kOneHost, kSeveralHosts)),
                         layout_name);
INSTANTIATE_TEST_SUITE_P(Layouts, OneHostTest, ::testing::ValuesIn(kOneHost), layout_name);

}  // namespace
}  // namespace chorus::testing
