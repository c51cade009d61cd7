// The order in which the runtime's host-memory allreduce combines the ranks' values, on
// whatever layout mpirun gives it, bit for bit against that order written out here and in
// common/combination_tree.h (docs/runtime.md, "Reductions"):
//  - one host: rank order, ((x0 + x1) + x2) + ..., float16 summed in float32 and rounded once;
//  - hosts with the same number (> 1) of ranks each, unless CHORUS_HIERARCHICAL_ALLREDUCE=0:
//    each host's ranks in local rank order as above, then the hosts' partial sums over the
//    tree of the host count;
//  - any other layout across hosts: the tree over the set's size.
// With CHORUS_SHARED_MEMORY=0 no host reduces through shared memory: its ranks combine by the
// tree over their number, as ranks across hosts do (one host: the tree over the ranks).
// Across hosts partials travel in the tensor's type, so float16 rounds at every combination of
// the tree.
// The inputs span many magnitudes, so that the orders give different bits (checked), and every
// rank computes every rank's inputs, so each checks its own result: the same expected bits on
// every rank, fused and alone.
// Layouts are block layouts (rank = cross_rank * local_size + local_rank, checked), as mpirun
// -H h1:L,h2:L... places them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "common/combination_tree.h"
#include "kernels/reduce_kernels.h"

namespace chorus::testing {
namespace {

enum class Order { kRankOrder, kHostsThenTree, kHostTreesThenTree, kTree };

const char* order_name(Order o) {
  switch (o) {
    case Order::kRankOrder: return "rank order (one host)";
    case Order::kHostsThenTree: return "each host in rank order, then the tree over the hosts";
    case Order::kHostTreesThenTree:
      return "each host by the tree over its ranks, then the tree over the hosts";
    case Order::kTree: return "the tree over the ranks";
  }
  return "?";
}

bool uniform_hosts() { return local_size() * cross_size() == size(); }

bool set_to_zero(const char* variable) {
  const char* v = std::getenv(variable);
  return v && std::string(v) == "0";
}

Order expected_order() {
  const bool shared_memory = !set_to_zero("CHORUS_SHARED_MEMORY");
  if (cross_size() == 1) return shared_memory ? Order::kRankOrder : Order::kTree;
  if (!set_to_zero("CHORUS_HIERARCHICAL_ALLREDUCE") && uniform_hosts() && local_size() > 1)
    return shared_memory ? Order::kHostsThenTree : Order::kHostTreesThenTree;
  return Order::kTree;
}

// Deterministic inputs of every rank: +-[0.5, 1) * 2^[-12, 12].
float input(int rank, int64_t i, uint64_t salt) {
  uint64_t z = salt + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank * 1000003 + i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const float mantissa = 0.5f + static_cast<float>(z & 0xffff) / 131072.0f;
  const int exponent = static_cast<int>((z >> 16) % 25) - 12;
  return std::ldexp((z >> 60) & 1 ? -mantissa : mantissa, exponent);
}

float rank_order(const std::vector<float>& x, std::size_t begin, std::size_t end) {
  float acc = x[begin];
  for (std::size_t r = begin + 1; r < end; ++r) acc += x[r];
  return acc;
}

float round_half(float v) { return kernels::half_to_float(kernels::float_to_half(v)); }

// Element i's sum in `order`, every rank's input given as float; `half`: stored as float16.
float expected_sum(Order order, const std::vector<float>& x, bool half) {
  auto add = [half](float a, float b) { return half ? round_half(a + b) : a + b; };
  auto store = [half](float v) { return half ? round_half(v) : v; };
  switch (order) {
    case Order::kRankOrder: return store(rank_order(x, 0, x.size()));
    case Order::kTree: return combination_tree(x, add);
    case Order::kHostsThenTree:
    case Order::kHostTreesThenTree: {
      const auto per_host = static_cast<std::size_t>(local_size());
      std::vector<float> hosts;
      for (std::size_t h = 0; h < x.size() / per_host; ++h) {
        const auto first = x.begin() + static_cast<std::ptrdiff_t>(h * per_host);
        hosts.push_back(order == Order::kHostsThenTree
                            ? store(rank_order(x, h * per_host, (h + 1) * per_host))
                            : combination_tree(std::vector<float>(first, first + per_host), add));
      }
      return combination_tree(hosts, add);
    }
  }
  return 0;
}

std::vector<float> column(int64_t i, uint64_t salt, bool half) {
  std::vector<float> x(static_cast<std::size_t>(size()));
  for (int r = 0; r < size(); ++r) x[r] = half ? round_half(input(r, i, salt)) : input(r, i, salt);
  return x;
}

// One tensor: float32, or float16 held as uint16_t.
struct Tensor {
  bool half;
  int64_t count;
  uint64_t salt;
  std::vector<float> f;
  std::vector<uint16_t> h;

  Tensor(bool half_, int64_t count_, uint64_t salt_) : half(half_), count(count_), salt(salt_) {
    if (half) {
      h.resize(count);
      for (int64_t i = 0; i < count; ++i) h[i] = kernels::float_to_half(input(rank(), i, salt));
    } else {
      f.resize(count);
      for (int64_t i = 0; i < count; ++i) f[i] = input(rank(), i, salt);
    }
  }
  TensorRef ref() {
    void* data = half ? static_cast<void*>(h.data()) : static_cast<void*>(f.data());
    return TensorRef{data, half ? DataType::kFloat16 : DataType::kFloat32, {count}, Device::cpu()};
  }
  float at(int64_t i) const { return half ? kernels::half_to_float(h[i]) : f[i]; }
};

// How many of t's elements differ from `order`'s bits (the first few printed), and how many
// would have other bits in each of the flat orders.
struct Check {
  int64_t wrong = 0;
  int64_t differs_from_rank_order = 0;
  int64_t differs_from_tree = 0;
};
Check check(const Tensor& t, Order order, const std::string& what) {
  Check c;
  for (int64_t i = 0; i < t.count; ++i) {
    const std::vector<float> x = column(i, t.salt, t.half);
    const float want = expected_sum(order, x, t.half);
    const float got = t.at(i);
    if (std::memcmp(&want, &got, sizeof want) != 0 && c.wrong++ < 3) {
      ADD_FAILURE() << what << " rank " << rank() << " element " << i << ": " << got
                    << ", expected " << want << " (" << order_name(order) << ")";
    }
    c.differs_from_rank_order += expected_sum(Order::kRankOrder, x, t.half) != want;
    c.differs_from_tree += expected_sum(Order::kTree, x, t.half) != want;
  }
  return c;
}

// Sums: the tests check the order of combination, which the average's division would blur.
Handle sum(const std::string& name, Tensor& t) {
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  return allreduce(name, t.ref(), t.ref(), o);
}

TEST(Order, Float32AndFloat16AloneHaveTheLayoutsBits) {
  const Order order = expected_order();
  if (rank() == 0) std::printf("order: %s\n", order_name(order));
  // The hosts' partial sums are of consecutive ranks.
  if (order == Order::kHostsThenTree || order == Order::kHostTreesThenTree)
    ASSERT_EQ(rank(), cross_rank() * local_size() + local_rank());
  Check all;
  for (bool half : {false, true}) {
    // Sizes that end inside a shard, a fusion piece and a chunk of every path.
    for (int64_t count : {int64_t{1}, int64_t{3}, int64_t{1001}, int64_t{70001}}) {
      Tensor t(half, count, 11 + count);
      const std::string name =
          std::string("order.alone.") + (half ? "f16." : "f32.") + std::to_string(count);
      ASSERT_TRUE(sum(name, t).wait().ok()) << name;
      const Check c = check(t, order, name);
      EXPECT_EQ(c.wrong, 0) << name;
      all.differs_from_rank_order += c.differs_from_rank_order;
      all.differs_from_tree += c.differs_from_tree;
    }
  }
  // From four ranks on, every order differs from the flat ones it is not (at three, the tree
  // is rank order): the inputs must show it, or the check above could not fail.
  if (size() >= 4) {
    if (order != Order::kRankOrder) EXPECT_GT(all.differs_from_rank_order, 0);
    if (order != Order::kTree) EXPECT_GT(all.differs_from_tree, 0);
  }
}

// A reduce-scatter gives each element of its block the bits the allreduce gives it, in
// every layout (the sharded optimizer's stage 2 relies on it).
TEST(Order, ReducescatterHasTheAllreducesBits) {
  const Order order = expected_order();
  for (int64_t count : {int64_t{7}, int64_t{1001}, int64_t{70001}}) {
    Tensor t(false, count, 500 + count);
    std::vector<float> out;
    ReducescatterOptions o;
    o.op = ReduceOp::kSum;
    o.allocate = [&out](const std::vector<int64_t>& shape) -> StatusOr<TensorRef> {
      out.resize(static_cast<std::size_t>(shape.at(0)));
      return TensorRef{out.data(), DataType::kFloat32, shape, Device::cpu()};
    };
    const std::string name = "order.scatter." + std::to_string(count);
    ASSERT_TRUE(reducescatter(name, t.ref(), o).wait().ok()) << name;
    const int64_t base = count / size(), extra = count % size();
    const int64_t first = rank() * base + std::min<int64_t>(rank(), extra);
    ASSERT_EQ(static_cast<int64_t>(out.size()), base + (rank() < extra ? 1 : 0)) << name;
    int64_t wrong = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const float want =
          expected_sum(order, column(first + static_cast<int64_t>(i), t.salt, false), false);
      if (std::memcmp(&want, &out[i], sizeof want) != 0 && wrong++ < 3) {
        ADD_FAILURE() << name << " rank " << rank() << " element " << first + i << ": " << out[i]
                      << ", expected " << want << " (" << order_name(order) << ")";
      }
    }
    EXPECT_EQ(wrong, 0) << name;
  }
}

TEST(Order, FusedGivesTheBitsOfAlone) {
  const Order order = expected_order();
  constexpr int kTensors = 120;
  std::vector<Tensor> fused, alone;
  for (int k = 0; k < kTensors; ++k) {
    const bool half = k % 3 == 0;
    const int64_t count = 1 + (k * 997) % 3001;
    fused.emplace_back(half, count, 1000 + k);
    alone.emplace_back(half, count, 1000 + k);
  }
  std::vector<Handle> handles;
  for (int k = 0; k < kTensors; ++k) {
    handles.push_back(sum("order.fused." + std::to_string(k), fused[k]));
  }
  for (int k = 0; k < kTensors; ++k) ASSERT_TRUE(handles[k].wait().ok()) << "tensor " << k;
  for (int k = 0; k < kTensors; ++k) {
    const std::string name = "order.alone." + std::to_string(k);
    ASSERT_TRUE(sum(name, alone[k]).wait().ok()) << name;
    const std::size_t bytes = alone[k].half ? alone[k].h.size() * 2 : alone[k].f.size() * 4;
    const void* a = alone[k].half ? static_cast<void*>(alone[k].h.data()) : alone[k].f.data();
    const void* b = fused[k].half ? static_cast<void*>(fused[k].h.data()) : fused[k].f.data();
    EXPECT_EQ(0, std::memcmp(a, b, bytes)) << "tensor " << k << ": fused and alone differ";
    EXPECT_EQ(check(fused[k], order, "fused " + std::to_string(k)).wrong, 0);
  }
}

}  // namespace
}  // namespace chorus::testing
