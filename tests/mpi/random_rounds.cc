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

using Bytes = std::vector<unsigned char>;

// What this rank holds for one collective until it is checked. Inputs, outputs and the
// caller-allocated output must stay valid until the handle completes (TensorRef's contract),
// so a Work never moves once submitted.
struct Work {
  const Collective* c = nullptr;
  std::vector<int> members;  // global ranks, in set order
  int me = 0;                // this rank's rank in the set
  ProcessSet set;
  std::vector<Bytes> in, out;  // per tensor; out is unused when in place
  std::vector<std::vector<int64_t>> shape;
  Bytes allocated;
  std::vector<int64_t> allocated_shape;
  Handle handle;
};

constexpr unsigned char kPoison = 0xa5;  // fills outputs, so an unwritten element shows

int64_t elements(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

Bytes storage(DataType t, int64_t count, unsigned char fill) {
  return Bytes(static_cast<std::size_t>(count) * dtype_size(t) + 1, fill);  // +1: never null
}

TensorRef ref(Bytes& b, DataType t, const std::vector<int64_t>& shape) {
  return TensorRef{b.data(), t, shape, Device::cpu()};
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// Reports mismatches with everything needed to reproduce them.
class Report {
 public:
  Report(uint64_t seed, int round) : seed_(seed), round_(round) {}
  int failures() const { return failures_; }

  void fail(const Work& w, int t, const std::string& what) {
    ++failures_;
    if (failures_ > 20) return;  // enough to debug; the count still fails the round
    const Collective& c = *w.c;
    std::fprintf(stderr,
                 "MISMATCH seed=%" PRIu64
                 " round=%d tensor=%s op=%s reduce=%s dtype=%s "
                 "pre=%g post=%g set=%d rank=%d: %s\n",
                 seed_, round_, c.tensors[t].name.c_str(), kind_name(c.kind),
                 reduces(c.kind) ? reduce_op_name(c.op) : "-", dtype_name(c.tensors[t].dtype),
                 c.prescale, c.postscale, c.set, rank(), what.c_str());
  }

  // Compares `count` elements at `got` with expected(i); reports the first that differs.
  template <class Expected>
  void compare(const Work& w, int t, const char* what, const void* got, int64_t count,
               Expected expected) {
    const DataType dt = w.c->tensors[t].dtype;
    const std::size_t size = dtype_size(dt);
    const auto* bytes = static_cast<const unsigned char*>(got);
    int64_t bad = 0;
    for (int64_t i = 0; i < count; ++i) {
      const double want = expected(i);
      unsigned char encoded[8];
      encode(dt, encoded, 0, want);
      if (std::memcmp(bytes + i * size, encoded, size) == 0) continue;
      if (bad++ == 0) {
        char line[256];
        std::snprintf(line, sizeof line, "%s index %" PRId64 ": got %.17g expected %.17g", what, i,
                      decode(dt, bytes, i), want);
        fail(w, t, line);
      }
    }
    if (bad > 1) {
      std::fprintf(stderr, "  (%" PRId64 " of %" PRId64 " elements differ)\n", bad, count);
    }
  }

 private:
  uint64_t seed_;
  int round_;
  int failures_ = 0;
};

std::vector<int64_t> shape_of(const Tensor& t, int64_t rows) {
  if (t.scalar) return {};
  std::vector<int64_t> s = {rows};
  s.insert(s.end(), t.inner.begin(), t.inner.end());
  return s;
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

// The output Chorus produced for a collective that allocates one.
std::pair<const void*, std::vector<int64_t>> produced(const Work& w) {
  if (w.c->allocate) return {w.allocated.data(), w.allocated_shape};
  return {w.handle.output().data, w.handle.output().shape};
}

// Element `index` of tensor t's reduction over the set, as every member must hold it.
double reduced(const Plan& plan, const Work& w, int t, int64_t index) {
  const Collective& c = *w.c;
  const DataType dt = c.tensors[t].dtype;
  double xs[4];
  const int n = static_cast<int>(w.members.size());
  for (int m = 0; m < n; ++m)
    xs[m] = prescaled(dt, plan.input(c, t, w.members[m], index), c.prescale);
  return reduce(dt, c.op, c.postscale, xs, n);
}

bool shape_is(Report& rep, const Work& w, const std::vector<int64_t>& got,
              const std::vector<int64_t>& want) {
  if (got == want) return true;
  rep.fail(w, 0, "output shape " + list(got) + ", expected " + list(want));
  return false;
}

// Checks every output of one collective against the reference.
void check_outputs(const Plan& plan, const Work& w, Report& rep) {
  const Collective& c = *w.c;
  const int n = static_cast<int>(w.members.size());
  const int g = w.members[w.me];
  const int64_t row = Plan::row_size(c.tensors[0]);
  switch (c.kind) {
    case Kind::kAllreduce:
    case Kind::kGrouped:
      for (std::size_t t = 0; t < c.tensors.size(); ++t) {
        const int ti = static_cast<int>(t);
        const int64_t count = elements(w.shape[t]);
        const void* out = c.in_place ? w.in[t].data() : w.out[t].data();
        rep.compare(w, ti, "output", out, count,
                    [&](int64_t i) { return reduced(plan, w, ti, i); });
        if (!c.in_place) {
          rep.compare(w, ti, "input (must be left alone)", w.in[t].data(), count,
                      [&](int64_t i) { return plan.input(c, ti, g, i); });
        }
      }
      break;
    case Kind::kBroadcast:
      rep.compare(w, 0, "output", w.in[0].data(), elements(w.shape[0]),
                  [&](int64_t i) { return plan.input(c, 0, w.members[c.root], i); });
      break;
    case Kind::kAllgather: {
      // Output row ranges per member, in set order.
      std::vector<int64_t> first_row(n + 1, 0);
      for (int m = 0; m < n; ++m)
        first_row[m + 1] = first_row[m] + plan.rows(c, 0, w.members[m], n);
      const auto [data, shape] = produced(w);
      if (!shape_is(rep, w, shape, shape_of(c.tensors[0], first_row[n]))) break;
      rep.compare(w, 0, "output", data, first_row[n] * row, [&](int64_t i) {
        int m = 0;
        while (first_row[m + 1] * row <= i) ++m;
        return plan.input(c, 0, w.members[m], i - first_row[m] * row);
      });
      break;
    }
    case Kind::kAlltoall: {
      // From each sender m: the rows it sends to this rank, which follow those it sends to
      // lower set ranks.
      std::vector<int64_t> from(n), offset(n), out_row(n + 1, 0);
      for (int m = 0; m < n; ++m) {
        const std::vector<int64_t> s = plan.splits(c, w.members[m], n);
        from[m] = s[w.me];
        offset[m] = std::accumulate(s.begin(), s.begin() + w.me, int64_t{0});
        out_row[m + 1] = out_row[m] + from[m];
      }
      if (w.handle.received_splits() != from) {
        rep.fail(
            w, 0,
            "received_splits " + list(w.handle.received_splits()) + ", expected " + list(from));
      }
      const auto [data, shape] = produced(w);
      if (!shape_is(rep, w, shape, shape_of(c.tensors[0], out_row[n]))) break;
      rep.compare(w, 0, "output", data, out_row[n] * row, [&](int64_t i) {
        int m = 0;
        while (out_row[m + 1] * row <= i) ++m;
        return plan.input(c, 0, w.members[m], (offset[m] - out_row[m]) * row + i);
      });
      break;
    }
    case Kind::kReducescatter: {
      const int64_t rows = c.tensors[0].rows;
      auto block = [&](int r) { return rows / n + (r < rows % n ? 1 : 0); };
      int64_t first = 0;
      for (int r = 0; r < w.me; ++r) first += block(r);
      const auto [data, shape] = produced(w);
      if (!shape_is(rep, w, shape, shape_of(c.tensors[0], block(w.me)))) break;
      rep.compare(w, 0, "output", data, block(w.me) * row,
                  [&](int64_t i) { return reduced(plan, w, 0, first * row + i); });
      break;
    }
  }
}

uint64_t fnv1a(const void* data, std::size_t bytes, uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

// One digest line per output tensor of w.
void write_digest(std::FILE* f, int round, const Work& w) {
  const Collective& c = *w.c;
  const bool same = c.kind != Kind::kAlltoall && c.kind != Kind::kReducescatter;
  for (std::size_t t = 0; t < c.tensors.size(); ++t) {
    const void* data = nullptr;
    std::vector<int64_t> shape = w.shape[t];
    if (c.kind == Kind::kAllgather || c.kind == Kind::kAlltoall || c.kind == Kind::kReducescatter) {
      std::tie(data, shape) = produced(w);
    } else {
      data = c.in_place || c.kind == Kind::kBroadcast ? w.in[t].data() : w.out[t].data();
    }
    const std::size_t bytes =
        static_cast<std::size_t>(elements(shape)) * dtype_size(c.tensors[t].dtype);
    uint64_t h = fnv1a(shape.data(), shape.size() * sizeof(int64_t));
    h = fnv1a(data, bytes, h);
    std::fprintf(f, "%d %s %016" PRIx64 " %d\n", round, c.tensors[t].name.c_str(), h, same ? 1 : 0);
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

// Runs one round on this rank; returns the number of failures seen here.
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

int run_round(const Plan& plan, const Args& a, int index, std::FILE* digest, Coverage* seen) {
  const int me = rank();
  const Round round = plan.round(index);
  Report rep(a.seed, index);
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
    if (Status s = w->handle.status(); !s.ok()) {
      rep.fail(*w, 0, "handle failed: " + s.to_string());
      continue;
    }
    check_outputs(plan, *w, rep);
    if (digest) write_digest(digest, index, *w);
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
      return rep.failures() + 1;
    }
    if (Status st = remove_process_set(sets[s]); !st.ok()) {
      std::fprintf(stderr, "FAIL round=%d: remove_process_set: %s\n", index,
                   st.to_string().c_str());
      return rep.failures() + 1;
    }
  }
  return rep.failures();
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
