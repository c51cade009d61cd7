// The hierarchical allreduce over an in-process fake of its transports: ranks are threads,
// each host's ranks meet in a "local" backend, each local index in a "cross" backend
// (common/meeting_backend.h).
// Checks how the buffer is split, the order of the three steps on every rank, and the
// results (bit for bit against the node-then-cross reference), without MPI, NCCL or a GPU.

#include "collectives/hierarchical_allreduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/meeting_backend.h"

namespace chorus {
namespace {

using testing::Meeting;
using testing::MeetingBackend;

// `hosts` x `per_host` ranks as threads; `body(rank, backend, log)` runs on each.
void run_world(
    int hosts, int per_host,
    const std::function<void(int, HierarchicalBackend&, std::vector<std::string>&)>& body) {
  const int n = hosts * per_host;
  Meeting flat(n);
  std::vector<std::unique_ptr<Meeting>> local, cross;
  for (int h = 0; h < hosts; ++h) local.push_back(std::make_unique<Meeting>(per_host));
  for (int k = 0; k < per_host; ++k) cross.push_back(std::make_unique<Meeting>(hosts));
  std::vector<std::thread> threads;
  for (int g = 0; g < n; ++g) {
    threads.emplace_back([&, g] {
      const int h = g / per_host, k = g % per_host;
      std::vector<std::string> log;
      MeetingBackend f(&flat, g, "flat", &log);
      MeetingBackend l(local[h].get(), k, "local", &log);
      MeetingBackend c(cross[k].get(), h, "cross", &log);
      StatusOr<std::unique_ptr<HierarchicalBackend>> hb =
          HierarchicalBackend::create(&f, &l, &c, /*host_memory=*/true);
      ASSERT_TRUE(hb.ok()) << hb.status().to_string();
      body(g, **hb, log);
    });
  }
  for (std::thread& t : threads) t.join();
}

// Rank g's input: not integers, so that the order of the additions shows in the bits.
std::vector<float> input_of(int g, int64_t count) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = 0.1f * static_cast<float>(g + 1) + 1e-3f * (i % 97);
  return v;
}

// Each node's sum in local rank order, then the nodes' sums in host order, scaled once.
std::vector<float> node_then_cross(int hosts, int per_host, int64_t count, kernels::Scale scale) {
  std::vector<std::vector<float>> inputs, nodes(hosts, std::vector<float>(count));
  for (int g = 0; g < hosts * per_host; ++g) inputs.push_back(input_of(g, count));
  std::vector<const void*> node_ptrs;
  for (int h = 0; h < hosts; ++h) {
    std::vector<const void*> srcs;
    for (int k = 0; k < per_host; ++k) srcs.push_back(inputs[h * per_host + k].data());
    kernels::reduce_ordered(nodes[h].data(), srcs.data(), per_host, count, DataType::kFloat32,
                            ReduceOp::kSum, {});
    node_ptrs.push_back(nodes[h].data());
  }
  std::vector<float> out(count);
  kernels::reduce_ordered(out.data(), node_ptrs.data(), hosts, count, DataType::kFloat32,
                          ReduceOp::kSum, scale);
  return out;
}

TEST(HierarchicalBlocks, SplitsEvenlyOnAlignedBoundaries) {
  for (int64_t count : {0, 1, 5, 63, 64, 65, 1000, 100003}) {
    for (int parts : {1, 2, 3, 4, 8}) {
      for (int64_t align : {1, 16, 64}) {
        std::vector<int64_t> b = hierarchical_blocks(count, parts, align);
        ASSERT_EQ(static_cast<int>(b.size()), parts);
        EXPECT_EQ(std::accumulate(b.begin(), b.end(), int64_t{0}), count);
        int64_t offset = 0;
        for (int i = 0; i < parts; ++i) {
          // Empty trailing blocks sit at the end of the buffer; the others start aligned.
          if (b[i] > 0) {
            EXPECT_EQ(offset % align, 0) << count << " " << parts << " " << align;
          }
          if (i > 0) {
            EXPECT_LE(b[i], b[i - 1]);
          }
          EXPECT_LT(b[0] - b[i], 2 * align);
          offset += b[i];
        }
      }
    }
  }
  EXPECT_EQ(hierarchical_blocks(10, 3, 1), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(hierarchical_blocks(100, 3, 16), (std::vector<int64_t>{48, 32, 20}));
  EXPECT_EQ(hierarchical_blocks(1, 3, 64), (std::vector<int64_t>{1, 0, 0}));
}

// A reduce-scatter of host memory gives every element the bits of the hierarchical
// allreduce (node first, then across nodes), whatever the blocks: a sharded optimizer's
// reduce-scatter must agree with the allreduce of DistributedOptimizer.
TEST(HierarchicalReducescatter, KeepsTheAllreducesBits) {
  for (auto [hosts, per_host] : {std::pair{2, 2}, std::pair{3, 2}, std::pair{2, 3}}) {
    const int n = hosts * per_host;
    const int64_t count = 1001;  // blocks that neither the hosts nor the ranks divide
    const kernels::Scale scale{1, 0.5};
    const std::vector<float> want = node_then_cross(hosts, per_host, count, scale);
    std::vector<int64_t> counts(n, count / n);
    counts[0] += count % n;
    run_world(hosts, per_host, [&](int g, HierarchicalBackend& hb, std::vector<std::string>&) {
      EXPECT_TRUE(hb.serves(Collective::kReducescatter, DataType::kFloat32));
      std::vector<float> in = input_of(g, count), out(counts[g]);
      ASSERT_TRUE(
          hb.reducescatter(in.data(), out.data(), counts, DataType::kFloat32, ReduceOp::kSum, scale)
              .ok());
      const int64_t at = std::accumulate(counts.begin(), counts.begin() + g, int64_t{0});
      EXPECT_EQ(0, std::memcmp(out.data(), want.data() + at, out.size() * sizeof(float)))
          << hosts << "x" << per_host << " rank " << g;
    });
  }
}

TEST(HierarchicalAllreduce, RefusesANonUniformLayout) {
  std::vector<std::string> log;
  Meeting a(6), b(4), c(2);
  MeetingBackend flat(&a, 0, "flat", &log), local(&b, 0, "local", &log),
      cross(&c, 0, "cross", &log);
  StatusOr<std::unique_ptr<HierarchicalBackend>> hb =
      HierarchicalBackend::create(&flat, &local, &cross);
  ASSERT_FALSE(hb.ok());
  EXPECT_NE(hb.status().message().find("4 local ranks x 2 hosts != 6 ranks"), std::string::npos)
      << hb.status().message();
}

struct Layout {
  int hosts;
  int per_host;
};

class HierarchicalWorld : public ::testing::TestWithParam<Layout> {};

TEST_P(HierarchicalWorld, StepsInOrderWithTheSplitAndNodeThenCrossBits) {
  const Layout L = GetParam();
  const int n = L.hosts * L.per_host;
  for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{65 * 64 + 3}}) {
    const kernels::Scale scale{n, 0.5};  // average, then postscale 0.5
    const std::vector<float> want = node_then_cross(L.hosts, L.per_host, count, scale);
    const std::vector<int64_t> blocks = hierarchical_blocks(count, L.per_host, 64);
    run_world(L.hosts, L.per_host,
              [&](int g, HierarchicalBackend& hb, std::vector<std::string>& log) {
                const int k = g % L.per_host;
                std::vector<float> data = input_of(g, count);
                ASSERT_TRUE(hb.allreduce(data.data(), data.data(), count, DataType::kFloat32,
                                         ReduceOp::kSum, scale)
                                .ok());
                ASSERT_EQ(0, std::memcmp(data.data(), want.data(), count * sizeof(float)))
                    << "rank " << g << " count " << count;
                std::string rs = "local.reducescatter(", ag = "local.allgatherv(";
                for (int64_t b : blocks) {
                  rs += std::to_string(b) + ",";
                  ag += std::to_string(b * 4) + ",";
                }
                std::vector<std::string> expected{rs + ")"};
                // A rank whose shard is empty skips the cross step, as do its cross partners.
                if (blocks[k] > 0)
                  expected.push_back("cross.allreduce(" + std::to_string(blocks[k]) + ")");
                expected.push_back(ag + ")");
                EXPECT_EQ(log, expected) << "rank " << g << " count " << count;
              });
  }
}

TEST_P(HierarchicalWorld, OutOfPlaceAndServesAllreduceAlone) {
  const Layout L = GetParam();
  const int64_t count = 333;
  const std::vector<float> want = node_then_cross(L.hosts, L.per_host, count, {});
  run_world(
      L.hosts, L.per_host, [&](int g, HierarchicalBackend& hb, std::vector<std::string>& log) {
        const std::vector<float> in = input_of(g, count);
        std::vector<float> out(count, -1.0f);
        ASSERT_TRUE(
            hb.allreduce(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum, {})
                .ok());
        EXPECT_EQ(0, std::memcmp(out.data(), want.data(), count * sizeof(float)));
        EXPECT_EQ(in, input_of(g, count)) << "the input must not change";
        // The set's BackendChoice gives every other collective to the flat backend (on
        // host memory, the reduce-scatter stays: it must keep the allreduce's bits).
        for (int c = 0; c < kNumCollectives; ++c) {
          const auto collective = static_cast<Collective>(c);
          EXPECT_EQ(
              hb.serves(collective, DataType::kFloat32),
              collective == Collective::kAllreduce || collective == Collective::kReducescatter)
              << collective_name(collective);
        }
        log.clear();
        int value = 0;
        EXPECT_EQ(hb.broadcast(&value, sizeof value, 0).code(), StatusCode::kInternal);
        EXPECT_TRUE(log.empty()) << "a collective it does not serve reached a transport";
      });
}

TEST_P(HierarchicalWorld, FusedAndAloneGiveTheSameBits) {
  const Layout L = GetParam();
  const int64_t a = 517, b = 1031;
  run_world(L.hosts, L.per_host, [&](int g, HierarchicalBackend& hb, std::vector<std::string>&) {
    std::vector<float> fused = input_of(g, a + b);
    std::vector<float> first(fused.begin(), fused.begin() + a);
    std::vector<float> second(fused.begin() + a, fused.end());
    const kernels::Scale scale{L.hosts * L.per_host, 1.0};
    ASSERT_TRUE(
        hb.allreduce(fused.data(), fused.data(), a + b, DataType::kFloat32, ReduceOp::kSum, scale)
            .ok());
    ASSERT_TRUE(
        hb.allreduce(first.data(), first.data(), a, DataType::kFloat32, ReduceOp::kSum, scale)
            .ok());
    ASSERT_TRUE(
        hb.allreduce(second.data(), second.data(), b, DataType::kFloat32, ReduceOp::kSum, scale)
            .ok());
    EXPECT_EQ(0, std::memcmp(fused.data(), first.data(), a * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(fused.data() + a, second.data(), b * sizeof(float)));
  });
}

TEST_P(HierarchicalWorld, IntegerScaleTruncatesOnceAtTheEnd) {
  const Layout L = GetParam();
  const int n = L.hosts * L.per_host;
  const int64_t count = 129;
  run_world(L.hosts, L.per_host, [&](int g, HierarchicalBackend& hb, std::vector<std::string>&) {
    std::vector<int32_t> data(count);
    for (int64_t i = 0; i < count; ++i) data[i] = static_cast<int32_t>((g + 1) * (i - 60));
    ASSERT_TRUE(
        hb.allreduce(data.data(), data.data(), count, DataType::kInt32, ReduceOp::kSum, {n, 3.0})
            .ok());
    for (int64_t i = 0; i < count; ++i) {
      const int64_t sum = static_cast<int64_t>(n) * (n + 1) / 2 * (i - 60);
      // The sum times (3 / n) in float64, truncated toward zero.
      const double scaled = std::trunc(static_cast<double>(sum) * (3.0 / n));
      ASSERT_EQ(data[i], static_cast<int32_t>(scaled)) << "element " << i;
    }
  });
}

TEST_P(HierarchicalWorld, MaxOfFloat64) {
  const Layout L = GetParam();
  const int64_t count = 77;
  run_world(L.hosts, L.per_host, [&](int g, HierarchicalBackend& hb, std::vector<std::string>&) {
    std::vector<double> data(count);
    for (int64_t i = 0; i < count; ++i) data[i] = (g * 31 + i * 7) % 13;
    ASSERT_TRUE(
        hb.allreduce(data.data(), data.data(), count, DataType::kFloat64, ReduceOp::kMax, {}).ok());
    for (int64_t i = 0; i < count; ++i) {
      double want = 0;
      for (int r = 0; r < L.hosts * L.per_host; ++r)
        want = std::max<double>(want, (r * 31 + i * 7) % 13);
      ASSERT_EQ(data[i], want);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, HierarchicalWorld,
                         ::testing::Values(Layout{2, 2}, Layout{2, 3}, Layout{3, 2}, Layout{2, 4},
                                           Layout{1, 3}, Layout{3, 1}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::to_string(info.param.hosts) + "hosts_x" +
                                  std::to_string(info.param.per_host);
                         });

// When the host-memory allreduce of a set takes the hierarchy: the global set on a uniform
// layout of several hosts with several ranks each, unless CHORUS_HIERARCHICAL_ALLREDUCE=0.
RankMap hosts_of(int hosts, int per_host, int rank) {
  std::vector<std::string> names;
  for (int h = 0; h < hosts; ++h) {
    for (int k = 0; k < per_host; ++k) names.push_back("node" + std::to_string(h));
  }
  return compute_rank_map(names, rank);
}

TEST(HierarchicalHost, AutomaticWhereTheLayoutAllowsIt) {
  std::string why;
  for (std::optional<bool> requested : {std::optional<bool>(), std::optional<bool>(true)}) {
    EXPECT_TRUE(use_hierarchical_host_allreduce(requested, true, hosts_of(2, 4, 5), &why));
    EXPECT_NE(why.find("ppr:4:node"), std::string::npos) << why;
    EXPECT_NE(why.find(requested ? "requested" : "automatic"), std::string::npos) << why;
    EXPECT_TRUE(use_hierarchical_host_allreduce(requested, true, hosts_of(3, 2, 0), &why));
  }
}

TEST(HierarchicalHost, FlatWithReasons) {
  std::string why;
  EXPECT_FALSE(use_hierarchical_host_allreduce(false, true, hosts_of(2, 4, 0), &why));
  EXPECT_NE(why.find("CHORUS_HIERARCHICAL_ALLREDUCE=0"), std::string::npos) << why;
  for (std::optional<bool> requested : {std::optional<bool>(), std::optional<bool>(true)}) {
    EXPECT_FALSE(use_hierarchical_host_allreduce(requested, false, hosts_of(2, 4, 0), &why));
    EXPECT_NE(why.find("global process set"), std::string::npos) << why;
    EXPECT_FALSE(use_hierarchical_host_allreduce(requested, true, hosts_of(1, 4, 0), &why));
    EXPECT_NE(why.find("one host"), std::string::npos) << why;
    EXPECT_FALSE(use_hierarchical_host_allreduce(requested, true, hosts_of(4, 1, 0), &why));
    EXPECT_NE(why.find("one rank per host"), std::string::npos) << why;
    EXPECT_FALSE(use_hierarchical_host_allreduce(requested, true,
                                                 compute_rank_map({"a", "a", "b"}, 0), &why));
    EXPECT_NE(why.find("different numbers"), std::string::npos) << why;
  }
}

// A local or cross backend whose call fails on one rank without taking part in it, as a
// failed MPI call or a wait past the liveness bound leaves a rank out of step with its group.
class FailsWithoutTakingPart final : public Backend {
 public:
  FailsWithoutTakingPart(Backend* real, bool fail_reducescatter, bool fail_allreduce)
      : real_(real), fail_reducescatter_(fail_reducescatter), fail_allreduce_(fail_allreduce) {}
  const char* name() const override { return "failing"; }
  int rank() const override { return real_->rank(); }
  int size() const override { return real_->size(); }
  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   kernels::Scale scale) override {
    if (fail_allreduce_) return internal_error("injected: cross allreduce");
    return real_->allreduce(send, recv, count, dtype, op, scale);
  }
  Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op, kernels::Scale scale) override {
    if (fail_reducescatter_) return internal_error("injected: local reducescatter");
    return real_->reducescatter(send, recv, counts, dtype, op, scale);
  }
  Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) override {
    return real_->allgatherv(send, recv, bytes);
  }

 private:
  Backend* real_;
  bool fail_reducescatter_;
  bool fail_allreduce_;
};

// 2 hosts x 2 ranks; rank 0's local step (`local`) or cross step fails without taking part.
// Every step on a group still in step is made, so that the members of the other group finish
// instead of waiting for rank 0: the statuses each rank's allreduce returns.
std::vector<Status> one_step_fails_on_rank_0(bool local) {
  // The group rank 0 leaves gives up on it soon; the others wait long enough for the members
  // that gave up to come on to their next step.
  constexpr auto kSoon = std::chrono::milliseconds(300);
  constexpr auto kLong = std::chrono::seconds(10);
  Meeting flat(4, kLong);
  Meeting host0(2, local ? kSoon : kLong), host1(2, kLong);
  Meeting index0(2, local ? kLong : kSoon), index1(2, kLong);
  Meeting* hosts[] = {&host0, &host1};
  Meeting* indexes[] = {&index0, &index1};
  std::vector<Status> out(4);
  std::vector<std::thread> threads;
  for (int g = 0; g < 4; ++g) {
    threads.emplace_back([&, g] {
      const int h = g / 2, k = g % 2;
      MeetingBackend f(&flat, g), l(hosts[h], k), c(indexes[k], h);
      FailsWithoutTakingPart fl(&l, g == 0 && local, false), fc(&c, false, g == 0 && !local);
      StatusOr<std::unique_ptr<HierarchicalBackend>> hb = HierarchicalBackend::create(&f, &fl, &fc);
      ASSERT_TRUE(hb.ok()) << hb.status().to_string();
      std::vector<float> data = input_of(g, 1000);
      out[g] =
          (*hb)->allreduce(data.data(), data.data(), 1000, DataType::kFloat32, ReduceOp::kSum, {});
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

// Rank 0's local reduce-scatter fails: its host's partner (rank 1) gives up on the local
// group, but rank 0 still makes the cross step, so its cross partner (rank 2) and that host's
// other rank (3) finish. (Returning at the failure left rank 2 waiting in the cross step.)
TEST(HierarchicalAllreduce, AFailedLocalStepStillMakesTheCrossStep) {
  const std::vector<Status> s = one_step_fails_on_rank_0(/*local=*/true);
  EXPECT_NE(s[0].message().find("injected: local reducescatter"), std::string::npos)
      << s[0].to_string();
  EXPECT_EQ(s[1].code(), StatusCode::kAborted) << s[1].to_string();
  EXPECT_TRUE(s[2].ok()) << s[2].to_string();
  EXPECT_TRUE(s[3].ok()) << s[3].to_string();
}

// Rank 0's cross step fails: its cross partner (rank 2) gives up, but rank 0 still makes the
// local allgather, so its host's other rank (1) finishes. (Returning at the failure left
// rank 1 waiting in the allgather.)
TEST(HierarchicalAllreduce, AFailedCrossStepStillMakesTheLocalAllgather) {
  const std::vector<Status> s = one_step_fails_on_rank_0(/*local=*/false);
  EXPECT_NE(s[0].message().find("injected: cross allreduce"), std::string::npos)
      << s[0].to_string();
  EXPECT_TRUE(s[1].ok()) << s[1].to_string();
  EXPECT_EQ(s[2].code(), StatusCode::kAborted) << s[2].to_string();
  EXPECT_TRUE(s[3].ok()) << s[3].to_string();
}

}  // namespace
}  // namespace chorus
