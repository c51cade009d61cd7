#include "core/entry_table.h"

#include <utility>

namespace chorus {

Entry* EntryTable::insert(Entry& e) {
  if (spare_.empty()) {
    // The key is built from the name before the entry is moved into the node.
    auto [it, inserted] = map_.try_emplace(e.request.name, std::move(e));
    return inserted ? &it->second : nullptr;
  }
  Map::node_type node = std::move(spare_.back());
  spare_.pop_back();
  node.key() = e.request.name;
  node.mapped() = std::move(e);
  auto placed = map_.insert(std::move(node));
  if (placed.inserted) return &placed.position->second;
  e = std::move(placed.node.mapped());
  spare_.push_back(std::move(placed.node));
  return nullptr;
}

Entry* EntryTable::find(const std::string& name) {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

void EntryTable::erase(Entry& e) {
  Map::node_type node = map_.extract(e.request.name);
  if (spare_.size() >= kSpareNodes) return;  // `node` frees itself
  node.mapped() = Entry();
  spare_.push_back(std::move(node));
}

}  // namespace chorus
