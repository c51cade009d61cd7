// The combination tree over n values that Chorus documents (docs/scaling.md, "One order for
// every algorithm"), written out from its definition for the tests to compare against: fold
// the first e = n - p2 pairs (p2 the largest power of two <= n), leaf v = x[2v] + x[2v+1]
// for v < e and x[v + e] after; then leaf v = leaf v + leaf v + d for d = p2/2 ... 1.
// `add` combines two values as the dtype stores them.
#pragma once

#include <vector>

namespace chorus::testing {

template <typename T, typename Add>
T combination_tree(const std::vector<T>& x, Add add) {
  const int n = static_cast<int>(x.size());
  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  const int e = n - p2;
  std::vector<T> leaf(p2);
  for (int v = 0; v < p2; ++v) leaf[v] = v < e ? add(x[2 * v], x[2 * v + 1]) : x[v + e];
  for (int d = p2 / 2; d >= 1; d /= 2) {
    for (int v = 0; v < d; ++v) leaf[v] = add(leaf[v], leaf[v + d]);
  }
  return leaf[0];
}

}  // namespace chorus::testing
