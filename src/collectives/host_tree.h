#pragma once
// The host reductions whose cost grows as log P: recursive doubling and recursive halving
// then doubling, by point-to-point messages (collectives/links.h). Both evaluate the tree of
// kernels/reduce_tree.h spread over the ranks, one level per round:
//
//  - fold: in each of the first e pairs (2v, 2v+1), the odd rank sends its whole vector to
//    the even one, which combines (x[2v] op x[2v+1]) and stands for leaf v; the odd rank
//    waits for the result. Every other rank r stands for leaf r - e.
//  - for d = p2/2, ..., 1: leaf v exchanges with leaf v ^ d, and each combines
//    (lower leaf's partial op higher leaf's partial), the scale applied at d = 1.
//    Recursive doubling exchanges the whole vector; recursive halving only the half that
//    the partner keeps (leaf v keeps the half that holds block v), so after the last round
//    leaf v holds block v fully reduced, and an allgather by doubling (d = 1, ..., p2/2)
//    gives every leaf every block.
//
// Messages go in pieces of kPieceBytes; halving combines each piece as it arrives.
// Called from the background thread only, like every Backend.

#include <cstdint>
#include <vector>

#include "chorus/status.h"
#include "chorus/types.h"
#include "collectives/links.h"
#include "kernels/host_buffer.h"
#include "kernels/reduce_kernels.h"
#include "kernels/reduce_tree.h"

namespace chorus {

class HostTree {
 public:
  /// Over `links` (owned by the caller, alive as long as this).
  explicit HostTree(Links& links);

  /// Backend::allreduce by recursive doubling: log2 p2 rounds of the whole vector.
  Status allreduce_doubling(const void* send, void* recv, int64_t count, DataType dtype,
                            ReduceOp op, kernels::Scale scale);
  /// Backend::allreduce by recursive halving, then recursive doubling of the blocks.
  Status allreduce_halving(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                           kernels::Scale scale);
  /// Backend::reducescatter by recursive halving: leaf v's block is the blocks of the ranks
  /// it stands for, which are consecutive.
  Status reducescatter_halving(const void* send, void* recv, const std::vector<int64_t>& counts,
                               DataType dtype, ReduceOp op, kernels::Scale scale);

 private:
  static constexpr int64_t kPieceBytes = 256 << 10;
  static constexpr int kTag = 7303;

  // Sends out_bytes from `out` to `peer` while receiving in_bytes from it into `in`; calls
  // on_piece(offset, bytes) for each received piece once it is in, in order.
  template <typename OnPiece>
  Status exchange(int peer, const char* out, int64_t out_bytes, char* in, int64_t in_bytes,
                  OnPiece on_piece);
  Status allreduce(bool halving, const void* send, void* recv, int64_t count, DataType dtype,
                   ReduceOp op, kernels::Scale scale);
  Status send_to(int peer, const char* out, int64_t bytes);
  Status receive_from(int peer, char* in, int64_t bytes);
  // The even rank of a folded pair: acc = (mine op the odd rank's vector), `bytes` long.
  Status fold_in(const char* mine, char* acc, int64_t bytes, DataType dtype, ReduceOp op);
  // Recursive halving over the leaves' blocks (element offsets `offsets`, p2 + 1 of them):
  // reads this leaf's vector from `mine` and leaves block `leaf` reduced in `acc` (scaled).
  // `acc` may be `mine`.
  Status halve(const char* mine, char* acc, const std::vector<int64_t>& offsets, DataType dtype,
               ReduceOp op, kernels::Scale scale);
  // Recursive doubling of whole vectors: reads this leaf's from `mine`, leaves the result
  // (scaled) in `acc`, which may be `mine`.
  Status double_vectors(const char* mine, char* acc, int64_t bytes, DataType dtype, ReduceOp op,
                        kernels::Scale scale);
  // Recursive doubling of the leaves' blocks inside `acc`, leaf v starting with block v.
  Status double_blocks(char* acc, const std::vector<int64_t>& offsets, DataType dtype);
  char* scratch(std::size_t bytes) { return scratch_.get(bytes); }

  Links& links_;
  int rank_;
  kernels::TreeShape shape_;
  int leaf_;            // this rank's leaf, -1 for the odd rank of a folded pair
  HostBuffer scratch_;  // what a partner sends
  HostBuffer acc_;      // a reduce-scatter's partial results
  std::vector<int64_t> offsets_;
};

}  // namespace chorus
