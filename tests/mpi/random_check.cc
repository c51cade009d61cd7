#include "random_check.h"

#include <cinttypes>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "reference.h"

namespace chorus::random_rounds {

int64_t elements(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

Bytes storage(DataType t, int64_t count, unsigned char fill) {
  return Bytes(static_cast<std::size_t>(count) * dtype_size(t) + 1, fill);
}

TensorRef ref(Bytes& b, DataType t, const std::vector<int64_t>& shape) {
  return TensorRef{b.data(), t, shape, Device::cpu()};
}

std::vector<int64_t> shape_of(const Tensor& t, int64_t rows) {
  if (t.scalar) return {};
  std::vector<int64_t> s = {rows};
  s.insert(s.end(), t.inner.begin(), t.inner.end());
  return s;
}

namespace {

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

}  // namespace

int check(const Plan& plan, uint64_t seed, int round, const Work& w) {
  Report rep(seed, round);
  if (Status s = w.handle.status(); !s.ok()) {
    rep.fail(w, 0, "handle failed: " + s.to_string());
  } else {
    check_outputs(plan, w, rep);
  }
  return rep.failures();
}

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

}  // namespace chorus::random_rounds
