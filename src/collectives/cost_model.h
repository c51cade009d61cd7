#pragma once
// What each host-memory reduction algorithm of the MPI backend costs, as pure functions of
// the set size P and the message size n, and the choice between them. Every algorithm
// evaluates the same combination tree (kernels/reduce_tree.h), so the choice changes the
// time a reduction takes and never its bits.
//
// The model (alpha-beta-gamma): a message costs alpha plus beta per byte, a rank's own
// messages go out one after another, ranks work side by side, and combining costs gamma
// per byte. A cost counts the messages and bytes on the critical path (the busiest rank's,
// one after another) and the bytes it combines. With p2 the largest power of two <= P and
// e = P - p2 (docs/scaling.md has the derivations):
//
//   gather-all           every rank gathers every contribution (MPI_Allgather, taken as
//                        ceil(log2 P) rounds) and evaluates the tree alone.
//   direct               the owner of each of P blocks receives it from every rank and
//                        evaluates the tree on it, then sends it to every rank: 2 (P - 1)
//                        messages of n / P; O(P) messages, 2 rounds.
//   recursive doubling   log2 p2 exchanges of the whole vector; e pairs fold first and
//                        unfold last (2 more rounds).
//   halving-doubling     recursive halving (the reduce-scatter, log2 p2 rounds of n/2, n/4,
//                        ...) then recursive doubling of the blocks (the allgather): 2 log2 p2
//                        messages and 2 n (p2 - 1) / p2 bytes, plus the fold.

#include <cstdint>
#include <string>

#include "base/words.h"
#include "chorus/status.h"

namespace chorus {

enum class HostAlgorithm : uint8_t {
  kAuto,               ///< chosen per call by the cost model
  kGatherAll,          ///< gather every contribution, combine locally
  kDirect,             ///< reduce-scatter by direct messages, then share the blocks
  kRecursiveDoubling,  ///< exchange the whole vector log2 P times
  kHalvingDoubling,    ///< recursive halving, then recursive doubling of the blocks
};

/// CHORUS_HOST_ALGORITHM's words; empty reads as auto.
inline constexpr Words<HostAlgorithm, 5> kHostAlgorithmWords{{{
    {HostAlgorithm::kAuto, "auto"},
    {HostAlgorithm::kGatherAll, "gather"},
    {HostAlgorithm::kDirect, "direct"},
    {HostAlgorithm::kRecursiveDoubling, "doubling"},
    {HostAlgorithm::kHalvingDoubling, "halving"},
}}};

/// The network, per message and per byte, and the reduction kernel, per byte combined.
struct LinkModel {
  double alpha_s = 5e-6;              ///< seconds per message
  double beta_s_per_byte = 1 / 10e9;  ///< seconds per byte sent
  double gamma_s_per_byte = 1 / 8e9;  ///< seconds per byte combined
};

/// One algorithm's cost along its critical path.
struct Cost {
  int rounds = 0;        ///< message rounds, one after another
  int64_t messages = 0;  ///< messages sent one after another
  int64_t bytes = 0;     ///< bytes sent one after another
  int64_t combined = 0;  ///< bytes combined by the reduction kernel (two operands: one byte)
  double seconds = 0;    ///< alpha * messages + beta * bytes + gamma * combined
};

/// An allreduce of `bytes` per rank over `ranks` ranks with `algorithm` (not kAuto).
Cost allreduce_cost(HostAlgorithm algorithm, int ranks, int64_t bytes, const LinkModel& link);
/// A reduce-scatter of `bytes` in all (about bytes / ranks each): kDirect or kHalvingDoubling
/// (its halving half).
Cost reducescatter_cost(HostAlgorithm algorithm, int ranks, int64_t bytes, const LinkModel& link);

/// The two-level allreduce (collectives/hierarchical_allreduce.h) of `bytes` per rank over
/// `hosts` x `per_host` ranks: a reduce-scatter inside each host priced as direct on `host`
/// (shared memory: a message is a wait on a peer's counter, a byte a memory copy), the
/// cheapest allreduce of each rank's 1 / per_host shard over the hosts on `network` (the
/// per_host shards move side by side, each rank on its own link), and an allgather of the
/// shards inside the host on `host`. The parts run one after another, so their costs add.
Cost hierarchical_allreduce_cost(int hosts, int per_host, int64_t bytes, const LinkModel& network,
                                 const LinkModel& host);

/// The cheapest allreduce; on a tie, the earlier of gather-all, doubling, halving-doubling,
/// direct. The same on every rank: a pure function of its arguments.
HostAlgorithm choose_allreduce(int ranks, int64_t bytes, const LinkModel& link);
/// The cheaper reduce-scatter: kHalvingDoubling or kDirect (halving on a tie).
HostAlgorithm choose_reducescatter(int ranks, int64_t bytes, const LinkModel& link);

}  // namespace chorus
