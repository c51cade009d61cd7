#include "harness.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace chorus::bench {
namespace {

using Clock = std::chrono::steady_clock;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One iteration of `m`: the slowest rank's time, in seconds. Collective.
double time_once(const Method& m) {
  m.prepare();
  mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const Clock::time_point t0 = Clock::now();
  m.run();
  double local = std::chrono::duration<double>(Clock::now() - t0).count();
  double slowest = 0;
  mpi_check(MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
            "MPI_Allreduce(time)");
  m.check();
  return slowest;
}

}  // namespace

void die(const std::string& what) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "allreduce_bench: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

void mpi_check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) die(std::string(call) + " failed with code " + std::to_string(rc));
}

void chorus_check(const Status& s, const std::string& what) {
  if (!s.ok()) die(what + ": " + s.to_string());
}

void Result::add(const std::vector<double>& more) {
  samples.insert(samples.end(), more.begin(), more.end());
  median = median_of(samples);
  min = *std::min_element(samples.begin(), samples.end());
}

std::vector<Result> measure(const std::vector<Method>& methods, int warmup, int reps) {
  const std::size_t k = methods.size();
  for (int i = 0; i < warmup; ++i) {
    for (const Method& m : methods) time_once(m);
  }
  std::vector<std::vector<double>> samples(k);
  for (int rep = 0; rep < reps; ++rep) {
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t m = (static_cast<std::size_t>(rep) + j) % k;
      samples[m].push_back(time_once(methods[m]));
    }
  }
  std::vector<Result> results(k);
  for (std::size_t m = 0; m < k; ++m) {
    results[m].name = methods[m].name;
    results[m].add(samples[m]);
  }
  return results;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string fmt_time(double seconds) {
  if (seconds < 1e-3) return fmt("%.1f us", seconds * 1e6);
  if (seconds < 1.0) return fmt("%.2f ms", seconds * 1e3);
  return fmt("%.3f s", seconds);
}

std::string fmt_bytes(int64_t bytes) {
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string verdict(bool met) { return met ? "met" : "**missed**"; }

double load_average() {
  double load[1] = {-1};
  getloadavg(load, 1);
  return load[0];
}

}  // namespace chorus::bench
