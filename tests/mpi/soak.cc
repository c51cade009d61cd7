// A long gradient-shaped run that checks Chorus holds no growing resources: per step, a
// model's gradients (a few large tensors, many small) allreduced asynchronously in reverse
// layer order, then waited; every few dozen steps an allgather or a broadcast; now and then
// a process set created, used and removed. Every result is checked.
//
//   soak [--steps N] [--sample-every K] [--warmup W] [--rss-tolerance-kib T] [--large N]
//
// Every K steps each rank samples its resident memory (/proc/self/statm), open fds
// (/proc/self/fd), threads (/proc/self/task) and shared memory (files in /dev/shm that
// carry its pid, as Chorus's segments do, and mappings of /dev/shm in /proc/self/maps);
// rank 0 prints every rank's samples. Samples from step W on must stay flat: fds, threads
// and shared memory exactly equal to the first of them, resident memory within T KiB.
// No check depends on time. Exit code 0 when every result and every sample passed on every
// rank.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "chorus/chorus.h"

namespace {

using namespace chorus;

struct Args {
  int64_t steps = 2000;
  int64_t sample_every = 250;
  int64_t warmup = 500;
  // Resident memory may still rise by a few pages after the warm-up without leaking: the
  // heap in use grows to a plateau, reached only after tens of thousands of steps (pools
  // growing to the most work ever in flight; docs/performance.md, "Soak", has the figures).
  // 2 MiB is far above that and still catches, within CI's 600 checked steps, a leak of
  // 4 KiB per step: 44 bytes per allreduce of the 80 gradients.
  int64_t rss_tolerance_kib = 2048;
  int64_t large = 262144;  // elements of each of the four largest gradients (1 MiB)
};

bool parse(int argc, char** argv, Args* a) {
  const std::pair<const char*, int64_t*> flags[] = {{"--steps", &a->steps},
                                                    {"--sample-every", &a->sample_every},
                                                    {"--warmup", &a->warmup},
                                                    {"--rss-tolerance-kib", &a->rss_tolerance_kib},
                                                    {"--large", &a->large}};
  for (int i = 1; i + 1 < argc; i += 2) {
    auto f = std::find_if(std::begin(flags), std::end(flags),
                          [&](const auto& f) { return std::strcmp(f.first, argv[i]) == 0; });
    if (f == std::end(flags)) return false;
    *f->second = std::strtoll(argv[i + 1], nullptr, 10);
  }
  return argc % 2 == 1 && a->sample_every > 0 && a->steps > 0;
}

// ---- Resources of this process. -------------------------------------------------------------

int64_t count_entries(const char* dir, const std::string& containing = "") {
  DIR* d = opendir(dir);
  if (!d) return -1;
  int64_t n = 0;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (containing.empty() || name.find(containing) != std::string::npos) ++n;
  }
  closedir(d);
  return n - (std::string(dir) == "/proc/self/fd" ? 1 : 0);  // the fd opendir holds
}

int64_t rss_kib() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int64_t shm_mappings() {
  std::ifstream maps("/proc/self/maps");
  int64_t n = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/dev/shm/") != std::string::npos) ++n;
  }
  return n;
}

constexpr int kFields = 5;
const char* const kFieldNames[kFields] = {"rss_kib", "fds", "threads", "shm_files", "shm_maps"};

struct Sample {
  int64_t v[kFields];
};

Sample sample() {
  // Files that other jobs on this host keep in /dev/shm are not this job's business: only
  // names carrying this rank's pid count ("/chorus-<what>-<pid>-<n>").
  const std::string pid = "-" + std::to_string(getpid()) + "-";
  return {{rss_kib(), count_entries("/proc/self/fd"), count_entries("/proc/self/task"),
           count_entries("/dev/shm", pid), shm_mappings()}};
}

// ---- The workload. --------------------------------------------------------------------------

TensorRef ref(std::vector<float>& v) {
  return TensorRef{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, Device::cpu()};
}

// A model's gradients, as a trainer's backward pass produces them: per layer a weight and
// a bias; a few weights large, most small.
std::vector<std::vector<float>> make_gradients(int64_t large) {
  std::vector<std::vector<float>> g;
  for (int layer = 0; layer < 40; ++layer) {
    const int64_t weight = layer % 10 == 0 ? large : layer % 4 == 1 ? 32768 : 1024 + 97 * layer;
    g.emplace_back(static_cast<std::size_t>(weight));
    g.emplace_back(static_cast<std::size_t>(64 + 16 * layer));
  }
  return g;
}

int fail(int64_t step, const std::string& what) {
  std::fprintf(stderr, "soak: rank %d step %" PRId64 ": %s\n", rank(), step, what.c_str());
  return 1;
}

// One training step: fill, allreduce every gradient last layer first, wait, check.
int step_gradients(int64_t step, std::vector<std::vector<float>>& grads) {
  const int n = size(), me = rank();
  const float mine = static_cast<float>(me + 1 + step % 7);
  const float want = static_cast<float>(n * (n + 1) / 2 + n * (step % 7));
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  std::vector<Handle> handles;
  for (std::size_t k = grads.size(); k-- > 0;) {
    std::fill(grads[k].begin(), grads[k].end(), mine);
    handles.push_back(allreduce("grad." + std::to_string(k), ref(grads[k]), ref(grads[k]), o));
  }
  for (Handle& h : handles) {
    if (Status s = h.wait(); !s.ok()) return fail(step, s.to_string());
  }
  for (std::size_t k = 0; k < grads.size(); ++k) {
    const std::vector<float>& g = grads[k];
    for (std::size_t i : {std::size_t{0}, g.size() / 2, g.size() - 1}) {
      if (g[i] != want) {
        return fail(step, "grad." + std::to_string(k) + "[" + std::to_string(i) +
                              "] = " + std::to_string(g[i]) + ", expected " + std::to_string(want));
      }
    }
  }
  return 0;
}

// Every 50 steps: an allgather of per-rank metrics (rank r sends r + 1 rows).
int gather_metrics(int64_t step) {
  const int n = size(), me = rank();
  std::vector<float> rows(static_cast<std::size_t>(me + 1) * 4, static_cast<float>(me));
  TensorRef t{rows.data(), DataType::kFloat32, {me + 1, 4}, Device::cpu()};
  Handle h = allgather("metrics", t);
  if (Status s = h.wait(); !s.ok()) return fail(step, "allgather: " + s.to_string());
  const auto* out = static_cast<const float*>(h.output().data);
  int64_t at = 0;
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < (r + 1) * 4; ++i, ++at) {
      if (out[at] != static_cast<float>(r))
        return fail(step, "allgather: wrong row from " + std::to_string(r));
    }
  }
  return 0;
}

// Every 100 steps: parameters broadcast from a rotating root.
int broadcast_parameters(int64_t step) {
  const int root = static_cast<int>((step / 100) % size());
  std::vector<float> p(4096, static_cast<float>(rank() * 1000 + step % 1000));
  if (Status s = broadcast("parameters", ref(p), root).wait(); !s.ok())
    return fail(step, "broadcast: " + s.to_string());
  const float want = static_cast<float>(root * 1000 + step % 1000);
  if (p.front() != want || p.back() != want) return fail(step, "broadcast: wrong value");
  return 0;
}

// Every 500 steps: a process set of all ranks but the last (all, on fewer than 3 ranks)
// created, used for one allreduce, and removed.
int churn_process_set(int64_t step) {
  std::vector<int> ranks;
  for (int r = 0; r < std::max(size() - 1, std::min(size(), 2)); ++r) ranks.push_back(r);
  StatusOr<ProcessSet> set = add_process_set(ranks);
  if (!set.ok()) return fail(step, "add_process_set: " + set.status().to_string());
  if (process_set_rank(*set) >= 0) {
    std::vector<float> v(1000, 1.0f);
    AllreduceOptions o;
    o.op = ReduceOp::kSum;
    o.process_set = *set;
    if (Status s = allreduce("in.set", ref(v), ref(v), o).wait(); !s.ok())
      return fail(step, "allreduce in set: " + s.to_string());
    if (v[999] != static_cast<float>(ranks.size()))
      return fail(step, "allreduce in set: wrong sum");
  }
  if (Status s = remove_process_set(*set); !s.ok())
    return fail(step, "remove_process_set: " + s.to_string());
  return 0;
}

// Gathers every rank's sample on every rank (rank order).
StatusOr<std::vector<Sample>> gather_samples(const Sample& mine) {
  Sample copy = mine;
  TensorRef t{copy.v, DataType::kInt64, {1, kFields}, Device::cpu()};
  Handle h = allgather("soak.sample", t);
  if (Status s = h.wait(); !s.ok()) return s;
  std::vector<Sample> all(static_cast<std::size_t>(size()));
  std::memcpy(all.data(), h.output().data, all.size() * sizeof(Sample));
  return all;
}

// Checks a sample against the first one after the warm-up; prints what moved.
int check_flat(int64_t step, const Sample& base, const Sample& now, int64_t rss_tolerance_kib) {
  int bad = 0;
  for (int f = 0; f < kFields; ++f) {
    const int64_t moved = now.v[f] - base.v[f];
    const bool ok = f == 0 ? moved <= rss_tolerance_kib : moved == 0;
    if (!ok) {
      bad = fail(step, std::string(kFieldNames[f]) + " went from " + std::to_string(base.v[f]) +
                           " to " + std::to_string(now.v[f]) + " after the warm-up");
    }
  }
  return bad;
}

// Whether every rank passed (a max of the failure flags over the global set).
bool all_ok(int failed) {
  int32_t flag = failed ? 1 : 0;
  TensorRef t{&flag, DataType::kInt32, {1}, Device::cpu()};
  AllreduceOptions o;
  o.op = ReduceOp::kMax;
  return allreduce("soak.verdict", t, t, o).wait().ok() && flag == 0;
}

int run(const Args& a) {
  const int me = rank(), n = size();
  auto grads = make_gradients(a.large);
  if (me == 0) {
    int64_t floats = 0;
    for (const auto& g : grads) floats += static_cast<int64_t>(g.size());
    std::fprintf(stderr,
                 "soak: %d ranks, %" PRId64
                 " steps of %zu gradients (%.2f MiB), samples every %" PRId64
                 " steps, flat from step %" PRId64 ", RSS tolerance %" PRId64 " KiB\n",
                 n, a.steps, grads.size(), floats * 4.0 / (1 << 20), a.sample_every, a.warmup,
                 a.rss_tolerance_kib);
    std::fprintf(stderr, "soak: step rank rss_kib fds threads shm_files shm_maps\n");
  }
  const auto start = std::chrono::steady_clock::now();
  bool have_base = false;
  Sample base{};
  int failed = 0;
  for (int64_t step = 0; step <= a.steps && !failed; ++step) {
    if (step % a.sample_every == 0 || step == a.steps) {
      const Sample now = sample();
      StatusOr<std::vector<Sample>> all = gather_samples(now);
      if (!all.ok()) return fail(step, "sample allgather: " + all.status().to_string());
      if (me == 0) {
        for (int r = 0; r < n; ++r) {
          const Sample& s = (*all)[static_cast<std::size_t>(r)];
          std::fprintf(stderr,
                       "soak: %" PRId64 " %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64
                       " %" PRId64 "\n",
                       step, r, s.v[0], s.v[1], s.v[2], s.v[3], s.v[4]);
        }
      }
      if (step >= a.warmup && !have_base) {
        base = now;
        have_base = true;
      } else if (have_base) {
        failed |= check_flat(step, base, now, a.rss_tolerance_kib);
      }
      if (!all_ok(failed)) failed = 1;
    }
    if (step == a.steps || failed) break;
    failed |= step_gradients(step, grads);
    if (!failed && step % 50 == 25) failed |= gather_metrics(step);
    if (!failed && step % 100 == 75) failed |= broadcast_parameters(step);
    if (!failed && step % 500 == 499) failed |= churn_process_set(step);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (failed) {
    if (me == 0) std::fprintf(stderr, "soak: FAILED\n");
    return 1;
  }
  if (!have_base) return fail(a.steps, "no sample after the warm-up: nothing was checked");
  if (me == 0) {
    std::fprintf(stderr, "soak: ok, %" PRId64 " steps in %.1f s (%.2f ms per step; not checked)\n",
                 a.steps, seconds, seconds * 1000 / static_cast<double>(a.steps));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: soak [--steps N] [--sample-every K] [--warmup W] [--rss-tolerance-kib T] "
                 "[--large N]\n");
    return 2;
  }
  if (Status s = init(); !s.ok()) {
    std::fprintf(stderr, "chorus::init failed: %s\n", s.to_string().c_str());
    return 2;
  }
  const int rc = run(args);
  if (Status s = shutdown(); !s.ok()) {
    std::fprintf(stderr, "chorus::shutdown failed: %s\n", s.to_string().c_str());
    return rc ? rc : 3;
  }
  return rc;
}
