#pragma once
// Adasum, the adaptive summation of Maleki et al. (MLSys 2021): an allreduce that adds
// gradients where they are orthogonal and averages them where they are parallel. Two vectors
// combine as
//
//   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
//
// (the coefficient of a zero vector is 1). Each tensor of a fused batch takes its own dot
// products, so a tensor's result does not depend on what it travelled with.
//
// Any number of ranks: the set's P ranks combine along one binary tree fixed by P. A run of
// ranks splits into its first ceil(n/2) ranks and the rest, each half is combined, then the
// two results are. At a power of two that pairs 0+1 and 2+3, then (0+1)+(2+3), as Horovod
// does; at P = 3, (0+1)+2; at P = 5, ((0+1)+2)+(3+4). Where the two halves cover different
// numbers of ranks, n_a and n_b, each side's coefficient weighs the dot product by the share
// of the ranks it covers, w_a = n_a / (n_a + n_b) and w_b = n_b / (n_a + n_b):
//
//   (1 - w_a a.b / |a|^2) a + (1 - w_b a.b / |b|^2) b
//
// which is the formula above when n_a = n_b, and keeps Adasum's two defining cases at every
// P: orthogonal gradients add, and parallel ones, of any lengths, average over all P ranks
// (unweighted, rank 2 of three would count as much as ranks 0 and 1 together).
//
// How it runs, on the set's host backends, moving as many bytes as a ring allreduce:
//  1. Each tensor is cut into P blocks (even_blocks); one alltoall gives rank q block q of
//     every rank's tensors.
//  2. For each height of the tree, from the leaves up: each rank sums, over its blocks, a.b,
//     |a|^2 and |b|^2 for every merge at that height and every tensor; one float64 allreduce
//     of those sums (combined in rank order: the same bits on every rank) completes them, and
//     each rank combines its blocks. ceil(log2 P) small allreduces in all.
//  3. One allgather gives every rank every block of the root.
// Every block is combined by one rank only, so every rank ends with the same bits.
//
// Precision: float16, bfloat16 and float32 combine in float32 (each combination computed in
// float64 and rounded once), float64 in float64; the dot products are summed in float64.
//
// Failures: every backend call of the sequence is made on every member even after one
// failed (with whatever the buffers hold), so that no member is left waiting; the first
// failure is returned.

#include <cstdint>
#include <vector>

#include "chorus/status.h"
#include "chorus/types.h"
#include "collectives/backend.h"
#include "kernels/host_buffer.h"
#include "kernels/reduce_kernels.h"

namespace chorus {

/// One tensor of a batch: `count` elements from element `offset` of the batch's buffer.
struct AdasumTensor {
  int64_t offset = 0;
  int64_t count = 0;
};

/// The merges of the tree for `size` ranks, by height (index 0: the merges of leaves).
/// Merge {left, mid, end} combines ranks [left, mid) with [mid, end).
struct AdasumMerge {
  int left, mid, end;
};
std::vector<std::vector<AdasumMerge>> adasum_tree(int size);

/// Runs Adasum over the set behind `set` (a BackendChoice: its alltoall, float64 allreduce
/// and allgather). Host memory only; its scratch is reused from call to call.
class Adasum {
 public:
  /// recv = scale(adasum over the set of each rank's `send`), for each of `tensors` (send
  /// and recv have the batch's layout; they may be equal; what lies between the tensors is
  /// not read or written). `dtype` is a floating type. Collective: every member passes the
  /// same tensors, dtype and scale.
  Status allreduce(Backend& set, const void* send, void* recv,
                   const std::vector<AdasumTensor>& tensors, DataType dtype, kernels::Scale scale);

 private:
  template <class W>
  Status run(Backend& set, const void* send, void* recv, const std::vector<AdasumTensor>& tensors,
             DataType dtype, double factor);

  HostBuffer out_;   // the alltoall's send side, then this rank's root blocks
  HostBuffer in_;    // the alltoall's receive side, then the allgather's
  HostBuffer work_;  // every rank's blocks, in the compute type
  std::vector<double> sums_;
};

}  // namespace chorus
