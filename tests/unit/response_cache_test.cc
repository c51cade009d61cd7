// Unit tests of the response cache (src/core/response_cache.h): what may be cached, lookups,
// LRU eviction, slot reuse, and the determinism every rank relies on (same operations, same
// slots). A small reference model of the documented policy checks random operation runs.
#include "core/response_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "protocol/message.h"

namespace chorus {
namespace {

Response response(const std::string& name, std::vector<int64_t> shape = {4},
                  OpType op = OpType::kAllreduce) {
  Response r;
  r.op = op;
  r.name = name;
  r.shape = std::move(shape);
  return r;
}

std::shared_ptr<const Response> shared(Response r) {
  return std::make_shared<const Response>(std::move(r));
}

// The request that asks for exactly what `r` describes.
Request request_for(const Response& r) {
  Request q;
  q.rank = 1;
  q.op = r.op;
  q.name = r.name;
  q.dtype = r.dtype;
  q.reduce_op = r.reduce_op;
  q.device = r.device;
  q.shape = r.shape;
  q.root = r.root;
  q.prescale = r.prescale;
  q.postscale = r.postscale;
  q.group = r.group;
  q.group_size = r.group_size;
  q.group_index = r.group_index;
  return q;
}

int slot_of(const ResponseCache& c, const std::string& name) {
  Request q;
  q.name = name;
  ResponseCache::Found f = c.lookup(q);
  return f.kind == ResponseCache::Lookup::kMiss ? -1 : f.slot;
}

// --- cacheable --------------------------------------------------------------------------

TEST(ResponseCacheTest, CacheableOps) {
  EXPECT_TRUE(ResponseCache::cacheable(response("a", {4}, OpType::kAllreduce)));
  EXPECT_TRUE(ResponseCache::cacheable(response("b", {4}, OpType::kBroadcast)));
  EXPECT_TRUE(ResponseCache::cacheable(response("r", {4}, OpType::kReducescatter)));
  for (OpType op : {OpType::kAllgather, OpType::kAlltoall, OpType::kBarrier, OpType::kJoin,
                    OpType::kAddProcessSet, OpType::kRemoveProcessSet}) {
    EXPECT_FALSE(ResponseCache::cacheable(response("x", {4}, op))) << op_type_name(op);
  }
}

TEST(ResponseCacheTest, ErrorResponsesAreNotCacheable) {
  for (StatusCode code :
       {StatusCode::kMismatch, StatusCode::kStalled, StatusCode::kFailedPrecondition}) {
    Response r = response("a");
    r.status = Status(code, "no");
    EXPECT_FALSE(ResponseCache::cacheable(r)) << status_code_name(code);
  }
}

TEST(ResponseCacheTest, PutIgnoresWhatIsNotCacheable) {
  ResponseCache c(4);
  Response bad = response("a");
  bad.status = Status(StatusCode::kMismatch, "ranks disagree");
  c.put(shared(bad));
  c.put(shared(response("g", {2}, OpType::kAllgather)));
  EXPECT_EQ(c.size(), 0);
  EXPECT_EQ(c.slot_bound(), 0);
  EXPECT_EQ(c.lookup(request_for(bad)).kind, ResponseCache::Lookup::kMiss);
}

// --- lookup -----------------------------------------------------------------------------

TEST(ResponseCacheTest, LookupMissHitConflict) {
  ResponseCache c(8);
  Response r = response("w", {3, 2});
  r.dtype = DataType::kFloat16;
  r.reduce_op = ReduceOp::kAverage;
  r.prescale = 0.5;
  EXPECT_EQ(c.lookup(request_for(r)).kind, ResponseCache::Lookup::kMiss);
  c.put(shared(r));
  ResponseCache::Found hit = c.lookup(request_for(r));
  EXPECT_EQ(hit.kind, ResponseCache::Lookup::kHit);
  EXPECT_EQ(hit.slot, 0);
  EXPECT_EQ(c.at(0), r);

  Request other = request_for(r);
  other.name = "v";
  EXPECT_EQ(c.lookup(other).kind, ResponseCache::Lookup::kMiss);

  Request changed = request_for(r);
  changed.shape = {3, 3};
  ResponseCache::Found conflict = c.lookup(changed);
  EXPECT_EQ(conflict.kind, ResponseCache::Lookup::kConflict);
  EXPECT_EQ(conflict.slot, 0);
}

TEST(ResponseCacheTest, EveryParameterCountsForAHit) {
  Response r = response("w", {5});
  r.op = OpType::kBroadcast;
  r.root = 1;
  r.group = "G";
  r.group_size = 2;
  r.group_index = 1;
  ResponseCache c(8);
  c.put(shared(r));
  ASSERT_EQ(c.lookup(request_for(r)).kind, ResponseCache::Lookup::kHit);

  std::vector<std::pair<const char*, std::function<void(Request&)>>> changes = {
      {"op", [](Request& q) { q.op = OpType::kAllreduce; }},
      {"dtype", [](Request& q) { q.dtype = DataType::kInt64; }},
      {"device", [](Request& q) { q.device = Device::cuda(0); }},
      {"device index",
       [](Request& q) {
         q.device = Device{Device::Kind::kCPU, 3};
       }},
      {"shape",
       [](Request& q) {
         q.shape = {5, 1};
       }},
      {"reduce op", [](Request& q) { q.reduce_op = ReduceOp::kProduct; }},
      {"root", [](Request& q) { q.root = 0; }},
      {"prescale", [](Request& q) { q.prescale = 2; }},
      {"postscale", [](Request& q) { q.postscale = 0.5; }},
      {"group", [](Request& q) { q.group = "H"; }},
      {"group size", [](Request& q) { q.group_size = 3; }},
      {"group index", [](Request& q) { q.group_index = 0; }},
  };
  for (auto& [what, change] : changes) {
    Request q = request_for(r);
    change(q);
    EXPECT_EQ(c.lookup(q).kind, ResponseCache::Lookup::kConflict) << "changed " << what;
  }
  // The sender's rank is not a parameter of the collective.
  Request q = request_for(r);
  q.rank = 7;
  EXPECT_EQ(c.lookup(q).kind, ResponseCache::Lookup::kHit);
}

TEST(ResponseCacheTest, PutOfAKnownNameReplacesInPlace) {
  ResponseCache c(4);
  c.put(shared(response("a")));
  c.put(shared(response("b")));
  c.put(shared(response("a", {9})));
  EXPECT_EQ(c.size(), 2);
  EXPECT_EQ(slot_of(c, "a"), 0);
  EXPECT_EQ(c.at(0).shape, (std::vector<int64_t>{9}));
  EXPECT_EQ(c.lookup(request_for(response("a", {9}))).kind, ResponseCache::Lookup::kHit);
  EXPECT_EQ(c.lookup(request_for(response("a", {4}))).kind, ResponseCache::Lookup::kConflict);
}

// --- eviction and slots -----------------------------------------------------------------

TEST(ResponseCacheTest, EvictsLeastRecentlyUsedWhenFull) {
  ResponseCache c(3);
  c.put(shared(response("a")));
  c.put(shared(response("b")));
  c.put(shared(response("c")));
  EXPECT_EQ(c.size(), 3);
  c.put(shared(response("d")));  // evicts a, the oldest
  EXPECT_EQ(c.size(), 3);
  EXPECT_EQ(slot_of(c, "a"), -1);
  EXPECT_EQ(slot_of(c, "d"), 0) << "d takes a's freed slot";
  c.put(shared(response("e")));  // evicts b
  EXPECT_EQ(slot_of(c, "b"), -1);
  EXPECT_EQ(slot_of(c, "e"), 1);
  EXPECT_EQ(slot_of(c, "c"), 2);
}

TEST(ResponseCacheTest, TouchChangesEvictionOrder) {
  ResponseCache c(3);
  c.put(shared(response("a")));
  c.put(shared(response("b")));
  c.put(shared(response("c")));
  c.touch(slot_of(c, "a"));
  c.put(shared(response("d")));  // b is now the least recently used
  EXPECT_EQ(slot_of(c, "b"), -1);
  EXPECT_EQ(slot_of(c, "a"), 0);
  EXPECT_EQ(slot_of(c, "d"), 1);
  c.touch(slot_of(c, "c"));
  c.touch(slot_of(c, "a"));
  c.put(shared(response("e")));  // d is the least recently used
  EXPECT_EQ(slot_of(c, "d"), -1);
  EXPECT_EQ(slot_of(c, "e"), 1);
  EXPECT_NE(slot_of(c, "c"), -1);
  EXPECT_NE(slot_of(c, "a"), -1);
}

TEST(ResponseCacheTest, ReplacingTouches) {
  ResponseCache c(2);
  c.put(shared(response("a")));
  c.put(shared(response("b")));
  c.put(shared(response("a", {8})));  // a used again
  c.put(shared(response("c")));       // evicts b
  EXPECT_EQ(slot_of(c, "b"), -1);
  EXPECT_EQ(slot_of(c, "a"), 0);
}

TEST(ResponseCacheTest, TouchOfAnEmptySlotIsHarmless) {
  ResponseCache c(2);
  c.touch(0);
  c.touch(57);
  c.put(shared(response("a")));
  c.erase(0);
  c.touch(0);
  EXPECT_EQ(c.size(), 0);
  c.put(shared(response("b")));
  EXPECT_EQ(slot_of(c, "b"), 0);
}

TEST(ResponseCacheTest, EraseFreesSlotReusedLowestFirst) {
  ResponseCache c(10);
  for (const char* n : {"a", "b", "c", "d", "e"}) c.put(shared(response(n)));
  c.erase(3);
  c.erase(1);
  EXPECT_FALSE(c.occupied(1));
  EXPECT_FALSE(c.occupied(3));
  EXPECT_EQ(c.size(), 3);
  EXPECT_EQ(slot_of(c, "b"), -1);
  EXPECT_EQ(slot_of(c, "d"), -1);
  c.put(shared(response("f")));
  c.put(shared(response("g")));
  c.put(shared(response("h")));
  EXPECT_EQ(slot_of(c, "f"), 1);
  EXPECT_EQ(slot_of(c, "g"), 3);
  EXPECT_EQ(slot_of(c, "h"), 5);
}

TEST(ResponseCacheTest, EraseOfEmptySlotIsHarmless) {
  ResponseCache c(4);
  c.put(shared(response("a")));
  c.erase(1);
  c.erase(-1);
  c.erase(0);
  c.erase(0);
  EXPECT_EQ(c.size(), 0);
  c.put(shared(response("b")));
  c.put(shared(response("c")));
  EXPECT_EQ(slot_of(c, "b"), 0);
  EXPECT_EQ(slot_of(c, "c"), 1);
}

TEST(ResponseCacheTest, ErasedEntryIsNotEvictedAgain) {
  ResponseCache c(2);
  c.put(shared(response("a")));
  c.put(shared(response("b")));
  c.erase(slot_of(c, "a"));
  c.put(shared(response("c")));  // room left: nothing evicted
  EXPECT_NE(slot_of(c, "b"), -1);
  EXPECT_EQ(slot_of(c, "c"), 0);
  c.put(shared(response("d")));  // full: evicts b (older than c)
  EXPECT_EQ(slot_of(c, "b"), -1);
  EXPECT_NE(slot_of(c, "c"), -1);
  EXPECT_EQ(slot_of(c, "d"), 1);
}

TEST(ResponseCacheTest, SlotBound) {
  ResponseCache c(10);
  EXPECT_EQ(c.slot_bound(), 0);
  c.put(shared(response("a")));
  c.put(shared(response("b")));
  c.put(shared(response("c")));
  EXPECT_EQ(c.slot_bound(), 3);
  c.erase(1);
  EXPECT_EQ(c.slot_bound(), 3) << "a hole below the top keeps the bound";
  c.erase(2);
  EXPECT_EQ(c.slot_bound(), 1);
  c.erase(0);
  EXPECT_EQ(c.slot_bound(), 0);
  c.put(shared(response("d")));
  EXPECT_EQ(c.slot_bound(), 1);
}

TEST(ResponseCacheTest, CapacityOneKeepsOnlyTheLatest) {
  ResponseCache c(1);
  c.put(shared(response("a")));
  c.put(shared(response("b")));
  EXPECT_EQ(c.size(), 1);
  EXPECT_EQ(slot_of(c, "a"), -1);
  EXPECT_EQ(slot_of(c, "b"), 0);
  EXPECT_EQ(c.slot_bound(), 1);
}

TEST(ResponseCacheTest, CapacityZeroCachesNothing) {
  ResponseCache c(0);
  EXPECT_EQ(c.capacity(), 0);
  for (const char* n : {"a", "b", "c"}) c.put(shared(response(n)));
  EXPECT_EQ(c.size(), 0);
  EXPECT_EQ(c.slot_bound(), 0);
  EXPECT_FALSE(c.occupied(0));
  EXPECT_EQ(c.lookup(request_for(response("a"))).kind, ResponseCache::Lookup::kMiss);
}

// --- determinism and a reference model ---------------------------------------------------

// The documented policy, written independently: LRU eviction, lowest free slot first.
class ModelCache {
 public:
  explicit ModelCache(int64_t capacity) : capacity_(capacity) {}
  void put(const Response& r) {
    if (capacity_ == 0 || !ResponseCache::cacheable(r)) return;
    for (auto& [slot, resp] : slots_) {
      if (resp.name == r.name) {
        resp = r;
        touch(slot);
        return;
      }
    }
    if (static_cast<int64_t>(slots_.size()) >= capacity_) erase(lru_.back());
    int slot = 0;
    while (slots_.count(slot)) ++slot;
    slots_[slot] = r;
    lru_.push_front(slot);
  }
  void touch(int slot) {
    auto it = std::find(lru_.begin(), lru_.end(), slot);
    if (it == lru_.end()) return;
    lru_.erase(it);
    lru_.push_front(slot);
  }
  void erase(int slot) {
    if (!slots_.erase(slot)) return;
    lru_.remove(slot);
  }
  const std::map<int, Response>& slots() const { return slots_; }

 private:
  int64_t capacity_;
  std::map<int, Response> slots_;
  std::list<int> lru_;
};

// Every occupied slot of `c`, for comparisons.
std::map<int, Response> contents(const ResponseCache& c) {
  std::map<int, Response> out;
  for (int s = 0; s < c.slot_bound(); ++s) {
    if (c.occupied(s)) out[s] = c.at(s);
  }
  return out;
}

// Applies one random operation to every cache in `caches` and to `model`.
void random_step(std::mt19937& rng, std::vector<ResponseCache*> caches, ModelCache& model) {
  const int op = static_cast<int>(rng() % 10);
  if (op < 6) {
    Response r = response("t" + std::to_string(rng() % 12), {static_cast<int64_t>(rng() % 3)});
    if (rng() % 8 == 0) r.op = OpType::kAllgather;  // not cacheable
    if (rng() % 8 == 0) r.status = Status(StatusCode::kMismatch, "x");
    for (ResponseCache* c : caches) c->put(shared(r));
    model.put(r);
  } else if (op < 8) {
    int slot = static_cast<int>(rng() % 8);
    for (ResponseCache* c : caches) c->touch(slot);
    model.touch(slot);
  } else {
    int slot = static_cast<int>(rng() % 8);
    for (ResponseCache* c : caches) c->erase(slot);
    model.erase(slot);
  }
}

TEST(ResponseCacheTest, RandomOperationsMatchTheModel) {
  for (int64_t capacity : {0, 1, 2, 3, 5, 16}) {
    for (unsigned seed = 1; seed <= 20; ++seed) {
      std::mt19937 rng(seed);
      ResponseCache c(capacity);
      ModelCache model(capacity);
      for (int step = 0; step < 300; ++step) {
        random_step(rng, {&c}, model);
        ASSERT_EQ(contents(c), model.slots())
            << "capacity " << capacity << " seed " << seed << " step " << step;
        ASSERT_LE(c.size(), capacity);
        ASSERT_EQ(c.size(), static_cast<int64_t>(model.slots().size()));
        const int bound = model.slots().empty() ? 0 : model.slots().rbegin()->first + 1;
        ASSERT_EQ(c.slot_bound(), bound);
        for (const auto& [slot, resp] : model.slots()) {
          ResponseCache::Found f = c.lookup(request_for(resp));
          ASSERT_EQ(f.kind, ResponseCache::Lookup::kHit) << resp.name;
          ASSERT_EQ(f.slot, slot) << resp.name;
        }
      }
    }
  }
}

TEST(ResponseCacheTest, TwoCachesFedTheSameOperationsStayIdentical) {
  for (unsigned seed = 100; seed < 110; ++seed) {
    std::mt19937 rng(seed);
    ResponseCache a(4), b(4);
    ModelCache model(4);
    for (int step = 0; step < 500; ++step) {
      random_step(rng, {&a, &b}, model);
      ASSERT_EQ(contents(a), contents(b)) << "seed " << seed << " step " << step;
      ASSERT_EQ(a.slot_bound(), b.slot_bound());
    }
  }
}

}  // namespace
}  // namespace chorus
