#pragma once
// A worker of an elastic job on the Gloo world (chorusrun --gloo with --max-restarts and the
// other elastic options; docs/elastic.md). chorusrun serves the job's store and decides who
// trains together: each time Chorus starts in the worker, the worker asks to join the job's
// next round, and chorusrun answers once every worker it expects has asked (or, after a
// failure, once the bound for the others ran out) with the round's number, the worker's rank
// and the round's size. The round's ranks meet under the round's own keys of that store, so
// the ranks of a failed round never meet those of the next.
//
// The store's keys, for the worker with id W asking for the N-th time (N counts from 1 in
// each process):
//   join/W/N     set by the worker: its host's name
//   assign/W/N   set by chorusrun: "ROUND RANK SIZE HOSTS_VERSION", or "leave WHY" when the
//                worker is no longer part of the job (its host was dropped)
//   round/ROUND/ the prefix of the round's own keys (Gloo's addresses, the roll calls)
//   round/ROUND/lost  set by chorusrun when it saw a rank of the round end: which, and how;
//                the round's waits fail at once naming it
//
// Thread contract: joins are made by the thread that starts Chorus, one at a time.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "chorus/rendezvous.h"
#include "chorus/status.h"

namespace chorus {

/// Where the worker asks and who it is: CHORUS_ELASTIC_RENDEZVOUS ("10.0.0.5,127.0.0.1:40123",
/// chorusrun's addresses and the store's port) and CHORUS_ELASTIC_WORKER (its id).
struct ElasticWorker {
  std::string store;
  std::string id;
};

/// What chorusrun answered.
struct ElasticRound {
  int64_t round = 0;  ///< 1 for the job's first, then one more for each reset
  int rank = 0;
  int size = 0;
  int64_t hosts_version = 0;  ///< the hosts' version the round was formed at (hosts_notice.h)
};

/// The answer's text, and back; nullopt where `text` is neither an assignment nor "leave".
std::string format_elastic_round(const ElasticRound& round);
std::optional<ElasticRound> parse_elastic_round(const std::string& text);
inline constexpr const char* kLeaveAnswer = "leave ";
/// The round's key (under its prefix) that names the ranks chorusrun saw end.
inline constexpr const char* kLostKey = "lost";

struct JoinedRound {
  /// The round's ranks: rank(), size(), and keys under the round's prefix.
  std::shared_ptr<Rendezvous> rendezvous;
  /// The address of chorusrun's that answered (the route to the other hosts goes that way).
  std::string store_host;
};

/// Asks to join the next round (trying chorusrun's addresses for up to a minute) and waits up
/// to `timeout` for the answer. FAILED_PRECONDITION
/// naming the reason where chorusrun answered that this worker leaves the job.
StatusOr<JoinedRound> join_next_round(const ElasticWorker& worker,
                                      std::chrono::milliseconds timeout);

/// The round this process joined last; nullopt before its first join (and in a job that is
/// not an elastic one on the Gloo world).
std::optional<ElasticRound> joined_round();

}  // namespace chorus
