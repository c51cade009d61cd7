// The negotiation at scale, simulated: P ranks as threads of this process, each with its own
// Negotiator over the in-memory transport, run two training steps of K tensors: the first
// with names no rank has seen (the coordinator decides), the second with the same names (the
// response cache answers). For each step it counts what crosses the transport (AND rounds
// and their words, gathers and the bytes rank 0 receives, broadcasts and their bytes), then
// prints the messages each would take under MPI's usual algorithms (the AND by recursive
// doubling, log2 P rounds; the gather linear at rank 0, P - 1 messages; the broadcast a
// binomial tree, log2 P rounds) and a least-squares fit of rank 0's gathered bytes against
// P. docs/scaling.md has the figures at 64 to 256 ranks.
//
//   negotiation_scale [--ranks 2,4,8] [--tensors K] [--csv FILE]
//
// Fails (exit 1) if a rank misses a response, if the cached step needs the coordinator, or if
// the first step does not. CTest runs it at small P (inproc.negotiation_scale).
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/requests.h"
#include "core/negotiator.h"
#include "in_memory_transport.h"

namespace chorus::testing {
namespace {

using Clock = Negotiator::Clock;

// What one rank's transport carried.
struct Counts {
  int64_t ands = 0;
  int64_t and_words = 0;  // per AND, the vector's length, summed over ANDs
  int64_t gathers = 0;
  int64_t gathered_bytes = 0;  // at rank 0: every member's message; elsewhere 0
  int64_t sent_to_gather = 0;  // this rank's own messages to the gather
  int64_t broadcasts = 0;
  int64_t broadcast_bytes = 0;
};

class CountingTransport final : public ControlTransport {
 public:
  CountingTransport(Hub* hub, int rank) : inner_(hub, rank) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Status start_and(std::vector<uint64_t>* bits) override {
    ++counts.ands;
    counts.and_words += static_cast<int64_t>(bits->size());
    return inner_.start_and(bits);
  }
  StatusOr<bool> test_and() override { return inner_.test_and(); }
  StatusOr<std::vector<std::string>> gather(const std::string& mine) override {
    ++counts.gathers;
    counts.sent_to_gather += static_cast<int64_t>(mine.size());
    StatusOr<std::vector<std::string>> all = inner_.gather(mine);
    if (all.ok()) {
      for (const std::string& m : *all) counts.gathered_bytes += static_cast<int64_t>(m.size());
    }
    return all;
  }
  Status broadcast(std::string* data) override {
    Status s = inner_.broadcast(data);
    ++counts.broadcasts;
    counts.broadcast_bytes += static_cast<int64_t>(data->size());
    return s;
  }

  Counts counts;

 private:
  InMemoryTransport inner_;
};

struct StepResult {
  Counts rank0;        // rank 0's counts over the step
  int64_t rounds = 0;  // negotiation rounds the step took (the same on every rank)
  bool coordinator = false;
  double seconds = 0;
  std::string error;
};

// Drives rounds until every one of `names` is answered on this rank.
std::string run_step(Negotiator& n, std::deque<Request>& keep,
                     const std::vector<std::string>& names, int rank, int64_t* rounds,
                     bool* coordinator) {
  for (const std::string& name : names) {
    Request q = allreduce(name, {1024});
    q.rank = rank;
    n.submit(keep.emplace_back(std::move(q)), Clock::now());
  }
  std::size_t answered = 0;
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  while (answered < names.size()) {
    if (Clock::now() > deadline) return "rank " + std::to_string(rank) + ": step did not finish";
    if (Status s = n.start(false, Clock::now()); !s.ok()) return s.to_string();
    for (;;) {
      StatusOr<bool> done = n.poll(false);
      if (!done.ok()) return done.status().to_string();
      if (*done) break;
      std::this_thread::yield();
    }
    if (Status s = n.complete(Clock::now()); !s.ok()) return s.to_string();
    ++*rounds;
    *coordinator = *coordinator || n.round().used_coordinator;
    for (const auto& r : n.round().responses) {
      if (!r->status.ok()) return "rank " + std::to_string(rank) + ": " + r->status.to_string();
      ++answered;
    }
  }
  return {};
}

// Two steps on `ranks` threads; results per step, as rank 0 saw them.
std::vector<StepResult> simulate(int ranks, int tensors) {
  Hub hub(ranks, std::chrono::minutes(5));
  std::vector<std::unique_ptr<CountingTransport>> transports;
  std::vector<std::unique_ptr<Negotiator>> negotiators;
  NegotiatorOptions options;
  options.stall_check_seconds = 0;
  options.liveness_seconds = 0;
  for (int r = 0; r < ranks; ++r) {
    transports.push_back(std::make_unique<CountingTransport>(&hub, r));
    negotiators.push_back(std::make_unique<Negotiator>(transports[r].get(), options, "global"));
  }
  std::vector<std::string> names;
  for (int i = 0; i < tensors; ++i) names.push_back("model.layer" + std::to_string(i) + ".weight");

  std::vector<StepResult> steps(2);
  std::vector<std::deque<Request>> keep(ranks);
  for (int step = 0; step < 2; ++step) {
    const Counts before = transports[0]->counts;
    std::vector<std::string> errors(ranks);
    std::vector<int64_t> rounds(ranks, 0);
    std::vector<char> coordinator(ranks, 0);
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        bool used = false;
        errors[r] = run_step(*negotiators[r], keep[r], names, r, &rounds[r], &used);
        coordinator[r] = used;
        if (!errors[r].empty()) hub.abort(errors[r]);
      });
    }
    for (auto& t : threads) t.join();
    StepResult& out = steps[step];
    out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    for (int r = 0; r < ranks && out.error.empty(); ++r) out.error = errors[r];
    const Counts& after = transports[0]->counts;
    out.rank0 = {after.ands - before.ands,
                 after.and_words - before.and_words,
                 after.gathers - before.gathers,
                 after.gathered_bytes - before.gathered_bytes,
                 after.sent_to_gather - before.sent_to_gather,
                 after.broadcasts - before.broadcasts,
                 after.broadcast_bytes - before.broadcast_bytes};
    out.rounds = rounds[0];
    out.coordinator = coordinator[0] != 0;
  }
  return steps;
}

int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t comma = s.find(',', at);
    out.push_back(std::atoi(s.substr(at, comma - at).c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

int run(int argc, char** argv) {
  std::vector<int> sizes = {2, 4, 8, 16};
  int tensors = 100;
  std::string csv_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--ranks") {
      sizes = parse_list(argv[i + 1]);
    } else if (a == "--tensors") {
      tensors = std::atoi(argv[i + 1]);
    } else if (a == "--csv") {
      csv_path = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: negotiation_scale [--ranks 2,4,8] [--tensors K] [--csv FILE]\n");
      return 2;
    }
  }
  std::FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (!csv_path.empty() && !csv) {
    std::fprintf(stderr, "negotiation_scale: cannot write %s\n", csv_path.c_str());
    return 2;
  }
  if (csv) {
    std::fprintf(csv,
                 "ranks,step,rounds,coordinator,ands,and_bytes,gathers,gathered_bytes,"
                 "broadcasts,broadcast_bytes,and_messages,gather_messages,"
                 "broadcast_rounds,seconds\n");
  }
  std::printf(
      "%d tensors per step; counts as rank 0 saw them; messages as MPI's algorithms "
      "would send them\n\n",
      tensors);
  std::printf(
      "| ranks | step | rounds | ANDs | AND bytes | AND msgs/rank | gathers | bytes "
      "into rank 0 | gather msgs at rank 0 | broadcast bytes | bcast rounds | "
      "simulated s |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  bool ok = true;
  std::vector<double> xs, ys;  // ranks, bytes gathered at rank 0 in the first step
  for (int p : sizes) {
    const std::vector<StepResult> steps = simulate(p, tensors);
    for (int step = 0; step < 2; ++step) {
      const StepResult& s = steps[step];
      if (!s.error.empty()) {
        std::printf("P=%d step %d failed: %s\n", p, step + 1, s.error.c_str());
        ok = false;
        continue;
      }
      const int log_p = ceil_log2(p);
      const int64_t and_messages = s.rank0.ands * log_p;
      const int64_t gather_messages = s.rank0.gathers * (p - 1);
      const int64_t bcast_rounds = s.rank0.broadcasts * log_p;
      std::printf(
          "| %d | %s | %lld | %lld | %lld | %lld | %lld | %lld | %lld | %lld | %lld | "
          "%.3f |\n",
          p, step == 0 ? "new names" : "cached", static_cast<long long>(s.rounds),
          static_cast<long long>(s.rank0.ands), static_cast<long long>(s.rank0.and_words * 8),
          static_cast<long long>(and_messages), static_cast<long long>(s.rank0.gathers),
          static_cast<long long>(s.rank0.gathered_bytes), static_cast<long long>(gather_messages),
          static_cast<long long>(s.rank0.broadcast_bytes), static_cast<long long>(bcast_rounds),
          s.seconds);
      if (csv) {
        std::fprintf(
            csv, "%d,%d,%lld,%d,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%.6f\n", p, step + 1,
            static_cast<long long>(s.rounds), s.coordinator ? 1 : 0,
            static_cast<long long>(s.rank0.ands), static_cast<long long>(s.rank0.and_words * 8),
            static_cast<long long>(s.rank0.gathers), static_cast<long long>(s.rank0.gathered_bytes),
            static_cast<long long>(s.rank0.broadcasts),
            static_cast<long long>(s.rank0.broadcast_bytes), static_cast<long long>(and_messages),
            static_cast<long long>(gather_messages), static_cast<long long>(bcast_rounds),
            s.seconds);
      }
      if (step == 0 && !s.coordinator) {
        std::printf("P=%d: the step of new names did not reach the coordinator\n", p);
        ok = false;
      }
      if (step == 1 && (s.coordinator || s.rank0.gathers != 0)) {
        std::printf("P=%d: the step of cached names used the coordinator\n", p);
        ok = false;
      }
    }
    if (steps[0].error.empty()) {
      xs.push_back(p);
      ys.push_back(static_cast<double>(steps[0].rank0.gathered_bytes));
    }
  }
  if (xs.size() >= 2) {
    double mx = 0, my = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      mx += xs[i];
      my += ys[i];
    }
    mx /= xs.size();
    my /= xs.size();
    double sxy = 0, sxx = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      sxy += (xs[i] - mx) * (ys[i] - my);
      sxx += (xs[i] - mx) * (xs[i] - mx);
    }
    const double slope = sxy / sxx;
    std::printf("\nbytes into rank 0 on a step of new names ~= %.0f + %.1f * P (least squares)\n",
                my - slope * mx, slope);
  }
  if (csv) std::fclose(csv);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace chorus::testing

int main(int argc, char** argv) { return chorus::testing::run(argc, argv); }
