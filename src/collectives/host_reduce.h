#pragma once
// The host-memory reductions by messages: allreduce and reduce-scatter over a group's Links
// (collectives/links.h), whatever carries them.
//
// They do not use a transport's own reductions (MPI's pick their algorithm, and with it the
// order in which ranks' values are combined, by message size, so the same element could get
// different bits fused and alone; and MPI has no 16-bit float types). Instead four
// algorithms evaluate one combination tree that depends on the set size alone
// (kernels/reduce_tree.h), so that an element's bits are the same on every rank, fused or
// alone, whichever algorithm ran and whichever transport carried it:
//  - gather-all: every rank gathers every contribution and evaluates the tree;
//  - direct: a reduce-scatter by point-to-point messages, pipelined in chunks, where the
//    owner of each block evaluates the tree on it as chunks arrive, then every rank sends
//    its block to every other at once (O(P) messages, two rounds);
//  - recursive doubling and recursive halving then doubling (collectives/host_tree.h):
//    O(log P) rounds.
// Each call takes the one the cost model finds cheapest for its size and the set's
// (collectives/cost_model.h), unless CHORUS_HOST_ALGORITHM forces one.
//
// Called from the thread that runs the cycles only, like every Backend.

#include <cstdint>
#include <vector>

#include "chorus/status.h"
#include "chorus/types.h"
#include "collectives/cost_model.h"
#include "collectives/host_tree.h"
#include "collectives/links.h"
#include "kernels/host_buffer.h"
#include "kernels/reduce_kernels.h"

namespace chorus {

class HostReduce {
 public:
  /// Over `links` (owned by the caller, alive as long as this). `algorithm`: kAuto to choose
  /// per call.
  HostReduce(Links& links, HostAlgorithm algorithm);

  /// Backend::allreduce: in the MPI path's blocks (even_blocks), block q combined by rank q
  /// where the algorithm splits the vector.
  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   kernels::Scale scale);
  /// Backend::reducescatter.
  Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op, kernels::Scale scale);
  /// Backend::set_host_algorithm.
  void set_algorithm(HostAlgorithm algorithm) { algorithm_ = algorithm; }

 private:
  // Chunk of the pipelined reduce-scatter.
  static constexpr int64_t kChunkBytes = 256 << 10;
  static constexpr int kReduceScatterTag = 7301;
  static constexpr int kShareTag = 7302;

  Status gather_all_reduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                           kernels::Scale scale);
  Status pipelined_reduce_scatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                                  DataType dtype, ReduceOp op, kernels::Scale scale);
  Status share_blocks(char* out, const std::vector<int64_t>& counts,
                      const std::vector<int64_t>& offsets, int64_t esz);

  Links& links_;
  int rank_;
  int size_;
  HostAlgorithm algorithm_;
  LinkModel link_;
  HostTree tree_;
  // Grows to the largest need and stays: steady-state steps allocate nothing.
  HostBuffer scratch_;
  std::vector<const void*> sources_;
  std::vector<int64_t> blocks_;
};

}  // namespace chorus
