// Whole-job scenarios that a gtest inside one job cannot express: stalls, shutdown with
// work in flight, a rank killed mid-run, bad configuration, the timeline. Each is run by
// expect.sh, which checks the exit code and the job's output (log lines).
//
//   scenarios NAME     exits 0 when the scenario behaved as promised on this rank
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "common/files.h"

namespace {

using namespace chorus;
using chorus::testing::flight_record_path;
using chorus::testing::read_file;
using namespace std::chrono_literals;

// Output goes to stderr, unbuffered: after MPI_Finalize the launcher may no longer forward
// what a buffered stdout would flush at exit.
void say(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

int fail(const std::string& what) {
  std::fprintf(stderr, "scenario failed on rank %d: %s\n", rank(), what.c_str());
  return 1;
}

TensorRef ref(std::vector<float>& v) {
  return TensorRef{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, Device::cpu()};
}

// Rank 0 submits a tensor the others submit 2.5 s later: with CHORUS_STALL_CHECK_SECONDS=1
// the stall inspector warns, naming the tensor and the late ranks, every rank says the class
// (the others stopped taking part) and writes its flight record; then the tensor completes.
int stall_warning() {
  std::remove(flight_record_path().c_str());
  std::vector<float> v(16, 1.0f);
  if (rank() != 0) std::this_thread::sleep_for(2500ms);
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  Status s = allreduce("late.tensor", ref(v), ref(v), o).wait();
  if (!s.ok()) return fail(s.to_string());
  if (v[0] != static_cast<float>(size())) return fail("wrong sum");
  const std::string record = read_file(flight_record_path());
  if (record.find("\"reason\":\"stall report (global)\"") == std::string::npos ||
      record.find("\"stall_lines\":[\n  \"ranks stopped taking part") == std::string::npos) {
    return fail("no flight record of the stall at " + flight_record_path() + ": " + record);
  }
  // Rank 0 had the tensor outstanding when it wrote; the late ranks had nothing.
  const bool outstanding =
      record.find("\"outstanding\":[\n  {\"set\":0,\"name\":\"late.tensor\"") != std::string::npos;
  if (outstanding != (rank() == 0))
    return fail("the record's outstanding list is wrong: " + record);
  say("rank " + std::to_string(rank()) + ": late.tensor completed, flight record written");
  return 0;
}

// SIGUSR1 makes each rank write its flight record, with the collectives it ran before.
int flight_signal() {
  std::remove(flight_record_path().c_str());
  std::vector<float> v(16, 1.0f);
  if (Status s = allreduce("before.signal", ref(v), ref(v)).wait(); !s.ok())
    return fail(s.to_string());
  if (raise(SIGUSR1) != 0) return fail("raise(SIGUSR1) failed");
  std::string record;
  for (int i = 0; i < 500 && record.empty(); ++i) {
    std::this_thread::sleep_for(10ms);
    record = read_file(flight_record_path());
  }
  if (record.find("\"reason\":\"SIGUSR1\"") == std::string::npos ||
      record.find("\"name\":\"before.signal\"") == std::string::npos) {
    return fail("no flight record after SIGUSR1 at " + flight_record_path() + ": " + record);
  }
  say("rank " + std::to_string(rank()) + ": flight record written on SIGUSR1");
  return barrier().wait(60s).ok() ? 0 : fail("barrier after the signal");
}

// Rank 0 submits tensors nobody else ever submits, one new and one already cached: with
// CHORUS_STALL_SHUTDOWN_SECONDS=2 the first to reach the bound fails, and since the other
// ranks have nothing outstanding, every rank ends its process with status 84 ("ranks
// stopped taking part"), which the test's expectations check with the lines that say so.
int stall_shutdown() {
  std::vector<float> v(16, 1.0f);
  if (Status s = allreduce("cached.once", ref(v), ref(v)).wait(); !s.ok())
    return fail(s.to_string());
  if (rank() == 0) {
    Handle fresh = allreduce("never.elsewhere", ref(v), ref(v));
    Handle cached = allreduce("cached.once", ref(v), ref(v));
    fresh.wait(30s);
    cached.wait(30s);
  }
  // The stall ends every process before this wait does.
  std::this_thread::sleep_for(30s);
  return fail("the stall inspector did not end the job");
}

// Rank 0 has work no one else submits when every rank calls shutdown(): the handle fails
// with ABORTED, rank 0 alone writes a flight record with it outstanding, and collectives
// after shutdown fail with NOT_INITIALIZED.
int shutdown_in_flight() {
  std::vector<float> v(16, 1.0f);
  const int me = rank();
  const std::string record_path = flight_record_path();
  std::remove(record_path.c_str());
  Handle orphan;
  if (me == 0) orphan = allreduce("orphan", ref(v), ref(v));
  if (Status s = barrier().wait(60s); !s.ok()) return fail(s.to_string());
  if (Status s = shutdown(); !s.ok()) return fail("shutdown: " + s.to_string());
  if (me == 0) {
    Status s = orphan.wait(10s);
    if (s.code() != StatusCode::kAborted) return fail("expected ABORTED, got " + s.to_string());
    say("rank 0: orphan -> " + s.to_string());
    // The shutdown aborted work in flight: the flight record says so, with the orphan.
    const std::string record = read_file(record_path);
    if (record.find("\"reason\":\"shutdown aborted collectives in flight\"") == std::string::npos ||
        record.find("\"outstanding\":[\n  {\"set\":0,\"name\":\"orphan\"") == std::string::npos) {
      return fail("no flight record of the aborting shutdown at " + record_path + ": " + record);
    }
  } else if (!read_file(record_path).empty()) {
    return fail("a flight record on a rank whose shutdown aborted nothing");
  }
  Status after = allreduce("after", ref(v), ref(v)).wait();
  if (after.code() != StatusCode::kNotInitialized)
    return fail("after shutdown: " + after.to_string());
  return 0;
}

// One rank shuts down while the others still have work: their handles fail with ABORTED
// saying another rank shut down, instead of waiting forever.
int peer_shutdown() {
  std::vector<float> v(16, 1.0f);
  if (rank() == 0) {
    std::this_thread::sleep_for(500ms);
    if (Status s = shutdown(); !s.ok()) return fail(s.to_string());
    return 0;
  }
  Status s = allreduce("left.behind", ref(v), ref(v)).wait(30s);
  if (s.code() != StatusCode::kAborted || s.message().find("another rank") == std::string::npos) {
    return fail("expected ABORTED by another rank, got " + s.to_string());
  }
  say("rank " + std::to_string(rank()) + ": " + s.to_string());
  return 0;
}

// The last rank dies after a few steps; the job must end (non-zero) soon after, with the
// launcher naming the dead rank, not hang in the next allreduce.
int killed_rank() {
  std::vector<float> v(1024, 1.0f);
  for (int step = 0;; ++step) {
    if (step == 5 && rank() == size() - 1) {
      std::fprintf(stderr, "rank %d: killing myself at step %d\n", rank(), step);
      std::fflush(stderr);
      raise(SIGKILL);
    }
    Status s = allreduce("step", ref(v), ref(v)).wait(120s);
    if (!s.ok()) return fail(s.to_string());
    if (step > 100000) return fail("the job kept running without the killed rank");
  }
}

// Runs a few collectives with CHORUS_TIMELINE set; after shutdown rank 0 checks that the
// file has a row per tensor and every phase (expect.sh checks that it is valid JSON).
int timeline() {
  std::vector<float> a(1000, 1.0f), b(5000, 2.0f);
  // Grouped, so that the two are always fused and every phase (MEMCPY_IN/OUT included)
  // appears whatever the timing; separately submitted they may run in different cycles.
  for (int step = 0; step < 3; ++step) {
    Handle h = grouped_allreduce({"tl.a", "tl.b"}, {ref(a), ref(b)}, {ref(a), ref(b)});
    if (!h.wait().ok()) return fail("grouped allreduce failed");
  }
  const int me = rank();
  if (Status s = shutdown(); !s.ok()) return fail(s.to_string());
  if (me != 0) return 0;
  const char* path = std::getenv("CHORUS_TIMELINE");
  std::FILE* f = path ? std::fopen(path, "r") : nullptr;
  if (!f) return fail("no timeline file");
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  for (const char* want :
       {"\"tl.a\"", "\"tl.b\"", "NEGOTIATE", "QUEUE", "MEMCPY_IN", "COLLECTIVE", "MEMCPY_OUT"}) {
    if (text.find(want) == std::string::npos) return fail(std::string("timeline lacks ") + want);
  }
  say("timeline ok");
  return 0;
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

Status allreduce_named(const std::string& name) {
  std::vector<float> v(256, 1.0f);
  return allreduce(name, ref(v), ref(v)).wait();
}

// start_timeline/stop_timeline at run time, on every rank (rank 0 writes): a timeline in
// $RT_TL_A, switched to $RT_TL_B with mark_cycles, then stopped. Each file holds exactly the
// collectives run while it was active, only B has CYCLE_START marks, neither changes after
// it was closed; a second stop is a no-op, a bad path fails on rank 0, an empty one
// everywhere, and both calls fail after shutdown. expect.sh checks both files are JSON.
int runtime_timeline() {
  const char* a_env = std::getenv("RT_TL_A");
  const char* b_env = std::getenv("RT_TL_B");
  if (!a_env || !b_env) return fail("RT_TL_A and RT_TL_B must name the files");
  const std::string a = a_env, b = b_env;
  const bool writer = rank() == 0;

  if (Status s = stop_timeline(); !s.ok()) return fail("stop with none active: " + s.to_string());
  if (Status s = start_timeline(a); !s.ok()) return fail("start A: " + s.to_string());
  if (Status s = allreduce_named("rt.first"); !s.ok()) return fail(s.to_string());
  if (Status s = start_timeline(b, /*mark_cycles=*/true); !s.ok())
    return fail("switch to B: " + s.to_string());
  const std::string a_closed = read_file(a);  // A was closed before start_timeline returned
  if (Status s = allreduce_named("rt.second"); !s.ok()) return fail(s.to_string());
  if (Status s = stop_timeline(); !s.ok()) return fail("stop B: " + s.to_string());
  const std::string b_closed = read_file(b);
  if (Status s = allreduce_named("rt.after"); !s.ok()) return fail(s.to_string());
  if (Status s = stop_timeline(); !s.ok()) return fail("second stop: " + s.to_string());
  // Give a stray writer (there should be none) time to show itself.
  std::this_thread::sleep_for(300ms);

  if (Status s = start_timeline(""); s.code() != StatusCode::kInvalidArgument)
    return fail("empty path: expected INVALID_ARGUMENT, got " + s.to_string());
  Status bad = start_timeline("/nonexistent-chorus-dir/t.json");
  if (writer ? bad.code() != StatusCode::kInvalidArgument || !has(bad.message(), "nonexistent")
             : !bad.ok())
    return fail("unwritable path: got " + bad.to_string());
  // A rank that reached shutdown() would stop the others' runtime under their calls above.
  if (Status s = barrier().wait(); !s.ok()) return fail("barrier: " + s.to_string());

  if (writer) {
    const std::string a_end = read_file(a), b_end = read_file(b);
    if (a_end != a_closed) return fail("timeline A changed after the switch");
    if (b_end != b_closed) return fail("timeline B changed after stop_timeline");
    if (!has(a_end, "\"rt.first\"") || !has(a_end, "COLLECTIVE"))
      return fail("timeline A lacks rt.first");
    if (has(a_end, "rt.second") || has(a_end, "rt.after") || has(a_end, "CYCLE_START"))
      return fail("timeline A holds events from after the switch: " + a_end);
    if (!has(b_end, "\"rt.second\"") || !has(b_end, "CYCLE_START"))
      return fail("timeline B lacks rt.second or its CYCLE_START marks: " + b_end);
    if (has(b_end, "rt.first") || has(b_end, "rt.after"))
      return fail("timeline B holds events from outside its start and stop: " + b_end);
  }

  if (Status s = shutdown(); !s.ok()) return fail(s.to_string());
  if (Status s = start_timeline(b); s.code() != StatusCode::kNotInitialized)
    return fail("start after shutdown: expected NOT_INITIALIZED, got " + s.to_string());
  if (Status s = stop_timeline(); s.code() != StatusCode::kNotInitialized)
    return fail("stop after shutdown: expected NOT_INITIALIZED, got " + s.to_string());
  if (writer && read_file(b) != b_closed) return fail("timeline B changed at shutdown");
  say(std::string("runtime timeline ok") + (writer ? " (rank 0 checked the files)" : ""));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: scenarios NAME\n");
    return 2;
  }
  const std::string name = argv[1];
  Status s = init();
  if (name == "bad_env") {
    // Run with a malformed CHORUS_FUSION_THRESHOLD: init must refuse, naming it.
    if (s.ok() || s.message().find("CHORUS_FUSION_THRESHOLD") == std::string::npos) {
      std::fprintf(stderr, "expected init to fail naming the variable, got %s\n",
                   s.to_string().c_str());
      return 1;
    }
    say("init refused: " + s.to_string());
    return 0;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.to_string().c_str());
    return 1;
  }
  int rc = 2;
  if (name == "stall_warning")
    rc = stall_warning();
  else if (name == "flight_signal")
    rc = flight_signal();
  else if (name == "stall_shutdown")
    rc = stall_shutdown();
  else if (name == "shutdown_in_flight")
    rc = shutdown_in_flight();
  else if (name == "peer_shutdown")
    rc = peer_shutdown();
  else if (name == "killed_rank")
    rc = killed_rank();
  else if (name == "timeline")
    rc = timeline();
  else if (name == "runtime_timeline")
    rc = runtime_timeline();
  else
    std::fprintf(stderr, "unknown scenario %s\n", name.c_str());
  Status down = shutdown();
  if (rc == 0 && !down.ok()) return fail("shutdown: " + down.to_string());
  return rc;
}
