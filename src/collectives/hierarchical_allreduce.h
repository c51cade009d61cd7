#pragma once
// Hierarchical allreduce: reduce-scatter inside the node, allreduce of each node's shard
// across nodes, allgather inside the node. Inside a node the transport is fast (NCCL over
// NVLink/PCIe for GPU memory, shared memory for host memory); across nodes each rank moves
// only 1/local_size of the data, and the local_size cross allreduces (one per local rank)
// run side by side over the network.
//
// A provider of allreduce alone (serves()) over three Backends: `local` (this host's ranks,
// ordered by local_rank), `cross` (the ranks with this local_rank, one per host) and `flat`
// (the whole set, whose rank and size it has); the set's BackendChoice gives every other
// collective to another backend. It owns none of them. Like every Backend it is called only
// from the background thread, in the same order on every member.
//
// Bits: the result scale is applied once, at the end (in the cross allreduce), and the
// order is node first, then across nodes in the cross backend's order. Inside the node the
// order is the local backend's: on host memory (shared memory, or MPI staged for GPU
// memory) it is local rank order, or the tree over the local ranks where the local group
// reduces by MPI messages (no segment, CHORUS_SHARED_MEMORY=0), and independent of the
// element's place in the buffer,
// and across nodes the host backend's tree over the hosts is too, so fused and unfused
// allreduces agree bit for bit (what the unit test checks over fake transports, and
// cluster.netns_hierarchy across fake hosts); with NCCL as the local backend it is
// whatever NCCL's reduce-scatter algorithm does for that message size, so floating results
// may differ between fused and unfused calls and from the flat backend's order.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/backend.h"
#include "topology/rank_map.h"

namespace chorus {

/// Whether the layout allows the hierarchical allreduce: more than one host, more than
/// one rank per host, and a uniform layout (every host the same number of ranks, so every
/// local rank has a partner on every host). The map is the same on every rank, so all
/// agree. `reason` says why not, for the log.
bool hierarchical_layout(const RankMap& map, std::string* reason);

/// Whether the runtime needs the local and cross groups at init:
/// CHORUS_HIERARCHICAL_ALLREDUCE (`requested`: unset = automatic, true = 1, false = 0) is
/// 1, or it is unset and the layout allows the hierarchy. 0 builds none. The setting and the
/// map must be the same on every rank (the groups are made by collective calls).
bool hierarchical_groups_needed(std::optional<bool> requested, const RankMap& map);

/// Whether a host-memory allreduce of this set goes local reduce-scatter, cross allreduce,
/// local allgather: only the global set (`global_set`) has local and cross groups, and the
/// layout must allow it (hierarchical_layout); then always, unless
/// CHORUS_HIERARCHICAL_ALLREDUCE is 0 (`requested` false). Inside a host the local group
/// reduces through shared memory (by MPI messages where it cannot), so only 1/local_size of the
/// data crosses the network per rank, in local_size flows side by side. Fixed for the set, never
/// per call: the combination order depends on it (host order in host_reduce.h). `reason` says why
/// or why not.
bool use_hierarchical_host_allreduce(std::optional<bool> requested, bool global_set,
                                     const RankMap& map, std::string* reason);

/// Splits `count` elements into `parts` consecutive blocks for the intra-node
/// reduce-scatter. Every block boundary is a multiple of `align` elements (so every shard
/// starts aligned), the blocks differ by less than 2 * `align` elements (whole units differ
/// by at most one; the last non-empty block also lacks the remainder), earlier blocks are the
/// larger, and the blocks sum to `count`. Trailing blocks may be empty when count is small.
std::vector<int64_t> hierarchical_blocks(int64_t count, int parts, int64_t align);

class HierarchicalBackend final : public Backend {
 public:
  /// local->size() * cross->size() must equal flat->size() (a uniform layout); checked by
  /// create().
  /// `host_memory`: the buffers are host memory, and the reduce-scatter goes through the
  /// hierarchy too (below); on device memory only the allreduce does.
  static StatusOr<std::unique_ptr<HierarchicalBackend>> create(Backend* flat, Backend* local,
                                                               Backend* cross,
                                                               bool host_memory = false);

  const char* name() const override { return "hierarchical"; }
  int rank() const override { return flat_->rank(); }
  int size() const override { return flat_->size(); }
  bool serves(Collective c, DataType) const override {
    return c == Collective::kAllreduce || (host_memory_ && c == Collective::kReducescatter);
  }

  /// Requires `recv` to hold `count` elements; send may equal recv. The local
  /// reduce-scatter writes this rank's shard at its place inside recv (in place when send
  /// == recv), the cross allreduce works on that shard in place, and the allgather fills
  /// the rest of recv around it.
  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   kernels::Scale scale) override;
  /// Host memory: the allreduce above into a buffer of the whole vector, of which this rank
  /// keeps its block, so that every element gets the bits the allreduce gives it (a sharded
  /// optimizer's reduce-scatter must agree with DistributedOptimizer's allreduce). It moves
  /// what the allreduce moves, where the flat reduce-scatter would move less, and combine in
  /// the flat order.
  Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op, kernels::Scale scale) override;
  /// Every level takes it; those that reduce through shared memory ignore it.
  void set_host_algorithm(HostAlgorithm algorithm) override {
    flat_->set_host_algorithm(algorithm);
    local_->set_host_algorithm(algorithm);
    cross_->set_host_algorithm(algorithm);
  }

 private:
  // Shards start on this boundary (bytes): whole cache lines and aligned vector loads.
  static constexpr int64_t kAlignBytes = 256;

  HierarchicalBackend(Backend* flat, Backend* local, Backend* cross, bool host_memory)
      : flat_(flat), local_(local), cross_(cross), host_memory_(host_memory) {}

  Backend* flat_;
  Backend* local_;
  Backend* cross_;
  bool host_memory_;
};

}  // namespace chorus
