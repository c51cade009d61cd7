// map_probe: run under any launcher; checks on every rank that the map Chorus computed
// agrees with one computed here, independently, from the host names that the ranks
// exchange through a Chorus allreduce, and that an allreduce across all ranks (hosts) is
// right. With CHORUS_BIND set it also checks the binding: ranks of one host on disjoint
// CPUs, the background thread inside its process's CPUs (any number of CPUs). Prints one line per
// rank
//
//   chorus-map rank=3 size=4 host=h2 local_rank=1 local_size=2 cross_rank=1 cross_size=2 ...
//
// for the harness to compare with the layout it asked the launcher for. Exits non-zero on
// any disagreement. Output goes to stderr: after MPI_Finalize the launcher may not
// forward a buffered stdout.
#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

constexpr int kName = 64;  // bytes per host name slot

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

// A CPU mask as a string of '0'/'1', one per CPU, long enough for every CPU of this host:
// cpu_set_t covers only CPU_SETSIZE (1024) CPUs, so the set is allocated with CPU_ALLOC
// and grown until sched_getaffinity accepts it.
struct Affinity {
  std::string bits;
  std::string error;  // empty when read
};

Affinity affinity_of(pid_t tid) {
  long conf = sysconf(_SC_NPROCESSORS_CONF);
  int n = std::max<int>(CPU_SETSIZE, conf > 0 ? static_cast<int>(conf) : 0);
  for (;; n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (!set) return {"", "CPU_ALLOC(" + std::to_string(n) + ") failed"};
    const std::size_t bytes = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(tid, bytes, set) == 0) {
      Affinity a{std::string(static_cast<std::size_t>(n), '0'), ""};
      for (int c = 0; c < n; ++c) {
        if (CPU_ISSET_S(c, bytes, set)) a.bits[c] = '1';
      }
      CPU_FREE(set);
      return a;
    }
    const int err = errno;
    CPU_FREE(set);
    if (err != EINVAL || n > (1 << 20)) {
      return {"", "sched_getaffinity(" + std::to_string(tid) + "): " + std::strerror(err)};
    }
  }
}

std::string cpu_list(const std::string& bits) {
  std::string out;
  for (std::size_t c = 0; c < bits.size(); ++c) {
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

// The largest of every rank's `value` (collective).
StatusOr<int> max_over_ranks(const std::string& name, int value) {
  int32_t v = value;
  TensorRef t{&v, DataType::kInt32, {1}, Device::cpu()};
  AllreduceOptions o;
  o.op = ReduceOp::kMax;
  if (Status s = allreduce(name, t, t, o).wait(); !s.ok()) return s;
  return static_cast<int>(v);
}

// With CHORUS_BIND=core|numa: this rank's CPUs do not overlap those of the other ranks on
// its host, and the background thread runs inside them. Masks are padded to the widest
// host's so that every rank exchanges rows of the same width.
int check_binding(const std::vector<std::string>& hosts, std::string mine, std::string bg) {
  StatusOr<int> width = max_over_ranks("probe.cpu_count", static_cast<int>(mine.size()));
  if (!width.ok()) return fail(width.status().to_string());
  mine.resize(static_cast<std::size_t>(*width), '0');
  bg.resize(mine.size(), '0');
  StatusOr<std::vector<std::string>> all = exchange("probe.cpus", mine, *width + 1);
  if (!all.ok()) return fail(all.status().to_string());
  int bad = 0;
  for (int q = 0; q < size(); ++q) {
    if (q == rank() || hosts[q] != hosts[rank()]) continue;
    for (std::size_t c = 0; c < mine.size(); ++c) {
      if (mine[c] == '1' && (*all)[q][c] == '1') {
        bad += fail("CPU " + std::to_string(c) + " is also bound to rank " + std::to_string(q));
      }
    }
  }
  for (std::size_t c = 0; c < mine.size(); ++c) {
    if (bg[c] == '1' && mine[c] != '1') {
      bad += fail("chorus-bg runs on CPU " + std::to_string(c) + ", outside the process's CPUs");
    }
  }
  if (mine.find('1') == std::string::npos) bad += fail("no CPUs in the process's binding");
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
  const Affinity proc = affinity_of(0);
  if (!proc.error.empty()) bad += fail(proc.error);
  const pid_t bg = background_thread();
  if (bg < 0) bad += fail("no thread named chorus-bg");
  Affinity bgset;
  if (bg >= 0) bgset = affinity_of(bg);
  if (!bgset.error.empty()) bad += fail(bgset.error);
  const char* bind = std::getenv("CHORUS_BIND");
  const std::string mode = bind ? bind : "none";
  if (hosts.ok() && mode != "none") bad += check_binding(*hosts, proc.bits, bgset.bits);
  std::fprintf(stderr,
               "chorus-map rank=%d size=%d host=%s local_rank=%d local_size=%d cross_rank=%d "
               "cross_size=%d bind=%s cpus=%s bg_cpus=%s %s\n",
               rank(), size(), host, local_rank(), local_size(), cross_rank(), cross_size(),
               mode.c_str(), cpu_list(proc.bits).c_str(), cpu_list(bgset.bits).c_str(),
               bad ? "FAIL" : "ok");
  if (Status s = shutdown(); !s.ok()) bad += fail(s.to_string());
  return bad ? 1 : 0;
}
