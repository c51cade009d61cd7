// scaling_model: the host algorithms' cost model (collectives/cost_model.h) tabulated against
// the set size, beside what a ring and NCCL's double binary tree would cost on the same link,
// as CSV for scripts/plot_scaling.py and docs/scaling.md.
//
//   scaling_model [--alpha SECONDS] [--beta SECONDS_PER_BYTE] [--gamma SECONDS_PER_BYTE]
//                 [--ranks 2,4,...] [--bytes 4096,...] [--per-host K]
//
// Defaults: InfiniBand HDR as published (200 Gb/s: beta = 1 / 25 GB/s; alpha = 2 us per
// message through MPI), a reduction at 8 GB/s; ranks 2 to 4096; 4 KiB, 1 MiB and 64 MiB;
// 4 ranks per host (ABCI's nodes), each with a port of its own, and shared memory inside the
// host at 1 us per wait and 10 GB/s per copy.
// The rows "two-level": what Chorus runs where the P ranks are P / K hosts of K
// (hierarchical_allreduce_cost), for P a multiple of K with two hosts or more; and
// "flat-shared-port": the flat choice where the K ranks of a host share one port (beta
// times K, as if every byte crossed the network: the flat algorithms' large early steps do),
// the common cluster node with one network card, and the fake hosts of run_bench_hosts.sh.
// The comparison rows, under the same alpha-beta-gamma model:
//   ring  2 (P - 1) messages of n / P, each rank combining n (P - 1) / P: MPI libraries'
//         large-message allreduce, and NCCL's ring;
//   tree  NCCL's double binary tree, pipelined: 2 log2 P messages in depth, each rank
//         sending about 2 n.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/cost_model.h"

namespace {

std::vector<double> parse_list(const std::string& s) {
  std::vector<double> out;
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t comma = s.find(',', at);
    out.push_back(std::atof(s.substr(at, comma - at).c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace chorus;
  LinkModel link;
  link.alpha_s = 2e-6;
  link.beta_s_per_byte = 1 / 25e9;
  link.gamma_s_per_byte = 1 / 8e9;
  LinkModel host;
  host.alpha_s = 1e-6;
  host.beta_s_per_byte = 1 / 10e9;
  host.gamma_s_per_byte = 1 / 8e9;
  int per_host = 4;
  std::vector<double> ranks, sizes = {4096, 1 << 20, 64 << 20};
  for (int p = 2; p <= 4096; p *= 2) {
    ranks.push_back(p);
    if (p >= 4 && p < 4096) ranks.push_back(p + p / 2);  // the odd and non-powers between
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const double v = std::atof(argv[i + 1]);
    if (a == "--alpha") {
      link.alpha_s = v;
    } else if (a == "--beta") {
      link.beta_s_per_byte = v;
    } else if (a == "--gamma") {
      link.gamma_s_per_byte = v;
    } else if (a == "--ranks") {
      ranks = parse_list(argv[i + 1]);
    } else if (a == "--bytes") {
      sizes = parse_list(argv[i + 1]);
    } else if (a == "--per-host" && v >= 1) {
      per_host = static_cast<int>(v);
    } else {
      std::fprintf(stderr,
                   "usage: scaling_model [--alpha S] [--beta S/B] [--gamma S/B] "
                   "[--ranks LIST] [--bytes LIST] [--per-host K]\n");
      return 2;
    }
  }
  std::printf("ranks,bytes,algorithm,rounds,messages,sent_bytes,seconds,chosen\n");
  const HostAlgorithm algorithms[] = {HostAlgorithm::kGatherAll, HostAlgorithm::kDirect,
                                      HostAlgorithm::kRecursiveDoubling,
                                      HostAlgorithm::kHalvingDoubling};
  for (double pd : ranks) {
    const int p = static_cast<int>(pd);
    for (double nd : sizes) {
      const int64_t n = static_cast<int64_t>(nd);
      const HostAlgorithm chosen = choose_allreduce(p, n, link);
      for (HostAlgorithm a : algorithms) {
        const Cost c = allreduce_cost(a, p, n, link);
        std::printf("%d,%lld,%s,%d,%lld,%lld,%.9g,%d\n", p, static_cast<long long>(n),
                    kHostAlgorithmWords.name(a), c.rounds, static_cast<long long>(c.messages),
                    static_cast<long long>(c.bytes), c.seconds, a == chosen ? 1 : 0);
      }
      if (p % per_host == 0 && p / per_host >= 2) {
        const Cost c = hierarchical_allreduce_cost(p / per_host, per_host, n, link, host);
        std::printf("%d,%lld,two-level,%d,%lld,%lld,%.9g,0\n", p, static_cast<long long>(n),
                    c.rounds, static_cast<long long>(c.messages), static_cast<long long>(c.bytes),
                    c.seconds);
        LinkModel shared = link;
        shared.beta_s_per_byte *= per_host;
        const Cost f = allreduce_cost(choose_allreduce(p, n, shared), p, n, shared);
        std::printf("%d,%lld,flat-shared-port,%d,%lld,%lld,%.9g,0\n", p, static_cast<long long>(n),
                    f.rounds, static_cast<long long>(f.messages), static_cast<long long>(f.bytes),
                    f.seconds);
      }
      const double ring_bytes = 2.0 * (p - 1) / p * static_cast<double>(n);
      const double ring = link.alpha_s * 2 * (p - 1) + link.beta_s_per_byte * ring_bytes +
                          link.gamma_s_per_byte * (p - 1.0) / p * static_cast<double>(n);
      std::printf("%d,%lld,ring,%d,%d,%.0f,%.9g,0\n", p, static_cast<long long>(n), 2 * (p - 1),
                  2 * (p - 1), ring_bytes, ring);
      const int depth = 2 * ceil_log2(p);
      const double tree = link.alpha_s * depth +
                          link.beta_s_per_byte * 2.0 * static_cast<double>(n) +
                          link.gamma_s_per_byte * static_cast<double>(n);
      std::printf("%d,%lld,tree,%d,%d,%.0f,%.9g,0\n", p, static_cast<long long>(n), depth, depth,
                  2.0 * static_cast<double>(n), tree);
    }
  }
  return 0;
}
