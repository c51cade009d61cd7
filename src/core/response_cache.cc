#include "core/response_cache.h"

#include "core/ops/op.h"

namespace chorus {
namespace {

// Whether `q` asks for exactly what `r` describes, the name aside: the lookup found `r` by
// that name.
bool same_parameters(const Request& q, const Response& r) {
  return q.op == r.op && q.dtype == r.dtype && q.device == r.device && q.shape == r.shape &&
         q.reduce_op == r.reduce_op && q.root == r.root && q.prescale == r.prescale &&
         q.postscale == r.postscale && q.group == r.group && q.group_size == r.group_size &&
         q.group_index == r.group_index;
}

}  // namespace

bool ResponseCache::cacheable(const Response& r) {
  return r.status.ok() && op_descriptor(r.op).cached;
}

ResponseCache::Found ResponseCache::lookup(const Request& q) const {
  auto it = by_name_.find(q.name);
  if (it == by_name_.end()) return {};
  return {same_parameters(q, *slots_[it->second]) ? Lookup::kHit : Lookup::kConflict, it->second};
}

void ResponseCache::put(std::shared_ptr<const Response> r) {
  if (capacity_ == 0 || !cacheable(*r)) return;
  ++generation_;
  if (auto it = by_name_.find(r->name); it != by_name_.end()) {
    slots_[it->second] = std::move(r);
    touch(it->second);
    return;
  }
  if (size() >= capacity_) erase(lru_.back());
  int slot;
  if (!free_.empty()) {
    slot = *free_.begin();
    free_.erase(free_.begin());
  } else {
    slot = static_cast<int>(slots_.size());
    slots_.emplace_back();
  }
  by_name_[r->name] = slot;
  slots_[slot] = std::move(r);
  used_.insert(slot);
  lru_.push_front(slot);
  lru_pos_[slot] = lru_.begin();
}

void ResponseCache::touch(int slot) {
  auto it = lru_pos_.find(slot);
  if (it == lru_pos_.end()) return;
  lru_.splice(lru_.begin(), lru_, it->second);
}

void ResponseCache::erase(int slot) {
  if (!occupied(slot)) return;
  ++generation_;
  by_name_.erase(slots_[slot]->name);
  slots_[slot].reset();
  lru_.erase(lru_pos_.at(slot));
  lru_pos_.erase(slot);
  used_.erase(slot);
  free_.insert(slot);
}

}  // namespace chorus
