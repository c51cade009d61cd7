// The fault matrix: one program, one fault per case, run under mpirun by expect.sh
// (tests/faults/CMakeLists.txt lists the rows). Each case checks, on every rank, the status
// and message that the fault must produce, and prints "rank R: CASE ok: ..." when it did;
// the row's expectations require that line from every rank that must see the fault, and a
// bound on the job's time, so that a hang or a silent wrong result fails the row.
//
//   faults CASE     exits 0 when CASE behaved as promised on this rank
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

// The rank before init(), from the launcher, so that a case can give ranks different
// environments.
int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return -1;
}

int launcher_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return -1;
}

// Output goes to stderr, unbuffered: a rank may leave without MPI_Finalize.
void say(int r, const std::string& line) { std::fprintf(stderr, "rank %d: %s\n", r, line.c_str()); }

int fail(int r, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAULT CASE FAILED: %s\n", r, what.c_str());
  return 1;
}

bool has(const Status& s, const std::string& part) {
  return s.message().find(part) != std::string::npos;
}

// Files in $FAULTS_DIR order events across ranks where Chorus itself cannot (its
// collectives are what the case breaks). Each case's files carry its name.
std::string scratch(const std::string& file) {
  const char* dir = std::getenv("FAULTS_DIR");
  return std::string(dir ? dir : ".") + "/" + file;
}

void touch(const std::string& path) {
  if (std::FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

bool wait_for_file(const std::string& path, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// For a case whose ranks are out of step (MPI is not finalized): no rank leaves before every
// rank has said its line, since mpirun ends the job when the first leaves without
// MPI_Finalize.
[[noreturn]] void leave_together(const std::string& tag) {
  const char* job = std::getenv("PMIX_NAMESPACE");  // one per mpirun: no earlier run's marks
  auto mark = [&](int r) {
    return scratch(tag + "." + (job ? job : "job") + "." + std::to_string(r));
  };
  touch(mark(rank()));
  for (int r = 0; r < size(); ++r) wait_for_file(mark(r), 20s);
  std::_Exit(0);
}

TensorRef ref(std::vector<float>& v) {
  return TensorRef{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, Device::cpu()};
}

// init() must fail on every rank with `code`, its message holding every part.
int init_fails(const std::string& name, StatusCode code, const std::vector<std::string>& parts) {
  const int me = launcher_rank();
  Status s = init();
  if (s.ok()) {
    shutdown();
    return fail(me, name + ": init() succeeded");
  }
  if (s.code() != code) return fail(me, name + ": wrong code: " + s.to_string());
  for (const std::string& p : parts) {
    if (!has(s, p)) return fail(me, name + ": message lacks '" + p + "': " + s.to_string());
  }
  say(me, name + " ok: " + s.to_string());
  return 0;
}

// Rank 0 exports CHORUS_FUSION_THRESHOLD=0 and the others keep the default: with fusion off
// on one rank only, the ranks would plan different batches (wrong sums with an OK status).
int threshold_differs() {
  if (launcher_rank() == 0) setenv("CHORUS_FUSION_THRESHOLD", "0", 1);
  return init_fails(
      "threshold_differs", StatusCode::kInvalidArgument,
      {"CHORUS_FUSION_THRESHOLD differs across ranks", "'0' on ranks [0]", "'auto' on ranks [1"});
}

// The last rank alone turns the response cache off: its rounds would carry other bits.
int cache_differs() {
  const char* n = std::getenv("OMPI_COMM_WORLD_SIZE");
  const int last = n ? std::atoi(n) - 1 : 1;
  if (launcher_rank() == last) setenv("CHORUS_CACHE_CAPACITY", "0", 1);
  return init_fails("cache_differs", StatusCode::kInvalidArgument,
                    {"CHORUS_CACHE_CAPACITY differs across ranks",
                     "'0' on ranks [" + std::to_string(last) + "]"});
}

// CHORUS_TIMELINE names a file that cannot be created: rank 0 (the writer) fails to open it,
// and every rank's init() fails, instead of the others waiting in the next set-up step.
int timeline_unwritable() {
  const bool writer = launcher_rank() == 0;
  return init_fails(
      "timeline_unwritable", StatusCode::kInvalidArgument,
      {writer ? "/nonexistent-chorus-dir" : "opening the timeline failed on ranks [0]"});
}

// A fusion threshold no buffer could have fails init() with the accepted range.
int threshold_too_large() {
  return init_fails("threshold_too_large", StatusCode::kInvalidArgument,
                    {"CHORUS_FUSION_THRESHOLD='1000000000000000'", "between 0 and 4294967296"});
}

// The cases below run after a successful init().

// One rank passes a reduce op that does not exist: its call fails at once, naming the
// value; its peers' collective of that name stalls, and the stall inspector
// (CHORUS_STALL_SHUTDOWN_SECONDS) fails it and ends the job with the class of the stall:
// the bad rank has nothing outstanding (it waits outside Chorus), so every rank exits with
// status 84, "ranks stopped taking part", naming it (checked by the test's expectations).
int bad_reduce_op() {
  const int me = rank();
  const int bad = size() - 1;
  if (Status s = barrier().wait(60s); !s.ok()) return fail(me, "barrier: " + s.to_string());
  std::vector<float> v(64, 1.0f);
  AllreduceOptions o;
  o.op = me == bad ? static_cast<ReduceOp>(9) : ReduceOp::kSum;
  Handle h = allreduce("bad.op", ref(v), ref(v), o);
  if (me == bad) {
    if (!h.poll()) return fail(me, "the bad reduce op was not refused at the call");
    Status s = h.status();
    if (s.code() != StatusCode::kInvalidArgument || !has(s, "reduce op 9"))
      return fail(me, "expected INVALID_ARGUMENT naming reduce op 9, got " + s.to_string());
    say(me, "bad_reduce_op ok: " + s.to_string());
  } else {
    h.wait(60s);
  }
  // The stall ends every process before this wait does.
  std::this_thread::sleep_for(60s);
  return fail(me, "the stall inspector did not end the job");
}

// Shapes whose element count overflows 64 bits are refused at the call, null data or not.
int huge_shape() {
  const int me = rank();
  for (std::vector<int64_t> shape : {std::vector<int64_t>{int64_t{1} << 32, int64_t{1} << 32},
                                     std::vector<int64_t>{3037000500, 3037000500}}) {
    TensorRef t{nullptr, DataType::kFloat32, shape, Device::cpu()};
    for (Handle h : {allreduce("huge", t, t), allgather("huge", t), broadcast("huge", t, 0)}) {
      if (!h.poll()) return fail(me, "a huge shape was not refused at the call");
      Status s = h.status();
      if (s.code() != StatusCode::kInvalidArgument || !has(s, "2^62 bytes"))
        return fail(me, "expected INVALID_ARGUMENT about the size, got " + s.to_string());
    }
  }
  std::vector<float> w(8, 1.0f);
  AllreduceOptions sum;
  sum.op = ReduceOp::kSum;
  if (Status s = allreduce("after.huge", ref(w), ref(w), sum).wait(60s); !s.ok())
    return fail(me, "the job did not go on: " + s.to_string());
  if (w[0] != static_cast<float>(size())) return fail(me, "wrong sum after the fault");
  say(me, "huge_shape ok");
  return 0;
}

// A name already in flight is refused at the call, on that rank alone, however many threads
// race to submit it; the first submit still completes, and once it has, the name is free
// again at once. Each round, one rank holds its submit back behind a gate (an allreduce of
// another name), so that the raced name cannot complete anywhere during the race.
int duplicate_name() {
  const int me = rank();
  const int n = size();
  constexpr int kThreads = 6;
  constexpr int kRounds = 60;
  AllreduceOptions sum;
  sum.op = ReduceOp::kSum;
  for (int round = 0; round < kRounds; ++round) {
    const std::string name = "dup." + std::to_string(round);
    const int late = round % n;
    std::vector<std::vector<float>> data(kThreads, std::vector<float>(32, 1.0f));
    std::vector<Handle> handles(kThreads);
    auto pass_gate = [&] {
      std::vector<float> gate(1, 1.0f);
      return allreduce("gate." + std::to_string(round), ref(gate), ref(gate)).wait(60s);
    };
    if (me != late) {
      std::atomic<int> ready{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          ready.fetch_add(1);
          while (ready.load() < kThreads) {
          }
          handles[t] = allreduce(name, ref(data[t]), ref(data[t]), sum);
        });
      }
      for (std::thread& t : threads) t.join();
      int accepted = -1;
      for (int t = 0; t < kThreads; ++t) {
        // Refused ones are done at the call; the accepted one waits for the late rank.
        if (!handles[t].poll()) {
          if (accepted >= 0) return fail(me, name + ": two submits of one name accepted");
          accepted = t;
          continue;
        }
        Status s = handles[t].status();
        if (s.code() != StatusCode::kInvalidArgument ||
            !has(s, "already in flight on rank " + std::to_string(me)))
          return fail(
              me, name + ": expected INVALID_ARGUMENT 'already in flight', got " + s.to_string());
      }
      if (accepted < 0) return fail(me, name + ": no submit accepted");
      // One more, from this thread, while the first is surely pending.
      Handle again = allreduce(name, ref(data[0]), ref(data[0]), sum);
      if (!again.poll() || again.status().code() != StatusCode::kInvalidArgument)
        return fail(me, name + ": a later duplicate was not refused at the call");
      if (Status s = pass_gate(); !s.ok()) return fail(me, "gate: " + s.to_string());
      if (Status s = handles[accepted].wait(60s); !s.ok())
        return fail(me, name + ": the accepted submit failed: " + s.to_string());
      if (data[accepted][0] != static_cast<float>(n)) return fail(me, name + ": wrong sum");
    } else {
      if (Status s = pass_gate(); !s.ok()) return fail(me, "gate: " + s.to_string());
      if (Status s = allreduce(name, ref(data[0]), ref(data[0]), sum).wait(60s); !s.ok())
        return fail(me, name + ": " + s.to_string());
    }
    // Completed: the name is free again at once, on every rank.
    std::vector<float> reuse(4, 1.0f);
    if (Status s = allreduce(name, ref(reuse), ref(reuse), sum).wait(60s); !s.ok())
      return fail(me, name + ": reusing a completed name failed: " + s.to_string());
  }
  say(me, "duplicate_name ok: " + std::to_string(kRounds) + " rounds of " +
              std::to_string(kThreads) + " racing threads");
  return 0;
}

// CHORUS_TEST_FAIL_COLLECTIVE=inject.me on every rank: that collective's backend call fails,
// alone (`fused` false) or in a fused batch with two others, whose handles fail with it; the
// runtime stops, and a later call fails for the same reason. The GPU tests use the same hook
// (tests/gpu/defects_test.cc); this checks it where CI runs.
int injected_failure(bool fused) {
  const int me = rank();
  std::vector<float> a(16, 1.0f), b(16, 2.0f), c(16, 3.0f);
  if (Status s = allreduce("before.injection", ref(a), ref(a)).wait(60s); !s.ok())
    return fail(me, s.to_string());
  Status s = fused ? grouped_allreduce({"fused.a", "inject.me", "fused.c"},
                                       {ref(a), ref(b), ref(c)}, {ref(a), ref(b), ref(c)})
                         .wait(60s)
                   : allreduce("inject.me", ref(b), ref(b)).wait(60s);
  if (s.ok() || !has(s, "inject.me") || !has(s, "CHORUS_TEST_FAIL_COLLECTIVE"))
    return fail(me, "expected the injected failure, got " + s.to_string());
  // Submitted before or after the runtime stopped: either way it fails with the same reason.
  Status later = allreduce("after.injection", ref(a), ref(a)).wait(10s);
  if (later.ok() || !has(later, "CHORUS_TEST_FAIL_COLLECTIVE"))
    return fail(me, "a later call should fail with the same reason, got " + later.to_string());
  say(me, std::string(fused ? "injected_fused" : "injected_single") + " ok: " + s.to_string());
  leave_together(fused ? "injected_fused" : "injected_single");
}

// The last rank's own part of a batch fails (CHORUS_TEST_FAIL_PART set on it alone) while it
// takes part in the calls. A float32 and an int32 tensor allreduced as one group make two
// batches of one round: every rank fails the group with one verdict naming the rank and the
// cause, the int32 batch after it still ran on every rank (its sums are right), and the job
// goes on. The waits have no timeout, so that a trainer thread may run the round itself.
int part_fails() {
  const int me = rank();
  const int last = size() - 1;
  std::vector<float> a(16, 1.0f);
  std::vector<int32_t> counts(8, me + 1);
  const TensorRef ints{counts.data(), DataType::kInt32, {8}, Device::cpu()};
  AllreduceOptions sum_op;
  sum_op.op = ReduceOp::kSum;
  const Status s =
      grouped_allreduce({"part.fails", "part.ints"}, {ref(a), ints}, {ref(a), ints}, sum_op).wait();
  const std::string named = "failed on rank " + std::to_string(last) +
                            ": this rank's own part of 'part.fails' failed: CHORUS_TEST_FAIL_PART";
  if (s.code() != StatusCode::kInternal || !has(s, "allreduce 'part.fails'") || !has(s, named))
    return fail(
        me, "expected the verdict naming rank " + std::to_string(last) + ", got " + s.to_string());
  const int sum = size() * (size() + 1) / 2;
  if (counts[0] != sum || counts[7] != sum)
    return fail(me, "the round's int32 batch should have run with " + std::to_string(sum) +
                        ", got " + std::to_string(counts[0]));
  std::vector<float> b(16, 1.0f);
  if (Status later = allreduce("after.part", ref(b), ref(b), sum_op).wait();
      !later.ok() || b[0] != static_cast<float>(size()))
    return fail(me, "the runtime should go on after a verdict, got " + later.to_string());
  say(me, "part_fails ok: " + s.to_string());
  return 0;
}

// The last rank's backend call fails (CHORUS_TEST_FAIL_COLLECTIVE set on it alone) and it stays
// alive: the others, whose call waits for its data, give up after CHORUS_LIVENESS_SECONDS
// (row's ENV), and every rank fails the group with one verdict naming the last rank and its
// cause; the runtime stops everywhere, the ranks being out of step.
int call_fails_one_rank() {
  const int me = rank();
  const int last = size() - 1;
  std::vector<float> a(4096, 1.0f);
  if (Status s = allreduce("before.injection", ref(a), ref(a)).wait(60s); !s.ok())
    return fail(me, s.to_string());
  // With an int32 tensor in its group: a second batch in the round, which the failing rank
  // no longer makes.
  std::vector<int32_t> counts(8, me + 1);
  const TensorRef ints{counts.data(), DataType::kInt32, {8}, Device::cpu()};
  const Status s =
      grouped_allreduce({"inject.me", "inject.ints"}, {ref(a), ints}, {ref(a), ints}).wait(60s);
  const std::string named = "failed on rank " + std::to_string(last) + ": ";
  const bool ok = s.code() == StatusCode::kInternal && has(s, "allreduce 'inject.me'") &&
                  has(s, named) && has(s, "CHORUS_TEST_FAIL_COLLECTIVE");
  if (!ok)
    return fail(
        me, "expected the verdict naming rank " + std::to_string(last) + ", got " + s.to_string());
  Status later = allreduce("after.injection", ref(a), ref(a)).wait(10s);
  if (later.ok() || !has(later, "CHORUS_TEST_FAIL_COLLECTIVE"))
    return fail(me, "a later call should fail with the same reason, got " + later.to_string());
  say(me, "call_fails_one_rank ok: " + s.to_string());
  // No rank leaves before every rank has said so (mpirun ends the job when the first leaves
  // without MPI_Finalize): the failing rank was alive throughout, so its peers did not need
  // its exit to fail.
  leave_together("call_fails");
}

// The last rank leaves the job while idle, under a launcher that keeps the others running
// (mpirun --enable-recovery): the others' pending collective fails, naming it (on its host
// at once, as exited; across hosts after CHORUS_LIVENESS_SECONDS, as taking no part), and a
// later call says why Chorus stopped.
int peer_exits_idle() {
  const int me = rank();
  const int gone = size() - 1;
  std::vector<float> v(16, 1.0f);
  if (Status s = allreduce("before.exit", ref(v), ref(v)).wait(60s); !s.ok())
    return fail(me, s.to_string());
  if (me == gone) {
    say(me, "exiting without shutdown");
    std::fflush(stderr);
    raise(SIGKILL);
  }
  std::this_thread::sleep_for(300ms);
  Status s = allreduce("after.exit", ref(v), ref(v)).wait(60s);
  const std::string g = std::to_string(gone);
  const bool named = has(s, "rank " + g + " (pid") || has(s, "ranks [" + g + "] took no part");
  if (s.code() != StatusCode::kAborted || !named)
    return fail(me, "expected ABORTED naming rank " + g + " alone, got " + s.to_string());
  Status later = allreduce("later", ref(v), ref(v)).wait(10s);
  if (later.code() != StatusCode::kAborted || !has(later, "Chorus has stopped") ||
      !has(later, s.message()))
    return fail(me, "a later call should say why Chorus stopped, got " + later.to_string());
  say(me, "peer_exits_idle ok: " + s.to_string());
  say(me, "later call: " + later.to_string());
  std::_Exit(0);  // MPI cannot finalize without the dead rank
}

// The last rank is killed in the middle of a stream of allreduces (busy), under a launcher
// that keeps the others running: their collectives fail with ABORTED, naming it, instead of
// waiting in the reduction or the next round.
int peer_killed_busy() {
  const int me = rank();
  const int gone = size() - 1;
  std::vector<float> v(1 << 16, 1.0f);
  for (int step = 0; step < 100000; ++step) {
    if (step == 20 && me == gone) {
      say(me, "killing myself mid-stream");
      std::fflush(stderr);
      raise(SIGKILL);
    }
    Status s = allreduce("busy." + std::to_string(step % 4), ref(v), ref(v)).wait(60s);
    if (s.ok()) continue;
    const std::string g = std::to_string(gone);
    // "rank 2 (pid ...) exited", "... to rank 2", or a roll call's "ranks [2] took no part".
    if (s.code() != StatusCode::kAborted || !(has(s, "rank " + g) || has(s, "ranks [" + g + "]")))
      return fail(me, "expected ABORTED naming rank " + g + ", got " + s.to_string());
    say(me, "peer_killed_busy ok at step " + std::to_string(step) + ": " + s.to_string());
    std::_Exit(0);  // MPI cannot finalize without the dead rank
  }
  return fail(me, "the job kept running without the killed rank");
}

// The last rank stops (SIGSTOP: alive, but taking no part) while the others wait in a
// collective: after CHORUS_LIVENESS_SECONDS their handles fail naming it. Rank 0 then wakes
// it (SIGCONT; the pid travels in a file), and it fails by the same bound, its peers gone
// from the rounds; the others stay until it has said so.
int peer_stops() {
  const int me = rank();
  const int stuck = size() - 1;
  const std::string record_path = flight_record_path();
  std::remove(record_path.c_str());
  const std::string pid_file = scratch("peer_stops.pid");
  const std::string done_file = scratch("peer_stops.done");
  if (me == stuck) {
    std::remove(done_file.c_str());
    for (int r = 0; r < stuck; ++r)
      std::remove(scratch("peer_stops.failed." + std::to_string(r)).c_str());
    std::FILE* f = std::fopen(pid_file.c_str(), "w");
    if (!f) return fail(me, "cannot write " + pid_file);
    std::fprintf(f, "%d\n", static_cast<int>(getpid()));
    std::fclose(f);
  }
  std::vector<float> v(16, 1.0f);
  if (Status s = allreduce("before.stop", ref(v), ref(v)).wait(60s); !s.ok())
    return fail(me, s.to_string());
  if (me == stuck) {
    say(me, "stopping");
    raise(SIGSTOP);
    Status s = allreduce("after.stop", ref(v), ref(v)).wait(60s);
    if (s.code() != StatusCode::kAborted)
      return fail(me, "woken: expected ABORTED, got " + s.to_string());
    say(me, "peer_stops ok: woken, " + s.to_string());
    touch(done_file);
    std::_Exit(0);
  }
  Status s = allreduce("after.stop", ref(v), ref(v)).wait(60s);
  if (s.code() != StatusCode::kAborted || !has(s, "CHORUS_LIVENESS_SECONDS") ||
      !has(s, std::to_string(stuck) + "]"))
    return fail(me,
                "expected ABORTED naming rank " + std::to_string(stuck) + ", got " + s.to_string());
  // The failure stopped the runtime: its flight record says why, with the collective.
  const std::string record = read_file(record_path);
  if (record.find("\"reason\":\"the runtime stopped: ABORTED") == std::string::npos ||
      record.find("\"name\":\"after.stop\"") == std::string::npos)
    return fail(me, "no flight record of the failure at " + record_path + ": " + record);
  say(me, "peer_stops ok: " + s.to_string());
  touch(scratch("peer_stops.failed." + std::to_string(me)));
  if (me == 0) {
    // Woken earlier, it would answer a roll call that a peer still holds.
    for (int r = 0; r < stuck; ++r) {
      if (!wait_for_file(scratch("peer_stops.failed." + std::to_string(r)), 60s))
        return fail(me, "rank " + std::to_string(r) + " never failed");
    }
    int pid = 0;
    if (std::FILE* f = std::fopen(pid_file.c_str(), "r")) {
      if (std::fscanf(f, "%d", &pid) != 1) pid = 0;
      std::fclose(f);
    }
    if (pid <= 0 || kill(pid, SIGCONT) != 0) return fail(me, "could not wake the stopped rank");
  }
  if (!wait_for_file(done_file, 60s)) return fail(me, "the woken rank never reported");
  std::_Exit(0);  // MPI cannot finalize: the rounds were left unfinished
}

// Rank 0 shuts down while the others have work: their handles fail naming the shutdown, and
// their later calls say that Chorus stopped because of it, not "call chorus::init() first".
int after_peer_shutdown() {
  const int me = rank();
  std::vector<float> v(16, 1.0f);
  if (me == 0) {
    std::this_thread::sleep_for(300ms);
    if (Status s = shutdown(); !s.ok()) return fail(me, s.to_string());
    say(me, "after_peer_shutdown ok: shut down");
    return 0;
  }
  Status s = allreduce("left.behind", ref(v), ref(v)).wait(30s);
  if (s.code() != StatusCode::kAborted || !has(s, "another rank"))
    return fail(me, "expected ABORTED by another rank, got " + s.to_string());
  Status later = allreduce("later", ref(v), ref(v)).wait(10s);
  if (later.code() != StatusCode::kAborted || !has(later, "Chorus has stopped") ||
      !has(later, "another rank called chorus::shutdown()") || has(later, "init() first"))
    return fail(me, "a later call should say why Chorus stopped, got " + later.to_string());
  say(me, "after_peer_shutdown ok: " + later.to_string());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: faults CASE\n");
    return 2;
  }
  const std::string name = argv[1];
  struct Case {
    const char* name;
    int (*run)();
    bool before_init;  // the case calls init() itself
  };
  const Case cases[] = {
      {"threshold_differs", threshold_differs, true},
      {"cache_differs", cache_differs, true},
      {"timeline_unwritable", timeline_unwritable, true},
      {"threshold_too_large", threshold_too_large, true},
      {"bad_reduce_op", bad_reduce_op, false},
      {"huge_shape", huge_shape, false},
      {"duplicate_name", duplicate_name, false},
      {"peer_exits_idle", peer_exits_idle, false},
      {"peer_killed_busy", peer_killed_busy, false},
      {"peer_stops", peer_stops, false},
      {"after_peer_shutdown", after_peer_shutdown, false},
      {"injected_single", [] { return injected_failure(false); }, false},
      {"injected_fused", [] { return injected_failure(true); }, false},
      {"part_fails", part_fails, false},
      {"call_fails_one_rank", call_fails_one_rank, false},
  };
  for (const Case& c : cases) {
    if (name != c.name) continue;
    if (c.before_init) return c.run();
    // The one-rank faults are set on the last rank alone, before init() reads them.
    const char* one_rank = std::getenv("FAULTS_LAST_RANK_SETS");
    if (one_rank && launcher_rank() == launcher_size() - 1) {
      const std::string assignment = one_rank;
      const std::size_t eq = assignment.find('=');
      setenv(assignment.substr(0, eq).c_str(), assignment.substr(eq + 1).c_str(), 1);
    }
    if (Status s = init(); !s.ok()) return fail(launcher_rank(), "init: " + s.to_string());
    const int rc = c.run();
    Status down = shutdown();
    if (rc == 0 && !down.ok()) return fail(launcher_rank(), "shutdown: " + down.to_string());
    return rc;
  }
  std::fprintf(stderr, "unknown case %s\n", name.c_str());
  return 2;
}
