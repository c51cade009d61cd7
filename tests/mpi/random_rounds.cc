// Randomized differential test of the collectives, under mpirun with 1 to 4 ranks. Each
// round creates a few process sets, then every rank submits its part of the round's
// collectives (random_plan.h) asynchronously, in an order of its own (from one thread, or
// now and then from two), waits for them, and compares every output bit for bit with the
// result it computes itself (reference.h) from every rank's inputs, which it derives from
// the seed. A round ends with an agreement on whether any rank saw a mismatch, so the job
// fails as a whole.
//
//   random_rounds [--seed N|random] [--rounds N] [--max-tensors N]
//                 [--values exact|arbitrary] [--digest PREFIX]
//
// --values arbitrary gives float tensors arbitrary values: the check of their sums and
// products then relies on the documented combination in set-rank order, and the digest
// shows whether the bits depend on fusion (random_digests.sh). --digest writes
// PREFIX.<rank>, one line per output tensor: "<round> <name> <hash> <same>", where same=1
// marks outputs that every member of the set must hold bit for bit.
// Exit code 0 when every output matched on every rank; mismatches are printed with the
// seed, round, tensor, op, dtype, index, and the value got and expected.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "random_check.h"
#include "random_plan.h"
#include "reference.h"

namespace chorus::random_rounds {
namespace {

struct Args {
  uint64_t seed = 1;
  bool random_seed = false;
  int rounds = 10;
  int max_tensors = 200;
  bool exact = true;
  std::string digest;
};

bool parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--seed" && value == "random") {
      a->random_seed = true;
    } else if (key == "--seed") {
      a->seed = std::strtoull(value.c_str(), nullptr, 10);
    } else if (key == "--rounds") {
      a->rounds = std::atoi(value.c_str());
    } else if (key == "--max-tensors") {
      a->max_tensors = std::max(1, std::atoi(value.c_str()));
    } else if (key == "--values" && (value == "exact" || value == "arbitrary")) {
      a->exact = value == "exact";
    } else if (key == "--digest") {
      a->digest = value;
    } else {
      return false;
    }
  }
  return argc % 2 == 1;
}

// Builds this rank's inputs and submits the collective.
void submit(const Plan& plan, Work& w) {
  const Collective& c = *w.c;
  const int g = w.members[w.me];
  const int n = static_cast<int>(w.members.size());
  for (std::size_t t = 0; t < c.tensors.size(); ++t) {
    const Tensor& x = c.tensors[t];
    w.shape.push_back(shape_of(x, plan.rows(c, static_cast<int>(t), g, n)));
    const int64_t count = elements(w.shape[t]);
    w.in.push_back(storage(x.dtype, count, 0));
    for (int64_t i = 0; i < count; ++i)
      encode(x.dtype, w.in[t].data(), i, plan.input(c, static_cast<int>(t), g, i));
    const bool separate = !c.in_place && (c.kind == Kind::kAllreduce || c.kind == Kind::kGrouped);
    w.out.push_back(separate ? storage(x.dtype, count, kPoison) : Bytes());
  }
  const DataType dt0 = c.tensors[0].dtype;
  OutputAllocator allocate;
  if (c.allocate) {
    allocate = [&w, dt0](const std::vector<int64_t>& shape) -> StatusOr<TensorRef> {
      w.allocated_shape = shape;
      w.allocated = storage(dt0, elements(shape), kPoison);
      return ref(w.allocated, dt0, shape);
    };
  }
  auto input = [&](std::size_t t) { return ref(w.in[t], c.tensors[t].dtype, w.shape[t]); };
  auto output = [&](std::size_t t) {
    return c.in_place ? input(t) : ref(w.out[t], c.tensors[t].dtype, w.shape[t]);
  };  // allreduce and grouped allreduce only
  switch (c.kind) {
    case Kind::kAllreduce:
    case Kind::kGrouped: {
      AllreduceOptions o;
      o.op = c.op;
      o.prescale = c.prescale;
      o.postscale = c.postscale;
      o.process_set = w.set;
      if (c.kind == Kind::kAllreduce) {
        w.handle = allreduce(c.tensors[0].name, input(0), output(0), o);
        break;
      }
      std::vector<std::string> names;
      std::vector<TensorRef> ins, outs;
      for (std::size_t t = 0; t < c.tensors.size(); ++t) {
        names.push_back(c.tensors[t].name);
        ins.push_back(input(t));
        outs.push_back(output(t));
      }
      w.handle = grouped_allreduce(names, ins, outs, o);
      break;
    }
    case Kind::kAllgather: {
      AllgatherOptions o;
      o.process_set = w.set;
      o.allocate = allocate;
      w.handle = allgather(c.tensors[0].name, input(0), o);
      break;
    }
    case Kind::kBroadcast: {
      BroadcastOptions o;
      o.process_set = w.set;
      w.handle = broadcast(c.tensors[0].name, input(0), c.root, o);
      break;
    }
    case Kind::kAlltoall: {
      AlltoallOptions o;
      o.process_set = w.set;
      o.allocate = allocate;
      std::vector<int64_t> splits;
      if (!c.even_splits) splits = plan.splits(c, g, n);
      w.handle = alltoall(c.tensors[0].name, input(0), splits, o);
      break;
    }
    case Kind::kReducescatter: {
      ReducescatterOptions o;
      o.op = c.op;
      o.prescale = c.prescale;
      o.postscale = c.postscale;
      o.process_set = w.set;
      o.allocate = allocate;
      w.handle = reducescatter(c.tensors[0].name, input(0), o);
      break;
    }
  }
}

// Waits for every handle: in submission order, in reverse, or by polling them all.
void wait_all(std::vector<std::unique_ptr<Work>>& work, const std::vector<std::size_t>& order,
              Rng& rng) {
  const int how = static_cast<int>(rng.between(0, 2));
  if (how == 2) {
    std::vector<bool> done(work.size(), false);
    for (std::size_t left = work.size(); left > 0;) {
      for (std::size_t k = 0; k < work.size(); ++k) {
        if (!done[k] && work[k]->handle.poll()) done[k] = true, --left;
      }
      std::this_thread::yield();
    }
    return;
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    work[order[how == 0 ? k : order.size() - 1 - k]]->handle.wait();
  }
}

// What a rank checked, by collective, to show what a seed covered.
struct Coverage {
  int64_t tensors[6] = {};
  int64_t in_sets = 0;  // tensors on process sets other than the global one

  std::string summary() const {
    std::string s;
    int64_t all = 0;
    for (int k = 0; k < 6; ++k) {
      all += tensors[k];
      s += std::string(k ? ", " : "") + kind_name(static_cast<Kind>(k)) + " " +
           std::to_string(tensors[k]);
    }
    return std::to_string(all) + " tensors checked (" + s + "; " + std::to_string(in_sets) +
           " on process sets)";
  }
};

// Runs one round on this rank; returns the number of failures seen here.
int run_round(const Plan& plan, const Args& a, int index, std::FILE* digest, Coverage* seen) {
  const int me = rank();
  const Round round = plan.round(index);
  int failures = 0;
  std::vector<ProcessSet> sets;
  for (const std::vector<int>& ranks : round.sets) {
    StatusOr<ProcessSet> ps = add_process_set(ranks);
    if (!ps.ok()) {
      std::fprintf(stderr, "FAIL seed=%" PRIu64 " round=%d: add_process_set: %s\n", a.seed, index,
                   ps.status().to_string().c_str());
      return 1;
    }
    sets.push_back(*ps);
  }
  std::vector<std::unique_ptr<Work>> work;
  for (const Collective& c : round.collectives) {
    std::vector<int> members = plan.members(round, c);
    auto at = std::find(members.begin(), members.end(), me);
    if (at == members.end()) continue;
    auto w = std::make_unique<Work>();
    w->c = &c;
    w->me = static_cast<int>(at - members.begin());
    w->members = std::move(members);
    w->set = c.set < 0 ? ProcessSet::global() : sets[c.set];
    work.push_back(std::move(w));
  }
  Rng local{a.seed, 0x4f52444552ULL, static_cast<uint64_t>(index), static_cast<uint64_t>(me)};
  std::vector<std::size_t> order(work.size());
  std::iota(order.begin(), order.end(), 0);
  for (std::size_t k = order.size(); k > 1; --k)
    std::swap(order[k - 1], order[static_cast<std::size_t>(local.between(0, k - 1))]);
  if (local.chance(0.25)) {
    // Two trainer threads, each submitting every other collective of this rank's order.
    std::thread other([&] {
      for (std::size_t k = 1; k < order.size(); k += 2) submit(plan, *work[order[k]]);
    });
    for (std::size_t k = 0; k < order.size(); k += 2) submit(plan, *work[order[k]]);
    other.join();
  } else {
    for (std::size_t k : order) submit(plan, *work[k]);
  }
  wait_all(work, order, local);
  for (const auto& w : work) {
    const auto count = static_cast<int64_t>(w->c->tensors.size());
    seen->tensors[static_cast<int>(w->c->kind)] += count;
    if (w->c->set >= 0) seen->in_sets += count;
    const int failed = check(plan, a.seed, index, *w);
    if (digest && failed == 0) write_digest(digest, index, *w);
    failures += failed;
  }
  for (std::size_t s = 0; s < sets.size(); ++s) {
    const auto& ranks = round.sets[s];
    const auto at = std::find(ranks.begin(), ranks.end(), me);
    const int want = at == ranks.end() ? -1 : static_cast<int>(at - ranks.begin());
    if (process_set_rank(sets[s]) != want ||
        process_set_size(sets[s]) != static_cast<int>(ranks.size())) {
      std::fprintf(stderr, "FAIL round=%d: process set %d: rank %d size %d, expected %d and %zu\n",
                   index, sets[s].id, process_set_rank(sets[s]), process_set_size(sets[s]), want,
                   ranks.size());
      ++failures;
    }
    if (Status st = remove_process_set(sets[s]); !st.ok()) {
      std::fprintf(stderr, "FAIL round=%d: remove_process_set: %s\n", index,
                   st.to_string().c_str());
      ++failures;
    }
  }
  return failures;
}

// Every rank learns whether any rank failed (a max over the global set).
bool all_passed(int failures) {
  int32_t flag = failures > 0 ? 1 : 0;
  TensorRef t{&flag, DataType::kInt32, {1}, Device::cpu()};
  AllreduceOptions o;
  o.op = ReduceOp::kMax;
  Status s = allreduce("random_rounds.verdict", t, t, o).wait();
  if (!s.ok())
    std::fprintf(stderr, "FAIL: the verdict allreduce failed: %s\n", s.to_string().c_str());
  return s.ok() && flag == 0;
}

// With --seed random, rank 0's choice reaches every rank.
bool agree_on_seed(Args* a) {
  int64_t seed = static_cast<int64_t>(std::chrono::steady_clock::now().time_since_epoch().count() &
                                      0xffffffffffff);
  TensorRef t{&seed, DataType::kInt64, {1}, Device::cpu()};
  if (!broadcast("random_rounds.seed", t, 0).wait().ok()) return false;
  a->seed = static_cast<uint64_t>(seed);
  return true;
}

int run(Args a) {
  if (a.random_seed && !agree_on_seed(&a)) return 1;
  const int me = rank(), world = size();
  if (me == 0) {
    std::fprintf(stderr,
                 "random_rounds: seed %" PRIu64
                 ", %d rounds, up to %d tensors, %s values, %d "
                 "ranks; reproduce with: mpirun -np %d random_rounds --seed %" PRIu64
                 " --rounds %d --max-tensors %d --values %s\n",
                 a.seed, a.rounds, a.max_tensors, a.exact ? "exact" : "arbitrary", world, world,
                 a.seed, a.rounds, a.max_tensors, a.exact ? "exact" : "arbitrary");
  }
  Plan plan({a.seed, world, a.exact, a.max_tensors});
  std::FILE* digest = nullptr;
  if (!a.digest.empty()) {
    const std::string path = a.digest + "." + std::to_string(me);
    digest = std::fopen(path.c_str(), "w");
    if (!digest) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 2;
    }
  }
  Coverage seen;
  bool ok = true;
  for (int r = 0; r < a.rounds && ok; ++r) {
    ok = all_passed(run_round(plan, a, r, digest, &seen));
  }
  if (digest) std::fclose(digest);
  if (!ok) {
    if (me == 0) std::fprintf(stderr, "random_rounds: FAILED with seed %" PRIu64 "\n", a.seed);
    return 1;
  }
  std::fprintf(stderr, "random_rounds: rank %d ok, seed %" PRIu64 ": %s\n", me, a.seed,
               seen.summary().c_str());
  return 0;
}

}  // namespace
}  // namespace chorus::random_rounds

int main(int argc, char** argv) {
  chorus::random_rounds::Args args;
  if (!chorus::random_rounds::parse(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: random_rounds [--seed N|random] [--rounds N] [--max-tensors N] "
                 "[--values exact|arbitrary] [--digest PREFIX]\n");
    return 2;
  }
  if (chorus::Status s = chorus::init(); !s.ok()) {
    std::fprintf(stderr, "chorus::init failed: %s\n", s.to_string().c_str());
    return 2;
  }
  int rc = 2;
  if (chorus::size() > 4) {
    std::fprintf(stderr, "random_rounds: the value bounds assume at most 4 ranks\n");
  } else {
    rc = chorus::random_rounds::run(args);
  }
  if (chorus::Status s = chorus::shutdown(); !s.ok()) {
    std::fprintf(stderr, "chorus::shutdown failed: %s\n", s.to_string().c_str());
    return rc ? rc : 3;
  }
  return rc;
}
