#pragma once
// The entries in flight in one process set, by name: what the runtime holds from the
// moment it takes a tensor off the queue until its collective ran. Used by the thread that
// runs the cycle only (core/cycle.h).
//
// The table keeps the nodes of finished entries (up to kSpareNodes) and gives them to the
// next entries: a fused batch finishes a hundred tensors at once, and freeing their nodes
// one by one, then allocating them again for the next step's tensors, costs more than the
// rest of the table's work. A node's key keeps its string capacity as well.

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/entry.h"

namespace chorus {

class EntryTable {
 public:
  static constexpr std::size_t kSpareNodes = 4096;

  /// Moves `e` into the table under its request's name and returns where it now lives;
  /// null, with `e` left as it was, when an entry of that name is in flight already.
  Entry* insert(Entry& e);
  /// The entry of that name, or null.
  Entry* find(const std::string& name);
  bool contains(const std::string& name) const { return map_.count(name) > 0; }
  /// Removes `e`, an entry of this table (its members are released now).
  void erase(Entry& e);
  bool empty() const { return map_.empty(); }
  std::size_t size() const { return map_.size(); }
  /// Some entry in flight; precondition: !empty().
  Entry& any() { return map_.begin()->second; }
  /// Calls f(entry) for every entry in flight, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [name, e] : map_) f(e);
  }
  /// Finished entries' nodes waiting for reuse.
  std::size_t spare() const { return spare_.size(); }

 private:
  using Map = std::unordered_map<std::string, Entry>;
  Map map_;
  std::vector<Map::node_type> spare_;
};

}  // namespace chorus
