// Trainer threads that wait on their handles run the cycle themselves where no phase needs
// MPI (core/cycle_driver.h), and hand the rest to the background thread. This job makes them
// do both, many times, and checks every result; expect.sh then checks, from the debug log,
// that waiting trainers did run cycles. A hand-over that loses its wake-up hangs the job
// (the hard timeout fails it); one that runs MPI off the background thread breaks MPI.
//
//   waiting_trainers      exits 0 when every result was right on this rank
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"

namespace {

using namespace chorus;

TensorRef ref(std::vector<float>& v) {
  return TensorRef{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, Device::cpu()};
}

// One allreduce of `n` floats, each rank contributing (rank + 1) * base, over `set`, whose
// members are global ranks 0 .. members - 1 (all of them by default); waited on with `wait`.
// Empty on success, else what went wrong.
template <typename Wait>
std::string sum_once(const std::string& name, std::size_t n, float base, Wait wait,
                     ProcessSet set = {}, int members = 0) {
  if (members == 0) members = size();
  std::vector<float> v(n, static_cast<float>(rank() + 1) * base);
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  o.process_set = set;
  Handle h = allreduce(name, ref(v), ref(v), o);
  if (Status s = wait(h); !s.ok()) return name + ": " + s.to_string();
  const float want = base * static_cast<float>(members * (members + 1) / 2);
  for (float x : v) {
    if (x != want) return name + ": got " + std::to_string(x) + ", want " + std::to_string(want);
  }
  return {};
}

Status wait_forever(const Handle& h) { return h.wait(); }

std::string run() {
  // 1. The synchronous pattern: each allreduce waited on at once, cached after the first.
  for (int i = 0; i < 300; ++i) {
    if (auto e = sum_once("sync", 1 + i % 7, 1.0f + i, wait_forever); !e.empty()) return e;
  }
  // 2. New names: every round needs the coordinator, which only the background thread runs.
  for (int i = 0; i < 40; ++i) {
    if (auto e = sum_once("fresh." + std::to_string(i), 5, 2.0f, wait_forever); !e.empty())
      return e;
  }
  // 3. An allreduce then an allgather (MPI: the background thread executes it), alternating.
  for (int i = 0; i < 40; ++i) {
    if (auto e = sum_once("before.gather", 3, 3.0f, wait_forever); !e.empty()) return e;
    std::vector<float> mine(2, static_cast<float>(rank()));
    Handle g = allgather("gather", ref(mine));
    if (Status s = g.wait(); !s.ok()) return "allgather: " + s.to_string();
    const auto* out = static_cast<const float*>(g.output().data);
    for (int r = 0; r < size(); ++r) {
      if (out[2 * r] != r || out[2 * r + 1] != r)
        return "allgather: wrong block " + std::to_string(r);
    }
  }
  // 4. After the synchronous pattern, a submit that the thread then polls, and one it waits
  //    on with a timeout: neither runs the work on this thread, the background thread must.
  for (int i = 0; i < 20; ++i) {
    if (auto e = sum_once("sync", 4, 1.0f, wait_forever); !e.empty()) return e;
    auto poll_until_done = [](const Handle& h) {
      while (!h.poll()) std::this_thread::yield();
      return h.status();
    };
    if (auto e = sum_once("polled", 4, 5.0f, poll_until_done); !e.empty()) return e;
    if (auto e = sum_once("sync", 4, 1.0f, wait_forever); !e.empty()) return e;
    auto wait_timed = [](const Handle& h) {
      Status s;
      do {
        s = h.wait(std::chrono::milliseconds(50));
      } while (s.code() == StatusCode::kTimedOut);
      return s;
    };
    if (auto e = sum_once("timed", 4, 6.0f, wait_timed); !e.empty()) return e;
  }
  // 5. Two trainer threads at once, each in the synchronous pattern on its own names: they
  //    take turns at the cycle, and with the background thread.
  std::atomic<bool> failed{false};
  std::string errors[2];
  auto trainer = [&](int t) {
    for (int i = 0; i < 200 && !failed.load(); ++i) {
      std::string e =
          sum_once("thread" + std::to_string(t), 1 + (i + t) % 5, 1.0f + t, wait_forever);
      if (!e.empty()) {
        errors[t] = e;
        failed.store(true);
      }
    }
  };
  std::thread a(trainer, 0);
  std::thread b(trainer, 1);
  a.join();
  b.join();
  if (failed.load()) return errors[0].empty() ? errors[1] : errors[0];
  // 6. A second process set makes rounds go through MPI: only the background thread runs
  //    them until the set is removed.
  StatusOr<ProcessSet> pair = add_process_set({0, 1});
  if (!pair.ok()) return "add_process_set: " + pair.status().to_string();
  for (int i = 0; i < 20; ++i) {
    if (auto e = sum_once("with.set", 3, 1.0f, wait_forever); !e.empty()) return e;
    if (process_set_rank(*pair) >= 0) {
      if (auto e = sum_once("in.set", 3, 1.0f, wait_forever, *pair, 2); !e.empty()) return e;
    }
  }
  if (Status s = remove_process_set(*pair); !s.ok()) return "remove_process_set: " + s.to_string();
  for (int i = 0; i < 100; ++i) {
    if (auto e = sum_once("after.set", 2, 1.0f, wait_forever); !e.empty()) return e;
  }
  return {};
}

}  // namespace

int main() {
  if (Status s = init(); !s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.to_string().c_str());
    return 1;
  }
  const std::string error = run();
  if (!error.empty()) std::fprintf(stderr, "rank %d: FAILED: %s\n", rank(), error.c_str());
  if (error.empty()) std::fprintf(stderr, "rank %d: waiting trainers ok\n", rank());
  Status down = shutdown();
  if (!down.ok()) std::fprintf(stderr, "rank %d: shutdown: %s\n", rank(), down.to_string().c_str());
  return error.empty() && down.ok() ? 0 : 1;
}
