// Jobs whose timelines and flight records the chorus-trace tests read (tests/trace/):
//
//   trace_jobs steps N SLOW_RANK SLOW_MS   N training-like steps: four gradients allreduced
//                                          asynchronously, waited, then chorus::mark_step();
//                                          SLOW_RANK computes SLOW_MS longer before each step
//   trace_jobs stall_names                 one stall class each, made on purpose on 3 ranks;
//   trace_jobs stall_order                 CHORUS_STALL_SHUTDOWN_SECONDS ends the job with the
//   trace_jobs stall_never                 class's exit status (protocol/stall_classes.h)
//
// (The fourth class, a rank that stopped taking part, is tests/mpi/scenarios stall_shutdown.)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"

namespace {

using namespace chorus;
using namespace std::chrono_literals;

int fail(const std::string& what) {
  std::fprintf(stderr, "trace_jobs failed on rank %d: %s\n", rank(), what.c_str());
  return 1;
}

TensorRef ref(std::vector<float>& v) {
  return TensorRef{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, Device::cpu()};
}

int steps(int n, int slow_rank, int slow_ms) {
  std::vector<std::vector<float>> grads = {
      std::vector<float>(1 << 18, 1.0f), std::vector<float>(1 << 12, 1.0f),
      std::vector<float>(1 << 10, 1.0f), std::vector<float>(16, 1.0f)};
  for (int step = 0; step < n; ++step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(rank() == slow_rank ? slow_ms + 5 : 5));
    std::vector<Handle> handles;
    for (std::size_t g = grads.size(); g-- > 0;) {
      for (float& x : grads[g]) x = 1.0f;
      handles.push_back(allreduce("grad." + std::to_string(g), ref(grads[g]), ref(grads[g])));
    }
    for (Handle& h : handles) {
      if (Status s = h.wait(); !s.ok()) return fail(s.to_string());
    }
    for (const auto& g : grads) {
      if (g.front() != 1.0f || g.back() != 1.0f) return fail("wrong average");
    }
    mark_step();
  }
  return 0;
}

// Each stall job blocks in a wait that the stall shutdown ends first.
int blocked_until_the_stall_ends_the_job(Handle h) {
  h.wait(60s);
  return fail("the stall inspector did not end the job");
}

// Ranks 0 and 1 name a tensor one way, rank 2 with a prefix: a naming bug (exit 81).
int stall_names() {
  std::vector<float> v(16, 1.0f);
  const std::string name = rank() == 2 ? "module.layer1.weight" : "layer1.weight";
  return blocked_until_the_stall_ends_the_job(allreduce(name, ref(v), ref(v)));
}

// Rank 0 waits for 'a' before submitting 'b', the others wait for 'b' first: a deadlock of
// the program (exit 82).
int stall_order() {
  std::vector<float> v(16, 1.0f);
  return blocked_until_the_stall_ends_the_job(
      allreduce(rank() == 0 ? "order.a" : "order.b", ref(v), ref(v)));
}

// Rank 0 submits 'only.rank0' and 'shared'; rank 1 submits 'shared' only; rank 2 nothing:
// 'only.rank0' waits for rank 1, which submitted something else meanwhile (exit 83), and
// 'shared' waits for rank 2, which stopped taking part.
int stall_never() {
  std::vector<float> a(16, 1.0f), b(16, 1.0f);
  Handle only;
  if (rank() == 0) only = allreduce("only.rank0", ref(a), ref(a));
  if (rank() != 2) return blocked_until_the_stall_ends_the_job(allreduce("shared", ref(b), ref(b)));
  std::this_thread::sleep_for(60s);
  return fail("the stall inspector did not end the job");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "";
  if (Status s = init(); !s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.to_string().c_str());
    return 1;
  }
  int rc = 2;
  if (name == "steps" && argc == 5) {
    rc = steps(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]));
  } else if (name == "stall_names") {
    rc = stall_names();
  } else if (name == "stall_order") {
    rc = stall_order();
  } else if (name == "stall_never") {
    rc = stall_never();
  } else {
    std::fprintf(stderr,
                 "usage: trace_jobs steps N SLOW_RANK SLOW_MS | stall_names | "
                 "stall_order | stall_never\n");
  }
  Status down = shutdown();
  if (rc == 0 && !down.ok()) return fail("shutdown: " + down.to_string());
  return rc;
}
