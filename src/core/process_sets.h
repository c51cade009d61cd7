#pragma once
// What any thread may ask of this rank's process sets: each set's size and this rank's
// place in it, the names of its collectives in flight, and the counters that name unnamed
// collectives. The sets themselves (groups, negotiators, executors, entries) belong to the
// thread that runs the cycle (core/set_table.h). Thread-safe.

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "chorus/status.h"
#include "core/entry.h"
#include "core/name_set.h"

namespace chorus {

class ProcessSets {
 public:
  struct Info {
    int size = 0;   ///< ranks in the set
    int rank = -1;  ///< this rank's index in the set, -1 if not a member
  };

  std::optional<Info> info(int32_t id) const;
  void add(int32_t id, Info info);
  /// Forgets the set and its names in flight.
  void remove(int32_t id);

  /// Puts the names of one submit's entries (all in one set) in flight, all or none. Fails
  /// if the set does not exist, or naming the first collective whose name is in flight
  /// already, or given twice among them; `rank` is this rank, for the message. A name stays
  /// in flight until release(), so that no second submit of it can pass before the first
  /// one's handle is done.
  Status claim(std::span<const Entry> entries, int rank);
  /// Takes the entry's name out of flight; called just before its handle completes, so that
  /// a thread that sees it done may submit the name again at once.
  void release(const Entry& entry);

  /// "chorus.allreduce.7" in the global set, "chorus.set3.allreduce.7" in set 3: a counter
  /// per op and process set on this rank, so that a set's unnamed collectives match across
  /// its members whatever the other sets do.
  std::string generate_name(OpType op, int32_t set_id);
  /// "chorus.add_process_set_of_members.[1, 3].0": the name of a set its members create, a
  /// counter per list of ranks and `purpose`, so that it matches across those members whatever
  /// sets the other ranks create meanwhile, and sets of the same ranks made for different
  /// purposes (a group, a pair for messages) in different orders on each member do not cross.
  /// A purpose, where given, comes before the ranks: "chorus.add_process_set_of_members.
  /// c10d.0..p2p.[1, 3].0".
  std::string members_set_name(const std::vector<int>& sorted_ranks, const std::string& purpose);

 private:
  mutable Mutex mu_;
  std::map<int32_t, Info> info_ CHORUS_GUARDED_BY(mu_);
  std::unordered_map<int32_t, NameSet> in_flight_ CHORUS_GUARDED_BY(mu_);
  // The global set's, without a lock: the common case of the enqueue path.
  std::array<std::atomic<uint64_t>, kNumOpTypes> global_counters_{};
  std::unordered_map<int32_t, std::array<uint64_t, kNumOpTypes>> set_counters_
      CHORUS_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::vector<int>>, uint64_t> members_counters_
      CHORUS_GUARDED_BY(mu_);
};

/// The failure of a submit whose name is in flight already on `rank`.
Status duplicate_name(const Request& q, int rank);

}  // namespace chorus
