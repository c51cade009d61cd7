#pragma once
// The measurement harness of allreduce_bench: how an iteration is timed across ranks, how
// methods are interleaved, how a failure ends the run, and the formatting of the tables.
//
// Every function that says "collective" must be called by every rank of MPI_COMM_WORLD
// with the same arguments, in the same order. Only the main thread calls into this file.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chorus/status.h"

namespace chorus::bench {

inline constexpr int64_t kKiB = 1024;
inline constexpr int64_t kMiB = kKiB * kKiB;

/// Prints `what` with this rank and aborts every rank: a benchmark number from a
/// half-broken runtime is worse than none.
[[noreturn]] void die(const std::string& what);
/// die() unless `rc` is MPI_SUCCESS; `call` names the MPI call.
void mpi_check(int rc, const char* call);
/// die() unless `s` is ok; `what` names the Chorus call.
void chorus_check(const Status& s, const std::string& what);

/// One way of doing the collective under test. prepare() runs untimed before every
/// iteration (refilling inputs, so that in-place sums never grow); run() is the timed part;
/// check() runs untimed after it and dies on a wrong result.
struct Method {
  std::string name;
  std::function<void()> prepare;
  std::function<void()> run;
  std::function<void()> check;
};

/// The timed iterations of one method and their summary, in seconds.
struct Result {
  std::string name;
  std::vector<double> samples;
  double median = 0;
  double min = 0;

  /// Appends samples (of another pass, say) and recomputes the summary.
  void add(const std::vector<double>& more);
};

/// Runs `warmup` untimed and `reps` timed iterations of every method, interleaved
/// iteration by iteration in a rotating order, so that a noisy neighbour hits all methods
/// alike. An iteration: prepare(), MPI_Barrier, run() timed, then the slowest rank's time
/// (MPI_Allreduce MAX), then check(). Collective.
std::vector<Result> measure(const std::vector<Method>& methods, int warmup, int reps);

/// printf of one double into a string.
std::string fmt(const char* format, double v);
/// "12.3 us", "4.56 ms" or "1.234 s".
std::string fmt_time(double seconds);
/// "64 MiB", "4 KiB" or "100 B".
std::string fmt_bytes(int64_t bytes);
/// "met" or a bold "missed", for the target columns.
std::string verdict(bool met);
/// The host's 1-minute load average: on a shared machine it tells how far to trust a table.
double load_average();

}  // namespace chorus::bench
