#pragma once
// The process sets this rank is a member of, as the cycle runs them: each set's parts (its
// group, the transport of its rounds, its negotiator, its executor: core/set_builder.h) and
// the entries it owns. The table has a set built (the global one at start, the others as
// responses create them), takes the submitted entries into their sets, finishes entries,
// applies the cycle's set changes, and ends every set when the runtime stops.
//
// Thread contract: the thread that runs the cycle (the runtime's progress lock held). What
// other threads may ask of the sets is ProcessSets (core/process_sets.h), which the table
// keeps up to date.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "chorus/status.h"
#include "core/entry.h"
#include "core/observability.h"
#include "core/process_sets.h"
#include "core/set_builder.h"

namespace chorus {

class SetTable {
 public:
  using Clock = std::chrono::steady_clock;
  using Sets = std::map<int32_t, std::unique_ptr<SetState>>;

  /// `info` and `observability` are the runtime's; they outlive the table.
  SetTable(ProcessSets* info, Observability* observability)
      : info_(info), observability_(observability) {}

  /// Once the rank is set up: what later sets are made of. Then makes the global set.
  Status start(const SetBuilder::Rank& rank);

  /// Takes the queue's entries into their sets, handing their requests to the negotiators.
  /// The entries of one submit (a grouped allreduce's members share a handle) are taken all
  /// or nothing; those of a set removed meanwhile fail.
  void accept(std::vector<Entry>& fresh);
  /// Takes one collective of Chorus's own (the autotuner's agreement, core/autotuner.h) into
  /// its set as accept() takes a trainer's, its name claimed as submit() claims one.
  Status admit(Entry entry);
  /// Completes `entry` with `status`, records it in the flight recorder and drops it from
  /// its set; `agreed`: when its round's responses were known (none outside a round).
  void finish(SetState& set, Entry& entry, const Status& status, Clock::time_point agreed = {});
  /// An entry that no set owns: its name leaves flight, then its handle completes.
  void release(Entry& entry, const Status& status);
  /// Creates and removes sets as the cycle's responses say, in their order; every rank does
  /// the same (creating one is collective over the global set).
  Status apply_changes(const std::vector<Response>& changes);
  /// True if any set has collectives negotiating.
  bool pending() const;
  /// After the loop: every entry fails with `status`; after a failure that left the ranks
  /// out of step (`abandon`), the sets' GPU communicators are then aborted, never finalized
  /// with peers that may not take part. Then the sets are torn down.
  void close(const Status& status, bool abandon);

  Sets::iterator begin() { return sets_.begin(); }
  Sets::iterator end() { return sets_.end(); }
  Sets::const_iterator begin() const { return sets_.begin(); }
  Sets::const_iterator end() const { return sets_.end(); }
  std::size_t size() const { return sets_.size(); }

 private:
  // A set with `ranks` (global ranks, in set order) as set `id`, known to ProcessSets; null
  // where this rank is not a member. Collective over the global set.
  StatusOr<std::unique_ptr<SetState>> make(int32_t id, const std::vector<int>& ranks);

  ProcessSets* info_;
  Observability* observability_;
  int rank_ = -1;
  std::optional<SetBuilder> builder_;
  Sets sets_;
};

}  // namespace chorus
