// map_probe: run under any launcher; checks on every rank that the map Chorus computed
// agrees with one computed here, independently, from the host names that the ranks
// exchange through a Chorus allreduce, and that an allreduce across all ranks (hosts) is
// right. With CHORUS_BIND set it also checks the binding: ranks of one host on disjoint
// CPUs, the background thread inside its process's CPUs. Prints one line per rank
//
//   chorus-map rank=3 size=4 host=h2 local_rank=1 local_size=2 cross_rank=1 cross_size=2 ...
//
// for the harness to compare with the layout it asked the launcher for. Exits non-zero on
// any disagreement. Output goes to stderr: after MPI_Finalize the launcher may not
// forward a buffered stdout.
#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "chorus/chorus.h"

namespace {

using namespace chorus;

constexpr int kName = 64;   // bytes per host name slot
constexpr int kCpus = 256;  // CPUs covered by the binding check

int fail(const std::string& what) {
  std::fprintf(stderr, "map_probe: FAIL on rank %d: %s\n", rank(), what.c_str());
  return 1;
}

Status sum_u8(const std::string& name, std::vector<uint8_t>& v) {
  TensorRef t{v.data(), DataType::kUInt8, {static_cast<int64_t>(v.size())}, Device::cpu()};
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  return allreduce(name, t, t, o).wait();
}

// Every rank's row of `width` bytes, exchanged by summing rows that are zero elsewhere.
StatusOr<std::vector<std::string>> exchange(const std::string& name, const std::string& mine,
                                            int width) {
  std::vector<uint8_t> all(static_cast<std::size_t>(size()) * width, 0);
  std::memcpy(all.data() + static_cast<std::size_t>(rank()) * width, mine.data(),
              std::min<std::size_t>(mine.size(), width - 1));
  if (Status s = sum_u8(name, all); !s.ok()) return s;
  std::vector<std::string> rows;
  for (int r = 0; r < size(); ++r) {
    const char* p = reinterpret_cast<const char*>(all.data()) + static_cast<std::size_t>(r) * width;
    rows.emplace_back(p, strnlen(p, width));
  }
  return rows;
}

std::string cpu_string(const cpu_set_t& set) {
  std::string s(kCpus, '0');
  for (int c = 0; c < kCpus; ++c) {
    if (CPU_ISSET(c, &set)) s[c] = '1';
  }
  return s;
}

std::string cpu_list(const std::string& bits) {
  std::string out;
  for (int c = 0; c < kCpus; ++c) {
    if (bits[c] == '1') out += (out.empty() ? "" : ",") + std::to_string(c);
  }
  return out;
}

// The thread named chorus-bg, found through /proc; -1 if there is none.
pid_t background_thread() {
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return -1;
  pid_t found = -1;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "chorus-bg") found = static_cast<pid_t>(std::atoi(e->d_name));
  }
  closedir(dir);
  return found;
}

int check_map(const std::vector<std::string>& hosts) {
  const int r = rank(), n = size();
  int local = 0, local_n = 0;
  for (int q = 0; q < n; ++q) {
    if (hosts[q] == hosts[r]) {
      local_n++;
      if (q < r) local++;
    }
  }
  // Hosts in order of their lowest rank.
  std::vector<std::string> order;
  for (int q = 0; q < n; ++q) {
    bool seen = false;
    for (const std::string& h : order) seen = seen || h == hosts[q];
    if (!seen) order.push_back(hosts[q]);
  }
  int cross = 0;
  while (order[cross] != hosts[r]) ++cross;
  auto expect = [&](const char* what, int got, int want) {
    if (got == want) return 0;
    return fail(std::string(what) + " is " + std::to_string(got) + ", expected " +
                std::to_string(want));
  };
  return expect("local_rank", local_rank(), local) + expect("local_size", local_size(), local_n) +
         expect("cross_rank", cross_rank(), cross) +
         expect("cross_size", cross_size(), static_cast<int>(order.size()));
}

int check_allreduce() {
  // Large enough for the reduce-scatter path (above 64 KiB per rank).
  std::vector<float> v(1 << 16);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(rank() + 1 + (i % 7));
  TensorRef t{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, Device::cpu()};
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  if (Status s = allreduce("probe.allreduce", t, t, o).wait(); !s.ok()) return fail(s.to_string());
  const int n = size();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const float want = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7));
    if (v[i] != want) {
      return fail("allreduce element " + std::to_string(i) + " is " + std::to_string(v[i]) +
                  ", expected " + std::to_string(want));
    }
  }
  return 0;
}

// With CHORUS_BIND=core|numa: this rank's CPUs do not overlap those of the other ranks on
// its host (core), and the background thread runs inside them.
int check_binding(const std::vector<std::string>& hosts, const std::string& mine,
                  const std::string& bg, bool disjoint) {
  StatusOr<std::vector<std::string>> all = exchange("probe.cpus", mine, kCpus + 1);
  if (!all.ok()) return fail(all.status().to_string());
  int bad = 0;
  for (int q = 0; q < size(); ++q) {
    if (q == rank() || hosts[q] != hosts[rank()]) continue;
    for (int c = 0; c < kCpus && disjoint; ++c) {
      if (mine[c] == '1' && (*all)[q][c] == '1') {
        bad += fail("CPU " + std::to_string(c) + " is also bound to rank " + std::to_string(q));
      }
    }
  }
  for (int c = 0; c < kCpus; ++c) {
    if (bg[c] == '1' && mine[c] != '1') {
      bad += fail("chorus-bg runs on CPU " + std::to_string(c) + ", outside the process's CPUs");
    }
  }
  if (mine == std::string(kCpus, '0')) bad += fail("no CPUs in the process's binding");
  return bad;
}

}  // namespace

int main() {
  if (Status s = init(); !s.ok()) {
    std::fprintf(stderr, "map_probe: init failed: %s\n", s.to_string().c_str());
    return 2;
  }
  char host[kName] = {0};
  gethostname(host, sizeof(host) - 1);
  int bad = 0;
  StatusOr<std::vector<std::string>> hosts = exchange("probe.hosts", host, kName);
  if (!hosts.ok()) {
    bad += fail(hosts.status().to_string());
  } else {
    bad += check_map(*hosts);
    bad += check_allreduce();
  }
  cpu_set_t proc, bgset;
  CPU_ZERO(&proc);
  CPU_ZERO(&bgset);
  sched_getaffinity(0, sizeof(proc), &proc);
  const pid_t bg = background_thread();
  if (bg < 0) bad += fail("no thread named chorus-bg");
  if (bg >= 0) sched_getaffinity(bg, sizeof(bgset), &bgset);
  const char* bind = std::getenv("CHORUS_BIND");
  const std::string mode = bind ? bind : "none";
  if (hosts.ok() && mode != "none") {
    bad += check_binding(*hosts, cpu_string(proc), cpu_string(bgset), mode == "core");
  }
  std::fprintf(stderr,
               "chorus-map rank=%d size=%d host=%s local_rank=%d local_size=%d cross_rank=%d "
               "cross_size=%d bind=%s cpus=%s bg_cpus=%s %s\n",
               rank(), size(), host, local_rank(), local_size(), cross_rank(), cross_size(),
               mode.c_str(), cpu_list(cpu_string(proc)).c_str(),
               cpu_list(cpu_string(bgset)).c_str(), bad ? "FAIL" : "ok");
  if (Status s = shutdown(); !s.ok()) bad += fail(s.to_string());
  return bad ? 1 : 0;
}
