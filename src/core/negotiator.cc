#include "core/negotiator.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "base/logging.h"
#include "core/codec.h"
#include "core/ops/op.h"

namespace chorus {
namespace {

double seconds_between(Negotiator::Clock::time_point a, Negotiator::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string seconds_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// How often a rank waiting in a round looks at its peers' liveness.
constexpr auto kLivenessLook = std::chrono::milliseconds(200);

}  // namespace

Negotiator::Negotiator(ControlTransport* transport, NegotiatorOptions options, std::string label)
    : transport_(transport),
      options_(options),
      label_(std::move(label)),
      cache_(options.cache_capacity) {
  if (transport_->rank() == 0) coordinator_ = std::make_unique<Coordinator>(transport_->size());
  transport_->set_liveness(options_.liveness_seconds);
}

void Negotiator::submit(const Request& request, Clock::time_point now) {
  if (request.op == OpType::kJoin) joined_ = true;
  Pending p;
  p.request = &request;
  p.submitted = now;
  p.order = submitted_++;
  pending_.emplace(request.name, p);
  last_submit_ = now;
}

Status Negotiator::start(bool shutdown, Clock::time_point now) {
  round_ = Round{};
  outgoing_ = RequestList{};
  outgoing_names_.clear();
  slot_bound_ = cache_.slot_bound();
  plane_words_ = (static_cast<std::size_t>(slot_bound_) + 63) / 64;
  bits_.assign(1 + kPlanes * plane_words_, 0);
  auto set_bit = [&](std::size_t b) { bits_[b / 64] |= uint64_t{1} << (b % 64); };
  auto clear_bit = [&](std::size_t b) { bits_[b / 64] &= ~(uint64_t{1} << (b % 64)); };
  // Keep every slot unless a conflicting request clears it; "no tensor here" unless this
  // rank holds it. (Bits past slot_bound_ are never read.)
  std::fill_n(bits_.begin() + plane_word(kKeep), 2 * plane_words_, ~uint64_t{0});

  // Classify each unsent request (a group as one unit, all or nothing): a hit sets its ready
  // bit, a conflict clears the slot's keep bit and waits for the eviction, a miss goes to
  // the coordinator. Lookups are remembered until the cache changes, so a request that
  // waits many rounds for its peers costs no repeated hashing.
  // Cached tensors are reported to the stall inspector once one waited this long.
  const double stall_after = options_.stall_check_seconds > 0 ? options_.stall_check_seconds
                                                              : options_.stall_shutdown_seconds;
  bool stalled = false;
  std::vector<Pending*> misses;
  std::vector<WaitingSlot> waiting;
  std::set<int> conflicts;
  auto classify = [&](Pending* const* unit, std::size_t count) {
    bool conflict = false, all_hit = true;
    for (std::size_t i = 0; i < count; ++i) {
      Pending* p = unit[i];
      if (p->cache_generation != cache_.generation()) {
        p->found = cache_.lookup(*p->request);
        p->cache_generation = cache_.generation();
      }
      if (p->found.kind == ResponseCache::Lookup::kConflict) {
        clear_bit(slot_bit(p->found.slot, kKeep));
        conflicts.insert(p->found.slot);
        conflict = true;
      }
      all_hit = all_hit && p->found.kind == ResponseCache::Lookup::kHit;
    }
    if (conflict) return;
    if (all_hit) {
      for (std::size_t i = 0; i < count; ++i) {
        const int slot = unit[i]->found.slot;
        set_bit(slot_bit(slot, kReady));
        clear_bit(slot_bit(slot, kNoTensor));
        double waited = seconds_between(unit[i]->submitted, now);
        waiting.push_back({slot, waited});
        if (stall_after > 0 && waited >= stall_after) stalled = true;
      }
      return;
    }
    misses.insert(misses.end(), unit, unit + count);
  };
  std::map<std::string_view, std::vector<Pending*>> groups;
  for (auto& [name, p] : pending_) {
    if (p.sent) continue;
    if (p.request->group_size > 0) {
      groups[p.request->group].push_back(&p);
    } else {
      Pending* one = &p;
      classify(&one, 1);
    }
  }
  for (auto& [key, members] : groups) classify(members.data(), members.size());
  const bool has_new = !misses.empty();
  std::sort(misses.begin(), misses.end(),
            [](const Pending* a, const Pending* b) { return a->order < b->order; });
  for (const Pending* p : misses) {
    outgoing_.requests.push_back(*p->request);
    outgoing_.requests.back().rank = transport_->rank();
    outgoing_names_.push_back(p->request->name);
  }
  // A joined rank has no more data: it is ready for every cached allreduce, with zeros
  // (unless its own request under that name conflicts: that must become a mismatch). A
  // slot runs only if some rank holds the tensor (kNoTensor), so ranks that all joined do
  // not reduce zeros among themselves. Other cached ops cannot run with a joined rank:
  // evicting them sends them to the coordinator, which fails them on every rank.
  if (joined_) {
    for (int s = 0; s < slot_bound_; ++s) {
      if (!cache_.occupied(s) || conflicts.count(s)) continue;
      if (op_descriptor(cache_.at(s).op).runs_with_joined) {
        set_bit(slot_bit(s, kReady));
      } else {
        clear_bit(slot_bit(s, kKeep));
      }
    }
  }
  // Every gather carries this rank's waiting cached tensors, so the coordinator sees every
  // rank that submitted them; a stall asks for a gather at most once per period.
  outgoing_.waiting = std::move(waiting);
  outgoing_.idle_seconds = seconds_between(last_submit_, now);
  bool report = stalled && seconds_between(last_stall_report_, now) >= stall_after;
  if (report) last_stall_report_ = now;
  // Rank 0 asks for a round when its own table has a stall to report or fail.
  if (coordinator_ &&
      coordinator_->stall_due(now, options_.stall_check_seconds, options_.stall_shutdown_seconds)) {
    report = true;
  }
  if (!has_new) set_bit(kNoNewRequests);
  if (!shutdown) set_bit(kNoShutdown);
  if (!report) set_bit(kNoStallReport);

  Status s = transport_->start_and(&bits_);
  if (s.ok()) in_round_ = true;
  round_started_ = now;
  next_look_ = now + kLivenessLook;
  return s;
}

StatusOr<bool> Negotiator::poll(bool liveness) {
  if (!in_round_) return failed_precondition("negotiator: poll() without a round in flight");
  StatusOr<bool> done = transport_->test_and();
  if (!done.ok()) return done;
  if (!*done) {
    if (!liveness) return false;
    if (Status s = check_liveness(Clock::now()); !s.ok()) return s;
    return false;
  }
  in_round_ = false;
  agreed_ = true;
  return true;
}

// A round waits for every member, so a member that stopped taking part (its process exited,
// or its background thread is stuck) would keep the others in it for ever. Looked at every
// kLivenessLook: a member on this host known to have exited fails the round at once; any
// member the round still misses after liveness_seconds fails it then.
Status Negotiator::check_liveness(Clock::time_point now) {
  if (now < next_look_) return {};
  next_look_ = now + kLivenessLook;
  const std::string exited = transport_->exited(transport_->missing());
  double waited = seconds_between(round_started_, now);
  std::string why;
  if (!exited.empty()) {
    why = exited + " exited";
  } else if (options_.liveness_seconds > 0 && waited > options_.liveness_seconds) {
    const std::vector<int> absent = transport_->absent();
    waited = seconds_between(round_started_, Clock::now());
    why = "ranks " + ranks_string(transport_->job_ranks(absent)) + " took no part in it for " +
          seconds_text(options_.liveness_seconds) + " s (CHORUS_LIVENESS_SECONDS)";
  } else {
    return {};
  }
  return Status(StatusCode::kAborted,
                "rank " + std::to_string(transport_->job_rank(transport_->rank())) + " (" + label_ +
                    "): stopped waiting in a negotiation round after " + seconds_text(waited) +
                    " s: " + why +
                    "; a rank that stops taking part (exited, killed, or with Chorus's background "
                    "thread stuck) fails every collective of the job");
}

bool Negotiator::completes_locally() const {
  auto bit = [&](std::size_t b) { return (bits_[b / 64] >> (b % 64)) & 1; };
  return agreed_ && bit(kNoNewRequests) && bit(kNoStallReport) && bit(kNoShutdown);
}

std::size_t Negotiator::max_round_words() const {
  const auto slots = static_cast<std::size_t>(cache_.capacity());
  return 1 + kPlanes * ((slots + 63) / 64);
}

Status Negotiator::complete(Clock::time_point now) {
  if (!agreed_) return failed_precondition("negotiator: complete() before poll() returned true");
  agreed_ = false;
  auto bit = [&](std::size_t b) { return (bits_[b / 64] >> (b % 64)) & 1; };
  round_.shutdown = !bit(kNoShutdown);
  std::vector<Response> coordinated;
  if (!bit(kNoNewRequests) || !bit(kNoStallReport)) {
    StatusOr<std::vector<Response>> got = exchange(outgoing_, now);
    if (!got.ok()) return got.status();
    coordinated = std::move(got).value();
    round_.used_coordinator = true;
    for (std::string_view name : outgoing_names_) pending_.at(name).sent = true;
  }
  finish(std::move(coordinated));
  return {};
}

StatusOr<std::vector<Response>> Negotiator::exchange(const RequestList& mine,
                                                     Clock::time_point now) {
  StatusOr<std::vector<std::string>> gathered = transport_->gather(codec::encode(mine));
  if (!gathered.ok()) return gathered.status();
  std::string encoded;
  if (coordinator_) {
    for (int r = 0; r < transport_->size(); ++r) {
      StatusOr<RequestList> list = codec::decode_request_list((*gathered)[r]);
      if (!list.ok()) {
        return Status(list.status().code(), "request list from rank " +
                                                std::to_string(transport_->job_rank(r)) + ": " +
                                                list.status().message());
      }
      coordinator_->add(r, *list, now);
      for (const WaitingSlot& w : list->waiting) {
        if (cache_.occupied(w.slot))
          coordinator_->add_waiting(r, cache_.at(w.slot), w.waited_seconds);
      }
    }
    ResponseList out;
    out.responses = coordinator_->take_ready();
    StallReport stalls = coordinator_->inspect_stalls(now, options_.stall_check_seconds,
                                                      options_.stall_shutdown_seconds);
    for (const std::string& w : stalls.warnings) {
      log().warn("stall inspector ({}): {}", label_, w);
    }
    for (Response& f : stalls.failures) {
      log().error("{}", f.status.message());
      out.responses.push_back(std::move(f));
    }
    for (const StallFinding& f : stalls.findings) out.stall_lines.push_back(f.line);
    out.stall_exit_status = stalls.exit_status;
    encoded = codec::encode(out);
  }
  if (Status s = transport_->broadcast(&encoded); !s.ok()) return s;
  StatusOr<ResponseList> decoded = codec::decode_response_list(encoded);
  if (!decoded.ok()) return decoded.status();
  for (const std::string& line : decoded->stall_lines)
    log().warn("stall inspector ({}): {}", label_, line);
  round_.stall_lines = std::move(decoded->stall_lines);
  round_.stall_exit_status = decoded->stall_exit_status;
  return std::move(decoded->responses);
}

void Negotiator::finish(std::vector<Response> coordinated) {
  // Calls f(slot) for every set bit of `word` (word index w of a plane), in slot order.
  auto each_slot = [&](uint64_t word, std::size_t w, auto&& f) {
    while (word != 0) {
      const int s = static_cast<int>(64 * w) + __builtin_ctzll(word);
      word &= word - 1;
      if (s < slot_bound_) f(s);
    }
  };
  auto ready_word = [&](std::size_t w) {
    return bits_[plane_word(kReady) + w] & ~bits_[plane_word(kNoTensor) + w];
  };
  std::size_t ready_count = coordinated.size();
  for (std::size_t w = 0; w < plane_words_; ++w) ready_count += __builtin_popcountll(ready_word(w));
  round_.responses.reserve(ready_count);
  std::vector<int> ready_slots;
  for (std::size_t w = 0; w < plane_words_; ++w) {
    const uint64_t ready = ready_word(w);
    each_slot(ready, w, [&](int s) {
      if (!cache_.occupied(s)) return;
      round_.responses.push_back(cache_.shared(s));
      ready_slots.push_back(s);
    });
  }
  for (std::size_t w = 0; w < plane_words_; ++w) {
    each_slot(~bits_[plane_word(kKeep) + w], w, [&](int s) { cache_.erase(s); });
  }
  for (int s : ready_slots) cache_.touch(s);
  for (Response& r : coordinated) {
    auto shared = std::make_shared<const Response>(std::move(r));
    cache_.put(shared);
    round_.responses.push_back(std::move(shared));
  }
  for (const auto& r : round_.responses) {
    if (r->op == OpType::kJoin) joined_ = false;
    pending_.erase(r->name);
  }
}

}  // namespace chorus
