#include "random_plan.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>
#include <utility>

#include "reference.h"

namespace chorus::random_rounds {
namespace {

// Tags that keep the generators of different purposes apart.
constexpr uint64_t kRoundTag = 0x524f554e44ULL;
constexpr uint64_t kSlotTag = 0x534c4f54ULL;
constexpr uint64_t kShapeTag = 0x5348415045ULL;
constexpr uint64_t kValueTag = 0x56414c5545ULL;
// Recurring collectives reuse one of this many names, with the same parameters in every
// round, so that later rounds find them in the response cache.
constexpr int kSlots = 64;

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <class T>
T pick(Rng& rng, const std::vector<T>& from) {
  return from[static_cast<std::size_t>(rng.between(0, static_cast<int64_t>(from.size()) - 1))];
}

// Input bounds of exact mode: with at most 4 ranks and the scale factors below, every
// result stays within its dtype's exact range (checked case by case in the comments).
std::pair<int64_t, int64_t> value_range(DataType t, Kind kind, ReduceOp op) {
  if (!reduces(kind)) {
    switch (t) {
      case DataType::kUInt8: return {0, 255};
      case DataType::kInt8: return {-128, 127};
      case DataType::kInt16: return {INT16_MIN, INT16_MAX};
      case DataType::kInt32: return {INT32_MIN, INT32_MAX};
      case DataType::kInt64: return {-(int64_t{1} << 50), int64_t{1} << 50};
      case DataType::kFloat16: return {-2048, 2048};
      case DataType::kBFloat16: return {-256, 256};
      default: return {-(int64_t{1} << 24), int64_t{1} << 24};
    }
  }
  const bool minmax = op == ReduceOp::kMin || op == ReduceOp::kMax;
  if (op == ReduceOp::kProduct) {
    switch (t) {
      case DataType::kUInt8: return {0, 3};  // 3^4 * post 3 = 243
      case DataType::kInt8: return {-1, 2};  // 2^4 * post 3 = 48 (pre +-1)
      default: return {-3, 3};               // (3*2)^4 * 4 = 5184 = 81 * 64, exact in bf16
    }
  }
  switch (t) {
    case DataType::kUInt8:
      return minmax ? std::pair<int64_t, int64_t>{0, 40}   // 40*2*3
                    : std::pair<int64_t, int64_t>{0, 10};  // 4*10*2*3
    case DataType::kInt8:
      return minmax ? std::pair<int64_t, int64_t>{-20, 20}  // 20*2*3
                    : std::pair<int64_t, int64_t>{-5, 5};   // 4*5*2*3
    case DataType::kInt16:                                  // 4*1000*2*3 = 24000
    case DataType::kInt32:
    case DataType::kInt64: return {-1000, 1000};
    // Sums of 4 * 8 * 2 = 64, times 4 = 256; the fractions of pre 0.5 and 0.25 and post
    // 0.375 keep at most 8 significant bits (bfloat16).
    default: return {-8, 8};
  }
}

// Scale factors allowed for dtype t: whole factors for integers, so that exact mode stays
// exact (a fraction truncates; the unit and Python tests check that rule).
std::vector<double> scale_choices(DataType t, ReduceOp op, bool pre) {
  switch (t) {
    case DataType::kUInt8:
      if (pre) return op == ReduceOp::kProduct ? std::vector<double>{1} : std::vector<double>{1, 2};
      return {1, 2, 3};
    case DataType::kInt8:
      if (pre && op == ReduceOp::kProduct) return {1, -1};
      return pre ? std::vector<double>{1, 2, -1} : std::vector<double>{1, 2, 3, -1};
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
      return pre ? std::vector<double>{1, 2, -1} : std::vector<double>{1, 2, 3, -1};
    default:
      return pre ? std::vector<double>{1, 2, 0.5, -1, 0.25}
                 : std::vector<double>{1, 0.5, 2, -4, 0.375};
  }
}

// A factor allowed for every tensor of c.
double choose_scale(Rng& rng, const Collective& c, bool pre) {
  std::vector<double> common = scale_choices(c.tensors[0].dtype, c.op, pre);
  for (const Tensor& t : c.tensors) {
    std::vector<double> mine = scale_choices(t.dtype, c.op, pre);
    common.erase(std::remove_if(common.begin(), common.end(),
                                [&](double v) {
                                  return std::find(mine.begin(), mine.end(), v) == mine.end();
                                }),
                 common.end());
  }
  return pick(rng, common);
}

Tensor make_tensor(Rng& rng, Kind kind, const std::string& name) {
  Tensor t;
  t.name = name;
  t.dtype = static_cast<DataType>(rng.between(0, kNumDataTypes - 1));
  // Mostly small, some medium, a few past the default fusion threshold (512 KiB).
  const double size_class = rng.unit();
  const int64_t elements = size_class < 0.70   ? rng.between(0, 64)
                           : size_class < 0.95 ? rng.between(65, 4096)
                                               : rng.between(4097, 150000);
  const bool scalar_ok = kind == Kind::kAllreduce || kind == Kind::kBroadcast;
  if (scalar_ok && rng.chance(0.05)) {
    t.scalar = true;
    return t;
  }
  const int extra_dims = static_cast<int>(rng.between(0, 2));
  int64_t row = 1;
  for (int d = 0; d < extra_dims; ++d) {
    t.inner.push_back(rng.between(1, 4));
    row *= t.inner.back();
  }
  t.rows = elements / row;
  return t;
}

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kAllreduce: return "allreduce";
    case Kind::kGrouped: return "grouped_allreduce";
    case Kind::kAllgather: return "allgather";
    case Kind::kBroadcast: return "broadcast";
    case Kind::kAlltoall: return "alltoall";
    case Kind::kReducescatter: return "reducescatter";
  }
  return "?";
}

bool reduces(Kind k) {
  return k == Kind::kAllreduce || k == Kind::kGrouped || k == Kind::kReducescatter;
}

Rng::Rng(std::initializer_list<uint64_t> key) {
  for (uint64_t k : key) state_ = splitmix(state_ ^ k);
}

uint64_t Rng::next() {
  state_ += 0x9e3779b97f4a7c15ULL;
  return splitmix(state_);
}

int64_t Rng::between(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(span == 0 ? next() : next() % span);
}

bool Rng::chance(double p) { return unit() < p; }

double Rng::unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }

Collective Plan::make(Rng& rng, int set, int set_size, const std::string& name) const {
  Collective c;
  c.set = set;
  const double k = rng.unit();
  c.kind = k < 0.45   ? Kind::kAllreduce
           : k < 0.55 ? Kind::kGrouped
           : k < 0.67 ? Kind::kAllgather
           : k < 0.77 ? Kind::kBroadcast
           : k < 0.87 ? Kind::kAlltoall
                      : Kind::kReducescatter;
  const std::string base = name + "." + kind_name(c.kind);
  if (c.kind == Kind::kGrouped) {
    const int n = static_cast<int>(rng.between(1, 6));
    for (int j = 0; j < n; ++j)
      c.tensors.push_back(make_tensor(rng, c.kind, base + "." + std::to_string(j)));
  } else {
    c.tensors.push_back(make_tensor(rng, c.kind, base));
  }
  if (reduces(c.kind)) {
    // The elementwise reductions, whose results the plan's reference computes; Adasum (the
    // last op) has its own tests against its formula (tests/inproc/adasum_test.cc).
    static_assert(static_cast<int>(ReduceOp::kAdasum) == kNumReduceOps - 1);
    c.op = static_cast<ReduceOp>(rng.between(0, kNumReduceOps - 2));
    if (rng.chance(0.5)) {
      c.prescale = choose_scale(rng, c, true);
      c.postscale = choose_scale(rng, c, false);
    }
  }
  c.root = static_cast<int>(rng.between(0, set_size - 1));
  c.in_place = rng.chance(0.5);
  c.allocate = rng.chance(0.3);
  c.even_splits = rng.chance(0.25);
  c.shape_key = rng.next();
  return c;
}

Round Plan::round(int index) const {
  Rng rng{config_.seed, kRoundTag, static_cast<uint64_t>(index)};
  Round round;
  const int world = config_.world;
  const int nsets = world < 2 ? 0 : static_cast<int>(rng.between(0, 2));
  for (int s = 0; s < nsets; ++s) {
    std::vector<int> ranks;
    for (int r = 0; r < world; ++r)
      if (rng.chance(0.6)) ranks.push_back(r);
    if (ranks.empty()) ranks.push_back(static_cast<int>(rng.between(0, world - 1)));
    round.sets.push_back(ranks);
  }
  const int64_t target = rng.between(1, config_.max_tensors);
  std::set<int64_t> used_slots;
  int64_t tensors = 0;
  for (int k = 0; tensors < target; ++k) {
    const int64_t slot = rng.between(0, kSlots - 1);
    Collective c;
    if (rng.chance(0.4) && used_slots.insert(slot).second) {
      // The same name and parameters in every round (global set), new values; now and
      // then more rows under the same name, which the cached response no longer fits.
      Rng slot_rng{config_.seed, kSlotTag, static_cast<uint64_t>(slot)};
      c = make(slot_rng, -1, world, "s" + std::to_string(slot));
      if (rng.chance(0.15)) {
        for (Tensor& t : c.tensors) t.rows += rng.between(1, 3);
      }
    } else {
      const int set =
          nsets > 0 && rng.chance(0.6) ? static_cast<int>(rng.between(0, nsets - 1)) : -1;
      const int set_size = set < 0 ? world : static_cast<int>(round.sets[set].size());
      c = make(rng, set, set_size, "r" + std::to_string(index) + ".c" + std::to_string(k));
    }
    c.value_key =
        Rng{config_.seed, kValueTag, static_cast<uint64_t>(index), static_cast<uint64_t>(k)}.next();
    tensors += static_cast<int64_t>(c.tensors.size());
    round.collectives.push_back(std::move(c));
  }
  return round;
}

std::vector<int> Plan::members(const Round& round, const Collective& c) const {
  if (c.set >= 0) return round.sets[c.set];
  std::vector<int> all(config_.world);
  for (int r = 0; r < config_.world; ++r) all[r] = r;
  return all;
}

int64_t Plan::row_size(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d : t.inner) n *= d;
  return n;
}

int64_t Plan::rows(const Collective& c, int t, int g, int set_size) const {
  const Tensor& x = c.tensors[t];
  if (c.kind == Kind::kAllgather) {
    Rng rng{c.shape_key, kShapeTag, static_cast<uint64_t>(t), static_cast<uint64_t>(g)};
    return rng.between(0, x.rows);
  }
  if (c.kind == Kind::kAlltoall) {
    int64_t sum = 0;
    for (int64_t s : splits(c, g, set_size)) sum += s;
    return sum;
  }
  return x.rows;
}

std::vector<int64_t> Plan::splits(const Collective& c, int g, int set_size) const {
  Rng rng{c.shape_key, kShapeTag, 0xa11ULL, static_cast<uint64_t>(g)};
  const int64_t bound = std::max<int64_t>(1, c.tensors[0].rows / set_size);
  std::vector<int64_t> s(set_size);
  if (c.even_splits) {
    std::fill(s.begin(), s.end(), rng.between(0, bound));
  } else {
    for (int64_t& x : s) x = rng.between(0, bound);
  }
  return s;
}

double Plan::input(const Collective& c, int t, int g, int64_t i) const {
  const Tensor& x = c.tensors[t];
  Rng rng{c.value_key, static_cast<uint64_t>(t), static_cast<uint64_t>(g),
          static_cast<uint64_t>(i)};
  if (!config_.exact && is_float(x.dtype)) {
    // Non-zero (no +0/-0 ties in min and max), magnitudes in [1/8, 2) for reductions so
    // that products of 4 ranks stay finite in float16; wider for moves.
    const double sign = rng.chance(0.5) ? -1.0 : 1.0;
    const int exponent = reduces(c.kind) ? static_cast<int>(rng.between(-3, 0))
                                         : static_cast<int>(rng.between(-10, 10));
    return stored(x.dtype, sign * std::ldexp(1.0 + rng.unit(), exponent));
  }
  const auto [lo, hi] = value_range(x.dtype, c.kind, c.op);
  return static_cast<double>(rng.between(lo, hi));
}

}  // namespace chorus::random_rounds
