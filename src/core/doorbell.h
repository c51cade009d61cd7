#pragma once
// How the background thread sleeps, and who wakes it. Each rank has a doorbell: a futex
// word that its trainer threads ring when they hand it work, and that the other ranks on its
// host ring when they start a negotiation round. The doorbells of a host's ranks live in one
// shared memory segment (the host's board), so a rank waiting in a round for a peer on its
// host sleeps until that peer arrives instead of waking every few hundred microseconds to
// look: on a machine whose cores all run trainers, each of those wake-ups preempts one.
//
// The board also carries the rounds' bits (HostRounds, core/host_rounds.h): a rank writes
// its bits for a round into its own slot before it rings, so a peer that wakes finds them
// there, with no message in flight that would need the writer to make progress.
//
// Without the segment (one rank on the host, or shared memory unavailable) the doorbell is
// private to the process: only its own threads ring it, and rounds are polled.
//
// Threads: ring() from any thread; wait() from the background thread only (a slot has one
// waiter); the rest from the thread that runs the cycle (core/cycle.h).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "chorus/status.h"
#include "collectives/process_id.h"
#include "transport/shared_segment.h"

namespace chorus {

class ControlTransport;

class Doorbells {
 public:
  /// Bit flags: what may end a wait early. The other wakes only bump the word.
  enum Wake : uint32_t {
    kOwnWork = 1,  ///< ring(): this process's threads submitted something
    kPeers = 2,    ///< announce(): a rank on this host started a round
    kRound = 4,    ///< ring_round(): a control transport's own thread finished a round
  };

  /// A private doorbell.
  Doorbells();
  ~Doorbells();
  Doorbells(const Doorbells&) = delete;
  Doorbells& operator=(const Doorbells&) = delete;

  /// Moves onto the host's shared board: `host` holds this host's ranks (index = local rank).
  /// Local rank 0 creates the segment and sends its name, the others map it, and they use it
  /// all or none. Collective over `host`; errors of shared memory are not errors (the
  /// doorbell stays private), only a failed exchange is. Before any other thread rings.
  Status join_host(ControlTransport& host);
  /// True on a board shared with the host's other ranks.
  bool shared() const { return slots_ > 1; }

  /// The word, read before checking what a wait is for: a ring after the read ends the wait.
  uint32_t seq() const { return self().seq.load(std::memory_order_acquire); }
  /// Rings this rank's doorbell (wakes a wait for kOwnWork).
  void ring();
  /// Rings it for a round that finished on a transport's own thread (wakes a wait for kRound).
  void ring_round();
  /// Records that this rank started cycle `cycle`, and rings every other rank on the host
  /// (wakes their waits for kPeers).
  void announce(uint64_t cycle);
  /// True if a rank on this host started a cycle after `cycle`: it waits for this one.
  bool peer_ahead(uint64_t cycle) const;
  /// Sleeps until the word differs from `seen` (a ring that `wake` names, or any ring that
  /// came before the sleep), or for `timeout`. Returns true if the word changed.
  bool wait(uint32_t seen, std::chrono::microseconds timeout, uint32_t wake);

  /// The longest bit vector a round on the board carries.
  static constexpr std::size_t kRoundWords = 128;
  /// Writes this rank's `bits` (at most kRoundWords) for round `round` (counted from 1).
  /// A round's bits stay until round + 2 is published, which cannot happen before every
  /// peer finished round + 1, and so read round's bits.
  void publish(uint64_t round, const std::vector<uint64_t>& bits);
  /// If every other rank on the board published round `round`, ANDs their bits into `bits`
  /// and returns true; otherwise leaves `bits` alone.
  bool and_round(uint64_t round, std::vector<uint64_t>* bits) const;
  /// If every other rank on the board published round `round`, copies the first `words`
  /// words of every rank's (this one's included) into `all` (index = the board's rank) and
  /// returns true; otherwise leaves `all` alone. A round that shares instead of ANDing.
  bool share_round(uint64_t round, std::size_t words,
                   std::vector<std::vector<uint64_t>>* all) const;
  /// The ranks of the board (local ranks) that have not published round `round` yet.
  std::vector<int> behind(uint64_t round) const;
  /// Whether the process of the board's rank `rank` is known to have exited, and its pid.
  bool exited(int rank) const { return slots_ptr_[rank].process.exited(); }
  int64_t pid(int rank) const {
    return slots_ptr_[rank].process.pid.load(std::memory_order_relaxed);
  }

 private:
  struct alignas(64) Mailbox {
    std::atomic<uint64_t> round{0};  // the round whose bits `words` hold, set after them
    std::atomic<uint64_t> words[kRoundWords];
  };
  struct alignas(64) Slot {
    std::atomic<uint32_t> seq{0};
    std::atomic<uint32_t> waiting{0};  // the Wake flags of a sleeping waiter, else 0
    std::atomic<uint64_t> cycle{0};
    SharedProcessId process;  // the slot's rank, for the liveness check
    Mailbox rounds[2];        // by round parity
  };
  static void ring_slot(Slot& slot, uint32_t wake);
  Slot& self() const { return slots_ptr_[self_]; }

  Slot own_;                 // the private doorbell
  Slot* slots_ptr_ = &own_;  // own_, or the host's board
  int slots_ = 1;
  int self_ = 0;
  SharedSegment board_;  // the host's board, when shared
};

}  // namespace chorus
