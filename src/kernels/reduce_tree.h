#pragma once
// The combination order of reductions across hosts: a fixed binary tree over the set's ranks
// that depends on the set size alone. Every host algorithm by messages (gather-all, direct
// reduce-scatter, recursive doubling, recursive halving and doubling: collectives/host_reduce.h)
// evaluates this same tree, some on one rank from every contribution (reduce_tree below),
// some spread over the ranks, one level per message round. So the algorithm can be chosen by
// message size without changing a bit, and an element's bits never depend on its place in a
// fused buffer.
//
// The tree for P ranks. Let p2 be the largest power of two <= P and e = P - p2. The first e
// pairs of ranks are folded: leaf v < e is (x[2v] op x[2v+1]); leaf v >= e is x[v + e].
// Then for d = p2/2, p2/4, ..., 1 in turn, leaf v < d becomes (leaf v op leaf v+d). The
// result is leaf 0, scaled once at the root. Examples:
//   P = 3: (x0 op x1) op x2
//   P = 4: (x0 op x2) op (x1 op x3)
//   P = 5: ((x0 op x1) op x3) op (x2 op x4)
// Every combination rounds to the element type (16-bit floats: combined in float32, rounded
// to nearest even), since the spread-out algorithms send partial results in that type.

#include <cstdint>

#include "chorus/types.h"
#include "kernels/reduce_kernels.h"

namespace chorus::kernels {

/// The tree's shape for `size` ranks (size >= 1).
struct TreeShape {
  explicit TreeShape(int size);

  int size;
  int p2;      ///< the largest power of two <= size: the leaves
  int levels;  ///< log2 p2: the rounds above the leaves
  int extra;   ///< size - p2: the folded pairs

  /// Whether `rank` is the even rank of a folded pair (it stands for the pair).
  bool leads_pair(int rank) const { return rank < 2 * extra && rank % 2 == 0; }

  /// Leaf of `rank`, or -1 for the odd rank of a folded pair (it hands its values to the
  /// even one and takes part in nothing else).
  int leaf_of(int rank) const {
    if (rank < 2 * extra) return rank % 2 == 0 ? rank / 2 : -1;
    return rank - extra;
  }
  /// The rank that holds leaf `v`.
  int rank_of(int v) const { return v < extra ? 2 * v : v + extra; }
};

/// dst[i] = scale(the tree's combination of srcs[0][i] .. srcs[n-1][i]), srcs in rank order.
/// The same contract as reduce_ordered otherwise: dst may alias any source, n >= 1.
void reduce_tree(void* dst, const void* const* srcs, int n, int64_t count, DataType dtype,
                 ReduceOp op, Scale scale);

}  // namespace chorus::kernels
