#pragma once
// The response cache of one process set. A collective that already ran once with the same
// name and parameters is agreed on by a bit per slot in one bitwise-AND allreduce, with no
// coordinator round trip.
//
// Every rank must hold the same cache: it changes only while a negotiation round is being
// finished, from the round's response list (identical on every rank), in one fixed order:
// evictions (ascending slot), then uses and insertions in response order. Slot numbers are
// therefore the same everywhere, which is what makes the bit vector meaningful.

#include <cstdint>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/message.h"

namespace chorus {

class ResponseCache {
 public:
  enum class Lookup {
    kMiss,      ///< unknown name: negotiate with the coordinator
    kHit,       ///< same name and parameters: agree by bit
    kConflict,  ///< same name, other parameters: the slot must be evicted everywhere first
  };
  struct Found {
    Lookup kind = Lookup::kMiss;
    int slot = -1;
  };

  explicit ResponseCache(int64_t capacity) : capacity_(capacity) {}

  /// Whether a response may be cached: successful allreduce, broadcast and reducescatter,
  /// whose every parameter is fixed by each rank's own request. (allgather and alltoall
  /// depend on the other ranks' sizes, so a local match proves nothing.)
  static bool cacheable(const Response& r);
  Found lookup(const Request& q) const;
  /// Inserts (or replaces, for a known name) a cacheable response; evicts the least
  /// recently used slot when full. The cache shares `r`: a round hands the same object
  /// to the executor, with no copy of its name and shape.
  void put(std::shared_ptr<const Response> r);
  /// Marks a slot used (its response just ran).
  void touch(int slot);
  void erase(int slot);

  const Response& at(int slot) const { return *slots_[slot]; }
  const std::shared_ptr<const Response>& shared(int slot) const { return slots_[slot]; }
  bool occupied(int slot) const {
    return slot >= 0 && slot < static_cast<int>(slots_.size()) && slots_[slot] != nullptr;
  }
  /// One past the highest occupied slot: the bit vector's length in slots.
  int slot_bound() const { return used_.empty() ? 0 : *used_.rbegin() + 1; }
  int64_t size() const { return static_cast<int64_t>(by_name_.size()); }
  /// Changes whenever a lookup could answer differently (put, erase; not touch).
  uint64_t generation() const { return generation_; }
  int64_t capacity() const { return capacity_; }

 private:
  const int64_t capacity_;
  uint64_t generation_ = 0;
  std::vector<std::shared_ptr<const Response>> slots_;
  std::unordered_map<std::string, int> by_name_;
  std::list<int> lru_;  // front: most recently used
  std::unordered_map<int, std::list<int>::iterator> lru_pos_;
  std::set<int> used_;
  std::set<int> free_;  // freed slots below slots_.size(), reused lowest first
};

}  // namespace chorus
