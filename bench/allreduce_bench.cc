// allreduce_bench: Chorus's allreduce against raw MPI done the best way, in the same run.
//
// Every rank runs the same sequence; rank 0 prints Markdown tables meant for the README.
// Method: before each timed iteration an MPI_Barrier; an iteration's time is the slowest
// rank's (MPI_Allreduce MAX of the local elapsed time); a row reports the median over the
// repetitions. The methods of a case are interleaved iteration by iteration, in a rotating
// order, so that a noisy neighbour on a shared machine hits all of them alike. Warm-up
// iterations come first: Chorus's first use of a name negotiates through the coordinator,
// later ones hit the response cache, and the steady state is what a training loop sees.
//
// Raw MPI runs on MPI_COMM_WORLD from the main thread while Chorus's background thread runs
// its idle rounds on its own communicators, as it would beside a trainer that calls MPI.
//
// Every iteration checks one element of its result against the exact expected sum (inputs
// are small integers, so float32 sums are exact): a broken runtime aborts the run instead of
// printing a fast number.
//
// Usage (run_bench.sh runs it under mpirun):
//   allreduce_bench [--reps N] [--cases 1,2,3,4] [--idle-cpu SECONDS] [--threshold-sweep]

#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
// The public API does not expose the effective configuration; Config::load reads the same
// Options and environment that init() reads, so the header can name the threshold in use.
#include "core/config.h"
#include "handoff_floor.h"
#include "harness.h"

namespace chorus::bench {
namespace {

using Clock = std::chrono::steady_clock;

// With the default repetitions a 2-rank run on the 2-core development machine takes half a
// minute when the machine is quiet, about two minutes under a heavy neighbouring load.
constexpr int kDefaultReps = 40;
constexpr int kWarmup = 3;
// The latency case is cheap and noisy: it runs this many times the repetitions.
constexpr int kLatencyRepsFactor = 25;
// 64 MiB iterations are long: half the repetitions, at least 3.
int large_reps(int reps) { return std::max(3, reps / 2); }

struct Args {
  int reps = kDefaultReps;
  std::vector<int> cases;  // empty: the mode's default
  bool threshold_sweep = false;
  double idle_cpu_seconds = 0;
};

struct World {
  int rank = 0;
  int size = 1;
};

// ---------------------------------------------------------------------------------------
// Inputs and expected results. Rank r holds (r + 1) * pattern(i), pattern in 1..8, so the
// sum over n ranks is pattern(i) * n(n+1)/2: a small integer, exact in float32.

float pattern(int64_t i) { return static_cast<float>(1 + i % 8); }

void fill(float* p, int64_t n, const World& w, int64_t salt = 0) {
  const float scale = static_cast<float>(w.rank + 1);
  for (int64_t i = 0; i < n; ++i) p[i] = scale * pattern(i + salt);
}

// n(n+1)/2: the sum of (r + 1) over the ranks; exact, n(n+1) is even.
float rank_sum(const World& w) {
  const int sum = w.size * (w.size + 1) / 2;
  return static_cast<float>(sum);
}

float expected(int64_t i, const World& w, int64_t salt = 0) {
  return pattern(i + salt) * rank_sum(w);
}

// Fails the run when `got` is not the expected sum.
void verify(float got, float want, const std::string& method, int64_t element) {
  if (got != want) {
    die("wrong result from " + method + ": element " + std::to_string(element) + " is " +
        std::to_string(got) + ", expected " + std::to_string(want));
  }
}

chorus::TensorRef tensor(float* p, int64_t n) {
  chorus::TensorRef t;
  t.data = p;
  t.dtype = chorus::DataType::kFloat32;
  t.shape = {n};
  return t;
}

chorus::AllreduceOptions sum_options() {
  chorus::AllreduceOptions o;
  o.op = chorus::ReduceOp::kSum;
  return o;
}

// ---------------------------------------------------------------------------------------
// The cases. Each is collective and returns the rows rank 0 prints.

struct Case1Rows {
  int64_t bytes;
  std::vector<Result> results;  // raw, chorus in place, chorus out of place
};

Case1Rows case_single(const World& w, int64_t bytes, int reps) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> a(n), out(n);
  const int64_t at = n / 2 + 3;  // the element checked
  const std::string tag = "case1." + std::to_string(bytes);
  auto refill = [&] { fill(a.data(), n, w); };
  std::vector<Method> methods;
  methods.push_back({"raw MPI_Allreduce in place", refill,
                     [&] {
                       mpi_check(MPI_Allreduce(MPI_IN_PLACE, a.data(), static_cast<int>(n),
                                               MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                                 "MPI_Allreduce");
                     },
                     [&] { verify(a[at], expected(at, w), "raw MPI_Allreduce", at); }});
  methods.push_back({"chorus allreduce in place", refill,
                     [&] {
                       chorus::TensorRef t = tensor(a.data(), n);
                       chorus_check(chorus::allreduce(tag + ".in", t, t, sum_options()).wait(),
                                    "chorus allreduce in place");
                     },
                     [&] { verify(a[at], expected(at, w), "chorus in place", at); }});
  methods.push_back({"chorus allreduce out of place",
                     [&] {
                       refill();
                       out[at] = 0;  // a stale correct value must not pass the check
                     },
                     [&] {
                       chorus_check(chorus::allreduce(tag + ".out", tensor(a.data(), n),
                                                      tensor(out.data(), n), sum_options())
                                        .wait(),
                                    "chorus allreduce out of place");
                     },
                     [&] { verify(out[at], expected(at, w), "chorus out of place", at); }});
  return {bytes, measure(methods, kWarmup, reps)};
}

struct ManyRows {
  int count;
  int64_t elements;
  std::vector<Result> results;  // raw (a) fused, raw (b) separate, chorus
};

// `count` tensors of `elements` floats each, as separate allocations like a model's
// gradients. Chorus submits them all with distinct stable names, then waits for all.
ManyRows case_many(const World& w, int count, int64_t elements, int reps) {
  std::vector<std::vector<float>> t(count, std::vector<float>(elements));
  std::vector<float> fused(static_cast<std::size_t>(count) * elements);
  std::vector<std::string> names;
  names.reserve(count);
  for (int i = 0; i < count; ++i) {
    names.push_back("many." + std::to_string(count) + "x" + std::to_string(elements) + "." +
                    std::to_string(i));
  }
  std::vector<chorus::Handle> handles(count);
  const std::size_t bytes = static_cast<std::size_t>(elements) * sizeof(float);
  const int n = static_cast<int>(elements);
  auto refill = [&] {
    for (int i = 0; i < count; ++i) fill(t[i].data(), elements, w, i);
  };
  // Checks one element of one tensor, a different one each iteration.
  int64_t checks = 0;
  auto check = [&](const char* method) {
    ++checks;
    const int i = static_cast<int>((checks * 7919) % count);
    const int64_t e = (checks * 104729) % elements;
    verify(t[i][e], expected(e, w, i), method, e);
  };
  std::vector<Method> methods;
  methods.push_back(
      {"raw (a): pack + 1 MPI_Allreduce + unpack", refill,
       [&] {
         for (int i = 0; i < count; ++i) {
           std::memcpy(fused.data() + static_cast<std::size_t>(i) * elements, t[i].data(), bytes);
         }
         mpi_check(MPI_Allreduce(MPI_IN_PLACE, fused.data(), static_cast<int>(fused.size()),
                                 MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                   "MPI_Allreduce(fused)");
         for (int i = 0; i < count; ++i) {
           std::memcpy(t[i].data(), fused.data() + static_cast<std::size_t>(i) * elements, bytes);
         }
       },
       [&] { check("raw (a)"); }});
  methods.push_back({"raw (b): " + std::to_string(count) + " x MPI_Allreduce in place", refill,
                     [&] {
                       for (int i = 0; i < count; ++i) {
                         mpi_check(MPI_Allreduce(MPI_IN_PLACE, t[i].data(), n, MPI_FLOAT, MPI_SUM,
                                                 MPI_COMM_WORLD),
                                   "MPI_Allreduce");
                       }
                     },
                     [&] { check("raw (b)"); }});
  methods.push_back({"chorus: " + std::to_string(count) + " async allreduce in place, wait all",
                     refill,
                     [&] {
                       for (int i = 0; i < count; ++i) {
                         chorus::TensorRef ref = tensor(t[i].data(), elements);
                         handles[i] = chorus::allreduce(names[i], ref, ref, sum_options());
                       }
                       for (int i = 0; i < count; ++i) {
                         chorus_check(handles[i].wait(), "chorus allreduce '" + names[i] + "'");
                       }
                     },
                     [&] { check("chorus"); }});
  return {count, elements, measure(methods, kWarmup, reps)};
}

std::vector<Result> case_latency(const World& w, int reps) {
  float x = 0;
  auto reset = [&] { x = static_cast<float>(w.rank + 1); };
  const float want = rank_sum(w);
  std::vector<Method> methods;
  methods.push_back({"raw MPI_Allreduce (1 float)", reset,
                     [&] {
                       mpi_check(
                           MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                           "MPI_Allreduce");
                     },
                     [&] { verify(x, want, "raw latency", 0); }});
  methods.push_back({"chorus allreduce + wait (1 float)", reset,
                     [&] {
                       chorus::TensorRef t = tensor(&x, 1);
                       chorus_check(chorus::allreduce("latency", t, t, sum_options()).wait(),
                                    "chorus allreduce 'latency'");
                     },
                     [&] { verify(x, want, "chorus latency", 0); }});
  HandoffFloor floor;
  methods.push_back({"floor, not Chorus: hand-off to a 2nd thread + 2 MPI_Iallreduce", reset,
                     [&] { floor.allreduce(&x); }, [&] { verify(x, want, "floor latency", 0); }});
  return measure(methods, 10 * kWarmup, reps);
}

struct IdleCpu {
  double max = 0;
  double mean = 0;
  std::vector<double> per_rank;
};

// CPU time of the whole process (Chorus's background thread included) over wall time while
// the program sleeps, as a fraction of one core. Collective.
IdleCpu idle_cpu(const World& w, double seconds) {
  auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const double cpu0 = cpu_seconds();
  const Clock::time_point t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double fraction = (cpu_seconds() - cpu0) / wall;
  IdleCpu r;
  r.per_rank.resize(w.size);
  mpi_check(
      MPI_Gather(&fraction, 1, MPI_DOUBLE, r.per_rank.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD),
      "MPI_Gather");
  for (double f : r.per_rank) {
    r.max = std::max(r.max, f);
    r.mean += f / w.size;
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// Reports (rank 0).

// The global set's fusion threshold under `options`: the job is across hosts when some host
// lacks a rank.
int64_t threshold_of(const World& w, const chorus::Options& options) {
  chorus::StatusOr<chorus::Config> c = chorus::Config::load(options);
  return c.ok() ? c->fusion_threshold_for(chorus::local_size() < w.size) : -1;
}

void print_header(const World& w, const Args& args, const chorus::Options& options) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string lib(version, strnlen(version, sizeof version));
  lib = lib.substr(0, lib.find_first_of(",\n"));
  const chorus::StatusOr<chorus::Config> config = chorus::Config::load(options);
  const bool across_hosts = chorus::local_size() < w.size;
  const int64_t threshold = threshold_of(w, options);
  const bool automatic = config.ok() && !config->fusion_threshold_bytes;
  std::printf("# Chorus allreduce vs raw MPI\n\n");
  std::printf("- np = %d (%d local), %s, %u hardware threads on this host\n", w.size,
              chorus::local_size(), lib.c_str(), std::thread::hardware_concurrency());
  std::printf("- CHORUS_HOST_ALGORITHM=%s (sets across hosts; on one host shared memory)\n",
              config.ok() ? chorus::kHostAlgorithmWords.name(config->host_algorithm) : "?");
  if (args.threshold_sweep) {
    std::printf("- reps = %d per threshold, %d warm-up iterations first\n", args.reps, kWarmup);
  } else {
    std::printf("- reps = %d (64 MiB: %d; latency: %d), %d warm-up iterations first\n", args.reps,
                large_reps(args.reps), args.reps * kLatencyRepsFactor, kWarmup);
  }
  std::printf(
      "- Chorus fusion threshold: %s%s (Options::fusion_threshold_bytes, else "
      "CHORUS_FUSION_THRESHOLD, else the default)%s\n",
      threshold > 0 ? fmt_bytes(threshold).c_str() : "0 (fusion off)",
      automatic
          ? (across_hosts ? ", auto: the default across hosts" : ", auto: the default on one host")
          : "",
      args.threshold_sweep ? "; the sweep sets it per row" : "");
  std::printf("- host load average (1 min) at start: %.2f\n", load_average());
  std::printf(
      "- time = median over reps of the slowest rank's iteration (MPI_Barrier before "
      "each); methods interleaved; every iteration's result checked\n\n");
}

void print_idle(const IdleCpu& idle, double seconds) {
  std::printf("## Idle CPU: Chorus initialized, program asleep %.0f s\n\n", seconds);
  std::printf("| rank | process CPU / wall (fraction of one core) |\n|---|---|\n");
  for (std::size_t r = 0; r < idle.per_rank.size(); ++r) {
    std::printf("| %zu | %.4f |\n", r, idle.per_rank[r]);
  }
  std::printf("\nmax %.4f, mean %.4f\n\n", idle.max, idle.mean);
}

void print_case1(const std::vector<Case1Rows>& rows) {
  std::printf("## Case 1: one float32 tensor, op sum\n\n");
  std::printf(
      "| size | method | median | min | algbw | raw / chorus (vs raw MPI_Allreduce "
      "in place) | target |\n|---|---|---|---|---|---|---|\n");
  for (const Case1Rows& c : rows) {
    const double raw = c.results[0].median;
    for (std::size_t m = 0; m < c.results.size(); ++m) {
      const Result& r = c.results[m];
      const double gbps = static_cast<double>(c.bytes) / r.median / 1e9;
      std::string ratio = "-", target;
      if (m > 0) {
        ratio = fmt("%.3f", raw / r.median);
        if (c.bytes == 64 * kMiB) target = ">= 0.97 " + verdict(raw / r.median >= 0.97);
      }
      std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", fmt_bytes(c.bytes).c_str(),
                  r.name.c_str(), fmt_time(r.median).c_str(), fmt_time(r.min).c_str(),
                  fmt("%.2f GB/s", gbps).c_str(), ratio.c_str(), target.c_str());
    }
  }
  std::printf("\n");
}

// chorus / best raw for one many-tensor case: the ratio and the name of the raw method.
double many_ratio(const ManyRows& c, std::string* best_name) {
  const Result& best = c.results[0].median <= c.results[1].median ? c.results[0] : c.results[1];
  *best_name = best.name.substr(0, best.name.find(':'));
  return c.results[2].median / best.median;
}

double many_target(const ManyRows& c) { return c.count >= 1000 ? 2.0 : 1.0; }

std::string many_label(const ManyRows& c) {
  return std::to_string(c.count) + " x " + std::to_string(c.elements) + " float32 (" +
         fmt("%.1f MB", static_cast<double>(c.count) * c.elements * 4 / 1e6) + ")";
}

void print_many(const std::vector<ManyRows>& rows) {
  std::printf("## Cases 2-3: many tensors submitted together, op sum\n\n");
  std::printf(
      "| tensors | method | median | min | chorus / best raw | target |\n"
      "|---|---|---|---|---|---|\n");
  for (const ManyRows& c : rows) {
    std::string best;
    const double ratio = many_ratio(c, &best);
    for (std::size_t m = 0; m < c.results.size(); ++m) {
      const Result& r = c.results[m];
      std::string rcol = "-", target;
      if (m == 2) {
        rcol = fmt("%.3f", ratio) + " (vs " + best + ")";
        target = fmt("<= %.1f ", many_target(c)) + verdict(ratio <= many_target(c));
      }
      std::printf("| %s | %s | %s | %s | %s | %s |\n", many_label(c).c_str(), r.name.c_str(),
                  fmt_time(r.median).c_str(), fmt_time(r.min).c_str(), rcol.c_str(),
                  target.c_str());
    }
  }
  std::printf("\n");
}

void print_latency(const std::vector<Result>& results) {
  std::printf("## Case 4: latency of one 4-byte allreduce\n\n");
  std::printf("| method | median | min | ratio to raw | target |\n|---|---|---|---|---|\n");
  const double raw = results[0].median;
  for (std::size_t m = 0; m < results.size(); ++m) {
    const Result& r = results[m];
    std::string ratio = "-", target;
    if (m > 0) ratio = fmt("%.1f", r.median / raw);
    if (m == 1) target = "<= 10 " + verdict(r.median / raw <= 10.0);
    std::printf("| %s | %s | %s | %s | %s |\n", r.name.c_str(),
                fmt("%.2f us", r.median * 1e6).c_str(), fmt("%.2f us", r.min * 1e6).c_str(),
                ratio.c_str(), target.c_str());
  }
  std::printf("\n");
}

// ---------------------------------------------------------------------------------------
// Driver.

bool has(const std::vector<int>& cases, int c) {
  return std::find(cases.begin(), cases.end(), c) != cases.end();
}

void usage() {
  std::fprintf(stderr,
               "usage: allreduce_bench [--reps N] [--cases 1,2,3,4] [--idle-cpu SECONDS] "
               "[--threshold-sweep]\n"
               "  --reps N           timed iterations per method (default %d; 64 MiB: N/2, "
               "latency: %d N)\n"
               "  --cases LIST       which cases to run (default 1,2,3,4; sweep: 2,3)\n"
               "  --idle-cpu S       first measure Chorus's idle CPU over S seconds (default 0: "
               "skip)\n"
               "  --threshold-sweep  re-init Chorus with fusion thresholds 256 KiB..64 MiB and run "
               "cases 2 and 3 under each\n",
               kDefaultReps, kLatencyRepsFactor);
}

bool parse_args(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--reps" && has_value) {
      args->reps = std::atoi(argv[++i]);
      if (args->reps < 1) return false;
    } else if (a == "--cases" && has_value) {
      std::string list = argv[++i];
      for (std::size_t p = 0; p < list.size();) {
        std::size_t q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        const int c = std::atoi(list.substr(p, q - p).c_str());
        if (c < 1 || c > 4) return false;
        args->cases.push_back(c);
        p = q + 1;
      }
    } else if (a == "--idle-cpu" && has_value) {
      args->idle_cpu_seconds = std::atof(argv[++i]);
      if (args->idle_cpu_seconds < 0) return false;
    } else if (a == "--threshold-sweep") {
      args->threshold_sweep = true;
    } else {
      return false;
    }
  }
  if (args->cases.empty()) {
    args->cases = args->threshold_sweep ? std::vector<int>{2, 3} : std::vector<int>{1, 2, 3, 4};
  }
  return true;
}

// Cases 2 and 3 under the runtime as it is now configured.
std::vector<ManyRows> run_many(const World& w, const Args& args, int reps) {
  std::vector<ManyRows> rows;
  if (has(args.cases, 2)) rows.push_back(case_many(w, 160, 100000, reps));
  if (has(args.cases, 3)) rows.push_back(case_many(w, 1000, 1000, reps));
  return rows;
}

void run_all(const World& w, const Args& args) {
  if (has(args.cases, 1)) {
    std::vector<Case1Rows> rows;
    for (int64_t bytes : {4 * kKiB, 1 * kMiB, 64 * kMiB}) {
      rows.push_back(case_single(w, bytes, bytes >= 64 * kMiB ? large_reps(args.reps) : args.reps));
    }
    if (w.rank == 0) print_case1(rows);
  }
  std::vector<ManyRows> many = run_many(w, args, args.reps);
  if (w.rank == 0 && !many.empty()) print_many(many);
  if (has(args.cases, 4)) {
    std::vector<Result> lat = case_latency(w, args.reps * kLatencyRepsFactor);
    if (w.rank == 0) print_latency(lat);
  }
}

// Shuts Chorus down and starts it again with each threshold. A failed re-init is a Chorus
// bug (init after shutdown must work when the program owns MPI): reported, not hidden.
//
// Two passes, ascending then descending, each with half the repetitions: a load on the
// shared machine that drifts during the sweep then weighs on every threshold alike.
void run_sweep(const World& w, const Args& args) {
  const int64_t current = threshold_of(w, {});
  const std::vector<int64_t> thresholds = {kMiB / 4, kMiB / 2, 1 * kMiB,  2 * kMiB,
                                           4 * kMiB, 8 * kMiB, 16 * kMiB, 64 * kMiB};
  struct Row {
    int64_t threshold;
    std::vector<ManyRows> many;  // samples of both passes
  };
  std::vector<Row> rows;
  rows.reserve(thresholds.size());
  for (int64_t t : thresholds) rows.push_back({t, {}});
  const int reps_per_pass = std::max(1, (args.reps + 1) / 2);
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      Row& row = rows[pass == 0 ? i : rows.size() - 1 - i];
      chorus_check(chorus::shutdown(), "chorus::shutdown() before the sweep's re-init");
      chorus::Options options;
      options.fusion_threshold_bytes = row.threshold;
      chorus::Status s = chorus::init(options);
      if (!s.ok()) {
        die("BUG in Chorus: chorus::init() after chorus::shutdown() (MPI initialized by the "
            "program) failed: " +
            s.to_string());
      }
      std::vector<ManyRows> got = run_many(w, args, reps_per_pass);
      if (row.many.empty()) {
        row.many = std::move(got);
        continue;
      }
      for (std::size_t c = 0; c < got.size(); ++c) {
        for (std::size_t m = 0; m < got[c].results.size(); ++m) {
          row.many[c].results[m].add(got[c].results[m].samples);
        }
      }
    }
  }
  if (w.rank != 0) return;
  std::printf(
      "## Fusion threshold sweep (cases 2-3; Chorus shut down and re-initialized per "
      "threshold; two passes, ascending then descending, %d reps per pass)\n\n",
      reps_per_pass);
  std::printf(
      "| threshold | tensors | chorus median | chorus min | best raw median | "
      "chorus / best raw | target |\n|---|---|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    for (const ManyRows& c : row.many) {
      std::string best;
      const double ratio = many_ratio(c, &best);
      const double raw = c.results[2].median / ratio;
      std::printf("| %s%s | %s | %s | %s | %s (%s) | %.3f | <= %.1f %s |\n",
                  fmt_bytes(row.threshold).c_str(), row.threshold == current ? " (current)" : "",
                  many_label(c).c_str(), fmt_time(c.results[2].median).c_str(),
                  fmt_time(c.results[2].min).c_str(), fmt_time(raw).c_str(), best.c_str(), ratio,
                  many_target(c), verdict(ratio <= many_target(c)).c_str());
    }
  }
  std::printf("\n");
}

// The program: owns MPI (initialized at MPI_THREAD_MULTIPLE, so that Chorus adopts it and
// raw MPI may run from this thread beside Chorus's background thread).
int run(int argc, char** argv) {
  int provided = 0;
  mpi_check(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  World w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  Args args;
  if (!parse_args(argc, argv, &args)) {
    if (w.rank == 0) usage();
    MPI_Finalize();
    return 2;
  }
  if (provided < MPI_THREAD_MULTIPLE) die("MPI does not provide MPI_THREAD_MULTIPLE");

  const chorus::Options options;
  chorus_check(chorus::init(options), "chorus::init()");
  if (w.rank == 0) print_header(w, args, options);
  // First, while the process is still clean: what an idle Chorus costs.
  if (args.idle_cpu_seconds > 0) {
    IdleCpu idle = idle_cpu(w, args.idle_cpu_seconds);
    if (w.rank == 0) print_idle(idle, args.idle_cpu_seconds);
  }
  if (args.threshold_sweep) {
    run_sweep(w, args);
  } else {
    run_all(w, args);
  }
  if (w.rank == 0) std::printf("host load average (1 min) at end: %.2f\n\n", load_average());
  std::fflush(stdout);
  chorus_check(chorus::shutdown(), "chorus::shutdown()");
  MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace chorus::bench

int main(int argc, char** argv) { return chorus::bench::run(argc, argv); }
