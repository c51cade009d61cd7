#pragma once
// The negotiation of one process set, as a non-blocking state machine driven by the thread
// that runs the runtime's cycle (core/cycle.h), or by a test thread per rank. Requests
// may be submitted while a round is in flight: they wait for the next one.
//
// One round, on every member of the set, in lock-step:
//  1. start(): look every unsent local request up in the response cache and build a bit
//     vector: per cache slot a "ready here" bit, a "keep" bit (cleared by a rank whose
//     request of that name has other parameters) and a "no tensor here" bit (cleared by a
//     rank that holds the tensor), plus flags written inverted so that one bitwise AND
//     answers "does anyone have new requests / want to shut down / report a stall". The
//     AND starts non-blocking.
//  2. poll() until the AND is done: then the cached responses ready everywhere are known
//     without a coordinator.
//  3. complete(): only if some rank has new requests (or a stall report) do the ranks
//     gather their request lists at rank 0, whose Coordinator decides, and broadcast the
//     response list. This step blocks (every member is known to be there), so a rank in
//     several process sets must complete their rounds in one order shared by all ranks
//     (the runtime uses ascending set id, after every set's poll() returned true);
//     completing whichever set's AND finished first could deadlock two ranks that each
//     wait in a different set's gather.
//  4. The round's responses are: cached ones in slot order, then the coordinator's. The
//     cache is updated from them in the same way on every rank.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/coordinator.h"
#include "core/response_cache.h"
#include "protocol/message.h"
#include "transport/control_transport.h"

namespace chorus {

struct NegotiatorOptions {
  int64_t cache_capacity = 1024;
  double stall_check_seconds = 60;
  double stall_shutdown_seconds = 0;
  /// A round that still misses a member after this long fails (0: never); see poll().
  double liveness_seconds = 60;
};

class Negotiator {
 public:
  using Clock = std::chrono::steady_clock;

  struct Round {
    /// To execute, in this order, on every member. Cached responses are shared with the
    /// cache, not copied.
    std::vector<std::shared_ptr<const Response>> responses;
    bool shutdown = false;          ///< some member asked to shut down
    bool used_coordinator = false;  ///< the round needed a gather (false: cache only)
    /// The stall inspector's classes, one line each (logged on every member), and, not 0,
    /// the exit status every member ends its process with after running the responses
    /// (CHORUS_STALL_SHUTDOWN_SECONDS; protocol/stall_classes.h).
    std::vector<std::string> stall_lines;
    int stall_exit_status = 0;
  };

  /// `label` names the set in log lines ("global", "set 2").
  Negotiator(ControlTransport* transport, NegotiatorOptions options, std::string label);

  /// The set's name in log lines ("global", "set 2").
  const std::string& label() const { return label_; }

  /// Queues a local request for the next round, by reference: `request` must stay alive
  /// and unchanged until a round answers it (round().responses holds its name) or the
  /// negotiator is destroyed. The runtime's table of entries in flight owns it, so that a
  /// tensor's request is neither copied nor its name hashed into a second string.
  /// Precondition: no pending request has the same name (the runtime rejects duplicates
  /// before they get here).
  void submit(const Request& request, Clock::time_point now);
  void submit(Request&& request, Clock::time_point now) = delete;  // would dangle
  /// Starts a round. `shutdown`: this rank asks every member to stop.
  Status start(bool shutdown, Clock::time_point now);
  /// Drives the round's AND without blocking; true once it is done. With `liveness`, fails
  /// (ABORTED, naming the members) when a member the round waits for is known to have
  /// exited, or is still missing after liveness_seconds; that look may call the transport's
  /// absent(), which may take seconds and make MPI calls: only the thread that owns MPI
  /// passes true.
  StatusOr<bool> poll(bool liveness = true);
  /// Finishes the round after poll() returned true (may block in a gather and broadcast
  /// with the set's other members); round() then holds its result.
  Status complete(Clock::time_point now);
  bool in_round() const { return in_round_; }
  /// After poll() returned true: complete() will neither gather nor broadcast (no member has
  /// new requests or a stall to report) and no member asked to shut down, so the round
  /// finishes on this rank alone, without the set's transport.
  bool completes_locally() const;
  /// The longest bit vector a round can carry with this negotiator's cache capacity.
  std::size_t max_round_words() const;
  const Round& round() const { return round_; }

  /// Local requests not yet answered.
  std::size_t pending() const { return pending_.size(); }
  const ResponseCache& cache() const { return cache_; }
  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }

 private:
  struct Pending {
    const Request* request = nullptr;
    Clock::time_point submitted;
    uint64_t order = 0;          // submission order: new requests go to the coordinator in it
    bool sent = false;           // handed to the coordinator; wait for its response
    ResponseCache::Found found;  // the cache lookup, valid while the cache's generation is
    uint64_t cache_generation = ~uint64_t{0};  // this one
  };
  // The bit vector: word 0 holds the flags; then one plane per SlotBit, each
  // plane_words_ words with bit s for cache slot s, so that finishing a round scans whole
  // words instead of every slot.
  enum Flag { kNoNewRequests = 0, kNoShutdown = 1, kNoStallReport = 2 };
  enum SlotBit { kReady = 0, kKeep = 1, kNoTensor = 2 };
  static constexpr std::size_t kPlanes = 3;
  std::size_t plane_word(SlotBit plane) const { return 1 + plane * plane_words_; }
  std::size_t slot_bit(int slot, SlotBit plane) const {
    return 64 * plane_word(plane) + static_cast<std::size_t>(slot);
  }

  Status check_liveness(Clock::time_point now);
  StatusOr<std::vector<Response>> exchange(const RequestList& mine, Clock::time_point now);
  void finish(std::vector<Response> coordinated);

  ControlTransport* transport_;
  const NegotiatorOptions options_;
  const std::string label_;
  ResponseCache cache_;
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  // Keyed by a view of the request's own name (see submit()).
  std::unordered_map<std::string_view, Pending> pending_;
  uint64_t submitted_ = 0;  // requests submitted so far (the next one's order)
  bool joined_ = false;

  // The round in flight.
  bool in_round_ = false;
  bool agreed_ = false;  // the AND is done, complete() is due
  Clock::time_point round_started_;
  Clock::time_point next_look_;  // the next liveness look (check_liveness)
  int slot_bound_ = 0;
  std::size_t plane_words_ = 0;
  std::vector<uint64_t> bits_;
  RequestList outgoing_;
  std::vector<std::string_view> outgoing_names_;
  Clock::time_point last_stall_report_{};
  Clock::time_point last_submit_ = Clock::now();  // this rank's latest submit(), for idle_seconds
  Round round_;
};

}  // namespace chorus
