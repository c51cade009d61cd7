#pragma once
// A set of names that reuses its nodes: the runtime's names in flight (core/process_sets.h) take
// a name at every submit and give it back at every completion, a hundred or a thousand per
// training step; allocating and freeing a node and a string for each costs more than the
// set's own work. Up to kSpareNodes nodes of removed names wait for reuse, each keeping its
// string's capacity. Not thread-safe: the runtime guards it with its lock.

#include <cstddef>
#include <string>
#include <unordered_set>
#include <vector>

namespace chorus {

class NameSet {
 public:
  static constexpr std::size_t kSpareNodes = 4096;

  bool contains(const std::string& name) const { return set_.count(name) > 0; }
  /// Adds `name`; false (and no change) if it is there already.
  bool insert(const std::string& name) {
    if (spare_.empty()) return set_.insert(name).second;
    Set::node_type node = std::move(spare_.back());
    spare_.pop_back();
    node.value() = name;
    auto placed = set_.insert(std::move(node));
    if (!placed.inserted) spare_.push_back(std::move(placed.node));
    return placed.inserted;
  }
  /// Removes `name` if it is there.
  void erase(const std::string& name) {
    Set::node_type node = set_.extract(name);
    if (!node.empty() && spare_.size() < kSpareNodes) spare_.push_back(std::move(node));
  }
  std::size_t size() const { return set_.size(); }
  /// Removed names' nodes waiting for reuse.
  std::size_t spare() const { return spare_.size(); }

 private:
  using Set = std::unordered_set<std::string>;
  Set set_;
  std::vector<Set::node_type> spare_;
};

}  // namespace chorus
