// The combination tree of reductions across hosts (kernels/reduce_tree.h) against an
// evaluation written here from the header's definition alone, one element at a time: float32
// and float16 sums of values whose sums depend on the order, over every set size from 1 to
// 17, on counts that span several of the kernel's pieces, and with the destination aliasing a
// source. The tree's worked examples are checked as written.
#include "kernels/reduce_tree.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/combination_tree.h"

namespace chorus::kernels {
namespace {

using chorus::testing::combination_tree;

float add_float(float a, float b) { return a + b; }
uint16_t add_half(uint16_t a, uint16_t b) {
  return float_to_half(half_to_float(a) + half_to_float(b));
}

// Values over many magnitudes, so that float sums depend on their order.
std::vector<std::vector<float>> inputs(int ranks, int64_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<std::vector<float>> x(ranks, std::vector<float>(count));
  for (auto& row : x) {
    for (float& v : row) v = std::ldexp(mantissa(gen), exponent(gen));
  }
  return x;
}

TEST(ReduceTree, Float32SumMatchesTheDefinitionForEverySize) {
  const int64_t count = 1300;  // three pieces of the kernel, the last one short
  for (int n = 1; n <= 17; ++n) {
    const auto x = inputs(n, count, 17u + n);
    std::vector<const void*> srcs;
    for (const auto& row : x) srcs.push_back(row.data());
    std::vector<float> out(count);
    reduce_tree(out.data(), srcs.data(), n, count, DataType::kFloat32, ReduceOp::kSum, Scale{});
    int differs_from_rank_order = 0;
    for (int64_t i = 0; i < count; ++i) {
      std::vector<float> column(n);
      float linear = 0;
      for (int r = 0; r < n; ++r) {
        column[r] = x[r][i];
        linear = r == 0 ? column[r] : linear + column[r];
      }
      const float want = combination_tree(column, add_float);
      ASSERT_EQ(0, std::memcmp(&want, &out[i], sizeof want))
          << n << " ranks, element " << i << ": " << out[i] << " != " << want;
      differs_from_rank_order += linear != want;
    }
    // From four ranks on, the tree is not rank order: the inputs must show it.
    if (n >= 4) EXPECT_GT(differs_from_rank_order, 0) << n << " ranks";
  }
}

TEST(ReduceTree, Float16RoundsAtEveryCombination) {
  const int64_t count = 700;
  for (int n : {3, 5, 6, 7, 8, 12}) {
    const auto x = inputs(n, count, 99u + n);
    std::vector<std::vector<uint16_t>> h(n, std::vector<uint16_t>(count));
    std::vector<const void*> srcs;
    for (int r = 0; r < n; ++r) {
      for (int64_t i = 0; i < count; ++i) h[r][i] = float_to_half(x[r][i]);
      srcs.push_back(h[r].data());
    }
    std::vector<uint16_t> out(count);
    reduce_tree(out.data(), srcs.data(), n, count, DataType::kFloat16, ReduceOp::kSum, Scale{});
    for (int64_t i = 0; i < count; ++i) {
      std::vector<uint16_t> column(n);
      for (int r = 0; r < n; ++r) column[r] = h[r][i];
      ASSERT_EQ(combination_tree(column, add_half), out[i]) << n << " ranks, element " << i;
    }
  }
}

TEST(ReduceTree, WorkedExamplesOfTheHeader) {
  // Chosen so that each grouping gives a different float sum.
  const float x[] = {1e8f, 3.0f, -1e8f, 5.0f, 7.0f};
  auto tree_of = [&](int n) {
    std::vector<const void*> srcs;
    for (int r = 0; r < n; ++r) srcs.push_back(&x[r]);
    float out = 0;
    reduce_tree(&out, srcs.data(), n, 1, DataType::kFloat32, ReduceOp::kSum, Scale{});
    return out;
  };
  EXPECT_EQ((x[0] + x[1]) + x[2], tree_of(3));
  EXPECT_EQ((x[0] + x[2]) + (x[1] + x[3]), tree_of(4));
  EXPECT_EQ(((x[0] + x[1]) + x[3]) + (x[2] + x[4]), tree_of(5));
  EXPECT_NE(((x[0] + x[1]) + x[2]) + x[3], tree_of(4));  // not rank order
}

TEST(ReduceTree, DestinationMayBeASourceAndScaleAppliesOnce) {
  for (int n : {3, 6, 9}) {
    const int64_t count = 1030;
    std::vector<std::vector<int32_t>> x(n, std::vector<int32_t>(count));
    for (int r = 0; r < n; ++r) {
      for (int64_t i = 0; i < count; ++i)
        x[r][i] = static_cast<int32_t>((i * 7 + r * 13) % 101 - 50);
    }
    for (int alias = 0; alias < n; alias += n - 1) {
      auto y = x;
      std::vector<const void*> srcs;
      for (const auto& row : y) srcs.push_back(row.data());
      // Average: the sum divided by n, truncating toward zero, once.
      reduce_tree(y[alias].data(), srcs.data(), n, count, DataType::kInt32, ReduceOp::kSum,
                  Scale{n, 1.0});
      for (int64_t i = 0; i < count; ++i) {
        int32_t sum = 0;
        for (int r = 0; r < n; ++r) sum += x[r][i];
        ASSERT_EQ(sum / n, y[alias][i])
            << n << " ranks, into source " << alias << ", element " << i;
      }
    }
  }
}

TEST(TreeShape, LeavesAndTheirRanks) {
  const TreeShape seven(7);  // p2 4, three folded pairs: leaves 0,1,2 on ranks 0,2,4; leaf 3 on 6
  EXPECT_EQ(4, seven.p2);
  EXPECT_EQ(3, seven.extra);
  const int leaves[] = {0, -1, 1, -1, 2, -1, 3};
  for (int r = 0; r < 7; ++r) EXPECT_EQ(leaves[r], seven.leaf_of(r)) << "rank " << r;
  for (int v = 0; v < 4; ++v) EXPECT_EQ(v < 3 ? 2 * v : 6, seven.rank_of(v)) << "leaf " << v;
  const TreeShape eight(8);
  EXPECT_EQ(8, eight.p2);
  EXPECT_EQ(0, eight.extra);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(r, eight.leaf_of(r));
}

}  // namespace
}  // namespace chorus::kernels
