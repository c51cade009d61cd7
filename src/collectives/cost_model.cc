#include "collectives/cost_model.h"

#include <initializer_list>

#include "kernels/reduce_tree.h"

namespace chorus {
namespace {

int ceil_log2(int n) {
  int k = 0;
  while ((int64_t{1} << k) < n) ++k;
  return k;
}

// What every formula starts from: the size and the shape of the tree (kernels/reduce_tree.h).
struct Terms {
  Terms(int ranks, int64_t bytes) : Terms(static_cast<double>(bytes), kernels::TreeShape(ranks)) {}
  Terms(double bytes, const kernels::TreeShape& tree)
      : n(bytes), p(tree.size), p2(tree.p2), levels(tree.levels), fold(tree.extra > 0 ? 1 : 0) {}
  double n;    // bytes per rank
  double p;    // ranks
  int p2;      // the tree's leaves
  int levels;  // log2 p2
  int fold;    // 1 when the first pairs fold in and the result goes back out
};

Cost priced(int rounds, int64_t messages, double bytes, double combined, const LinkModel& link) {
  Cost c;
  c.rounds = rounds;
  c.messages = messages;
  c.bytes = static_cast<int64_t>(bytes);
  c.combined = static_cast<int64_t>(combined);
  c.seconds = link.alpha_s * static_cast<double>(messages) + link.beta_s_per_byte * bytes +
              link.gamma_s_per_byte * combined;
  return c;
}

}  // namespace

Cost allreduce_cost(HostAlgorithm algorithm, int ranks, int64_t bytes, const LinkModel& link) {
  if (ranks <= 1) return {};
  const Terms t(ranks, bytes);
  const double n = t.n, p = t.p;
  const int levels = t.levels, fold = t.fold;
  const double kept = (t.p2 - 1.0) / t.p2;  // of the vector, sent twice in halving-doubling
  switch (algorithm) {
    case HostAlgorithm::kGatherAll:
      return priced(ceil_log2(ranks), ceil_log2(ranks), (p - 1) * n, (p - 1) * n, link);
    case HostAlgorithm::kDirect:
      return priced(2, 2 * (ranks - 1), 2 * (p - 1) / p * n, (p - 1) / p * n, link);
    case HostAlgorithm::kRecursiveDoubling:
      return priced(levels + 2 * fold, levels + 2 * fold, (levels + 2 * fold) * n,
                    (levels + fold) * n, link);
    case HostAlgorithm::kHalvingDoubling:
      return priced(2 * levels + 2 * fold, 2 * levels + 2 * fold, (2 * kept + 2 * fold) * n,
                    (kept + fold) * n, link);
    case HostAlgorithm::kAuto: break;
  }
  return {};
}

Cost reducescatter_cost(HostAlgorithm algorithm, int ranks, int64_t bytes, const LinkModel& link) {
  if (ranks <= 1) return {};
  const Terms t(ranks, bytes);
  const double n = t.n, p = t.p;
  const int levels = t.levels, fold = t.fold;
  const double kept = (t.p2 - 1.0) / t.p2;
  switch (algorithm) {
    case HostAlgorithm::kDirect:
      return priced(1, ranks - 1, (p - 1) / p * n, (p - 1) / p * n, link);
    case HostAlgorithm::kHalvingDoubling:
      // Folded: the whole vector in, and the odd rank's block back out.
      return priced(levels + 2 * fold, levels + 2 * fold, kept * n + fold * (n + n / p),
                    (kept + fold) * n, link);
    default: break;
  }
  return {};
}

Cost hierarchical_allreduce_cost(int hosts, int per_host, int64_t bytes, const LinkModel& network,
                                 const LinkModel& host) {
  const int64_t shard = bytes / (per_host > 0 ? per_host : 1);
  const Cost parts[] = {
      reducescatter_cost(HostAlgorithm::kDirect, per_host, bytes, host),
      allreduce_cost(choose_allreduce(hosts, shard, network), hosts, shard, network),
      per_host > 1 ? priced(1, per_host - 1, static_cast<double>(bytes - shard), 0, host) : Cost{},
  };
  Cost sum;
  for (const Cost& c : parts) {
    sum.rounds += c.rounds;
    sum.messages += c.messages;
    sum.bytes += c.bytes;
    sum.combined += c.combined;
    sum.seconds += c.seconds;
  }
  return sum;
}

HostAlgorithm choose_allreduce(int ranks, int64_t bytes, const LinkModel& link) {
  HostAlgorithm best = HostAlgorithm::kGatherAll;
  double best_s = allreduce_cost(best, ranks, bytes, link).seconds;
  for (HostAlgorithm a : {HostAlgorithm::kRecursiveDoubling, HostAlgorithm::kHalvingDoubling,
                          HostAlgorithm::kDirect}) {
    const double s = allreduce_cost(a, ranks, bytes, link).seconds;
    if (s < best_s) {
      best = a;
      best_s = s;
    }
  }
  return best;
}

HostAlgorithm choose_reducescatter(int ranks, int64_t bytes, const LinkModel& link) {
  const double halving =
      reducescatter_cost(HostAlgorithm::kHalvingDoubling, ranks, bytes, link).seconds;
  const double direct = reducescatter_cost(HostAlgorithm::kDirect, ranks, bytes, link).seconds;
  return direct < halving ? HostAlgorithm::kDirect : HostAlgorithm::kHalvingDoubling;
}

}  // namespace chorus
