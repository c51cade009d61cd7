#include "core/batch_verdict.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "base/logging.h"
#include "collectives/backoff.h"
#include "protocol/message.h"

namespace chorus {
namespace {

using Clock = std::chrono::steady_clock;

// A verdict names at most this many members' failures of one batch, then counts the rest.
constexpr std::size_t kNamedPerBatch = 4;
// How often a wait for the exchange looks for members known to have exited.
constexpr auto kLook = std::chrono::milliseconds(200);

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

// Bit r: member r's batches all stood on its side; bit P + r: member r is in step.
void set_bit(std::vector<uint64_t>* bits, std::size_t b, bool on) {
  if (!on) (*bits)[b / 64] &= ~(uint64_t{1} << (b % 64));
}
bool bit(const std::vector<uint64_t>& bits, std::size_t b) {
  return (bits[b / 64] >> (b % 64)) & 1;
}

bool own_cause(const BatchFailure& f) { return f.status.code() != StatusCode::kAborted; }

}  // namespace

std::vector<BatchFailure> choose_failures(const std::vector<BatchFailure>& all) {
  std::map<uint32_t, std::vector<BatchFailure>> by_batch;
  for (const BatchFailure& f : all) by_batch[f.batch].push_back(f);
  uint32_t stop_batch = 0;
  bool stop = false;
  for (const BatchFailure& f : all) {
    if (f.out_of_step && (!stop || f.batch < stop_batch)) {
      stop = true;
      stop_batch = f.batch;
    }
  }
  std::vector<BatchFailure> out;
  for (auto& [batch, failures] : by_batch) {
    std::stable_sort(failures.begin(), failures.end(),
                     [](const BatchFailure& a, const BatchFailure& b) {
                       if (own_cause(a) != own_cause(b)) return own_cause(a);
                       return a.rank < b.rank;
                     });
    const std::size_t named = std::min(failures.size(), kNamedPerBatch);
    for (std::size_t i = 0; i < named; ++i) {
      BatchFailure f = failures[i];
      f.out_of_step = stop && batch == stop_batch && i == 0;
      f.left_out = i == 0 ? static_cast<int>(failures.size() - named) : 0;
      out.push_back(std::move(f));
    }
  }
  return out;
}

RoundVerdict decide_verdicts(const std::vector<BatchFailure>& chosen,
                             const std::vector<std::string>& describe,
                             const std::vector<int>& job_ranks) {
  RoundVerdict v;
  v.batches.resize(describe.size());
  std::vector<std::string> text(describe.size());
  std::vector<int> left_out(describe.size(), 0);
  std::vector<bool> stops(describe.size(), false);
  for (const BatchFailure& f : chosen) {
    if (f.batch >= describe.size()) continue;
    std::string& t = text[f.batch];
    if (t.empty()) {
      v.batches[f.batch] = Status(f.status.code(), "");
      t = describe[f.batch] + ": failed on rank ";
    } else {
      t += "; on rank ";
    }
    const int rank = f.rank >= 0 && static_cast<std::size_t>(f.rank) < job_ranks.size()
                         ? job_ranks[f.rank]
                         : f.rank;
    // A cause that already names the batch says it once.
    std::string cause = f.status.message();
    const std::string named = describe[f.batch] + ": ";
    if (cause.compare(0, named.size(), named) == 0) cause.erase(0, named.size());
    t += std::to_string(rank) + ": " + cause;
    left_out[f.batch] += f.left_out;
    stops[f.batch] = stops[f.batch] || f.out_of_step;
  }
  for (std::size_t i = 0; i < describe.size(); ++i) {
    if (text[i].empty()) continue;
    if (left_out[i] > 0)
      text[i] += "; and on " + std::to_string(left_out[i]) + " more ranks (their logs say why)";
    v.batches[i] = Status(v.batches[i].code(), text[i]);
    if (stops[i] && !v.stop) {
      v.stop = true;
      v.stop_status = v.batches[i];
    }
  }
  return v;
}

std::string encode_failures(const std::vector<BatchFailure>& failures) {
  std::string out;
  for (const BatchFailure& f : failures) {
    const std::string& m = f.status.message();
    out += std::to_string(f.batch) + ' ' + std::to_string(f.rank) + ' ' +
           std::to_string(static_cast<int>(f.status.code())) + ' ' + (f.out_of_step ? '1' : '0') +
           ' ' + std::to_string(f.left_out) + ' ' + std::to_string(m.size()) + '\n' + m;
  }
  return out;
}

StatusOr<std::vector<BatchFailure>> decode_failures(const std::string& bytes) {
  std::vector<BatchFailure> out;
  std::size_t at = 0;
  // One field of a record's head: decimal digits, at most `max`, then `end`.
  auto field = [&](uint64_t max, char end, uint64_t* value) {
    const std::size_t from = at;
    *value = 0;
    while (at < bytes.size() && bytes[at] >= '0' && bytes[at] <= '9' && at - from < 20) {
      const uint64_t digit = static_cast<uint64_t>(bytes[at] - '0');
      if (digit > max || *value > (max - digit) / 10) return false;
      *value = *value * 10 + digit;
      ++at;
    }
    if (at == from || at >= bytes.size() || bytes[at] != end) return false;
    ++at;
    return true;
  };
  while (at < bytes.size()) {
    const std::size_t head = at;
    uint64_t batch = 0, rank = 0, code = 0, step = 0, left_out = 0, length = 0;
    const bool read = field(UINT32_MAX, ' ', &batch) && field(INT32_MAX, ' ', &rank) &&
                      field(kNumStatusCodes - 1, ' ', &code) && field(1, ' ', &step) &&
                      field(INT32_MAX, ' ', &left_out) && field(bytes.size(), '\n', &length);
    if (!read || code == 0 || length > bytes.size() - at) {
      return Status(StatusCode::kDataLoss,
                    "a batch verdict's record at byte " + std::to_string(head) + " is malformed");
    }
    BatchFailure f;
    f.batch = static_cast<uint32_t>(batch);
    f.rank = static_cast<int>(rank);
    f.out_of_step = step == 1;
    f.left_out = static_cast<int>(left_out);
    f.status = Status(static_cast<StatusCode>(code), bytes.substr(at, length));
    out.push_back(std::move(f));
    at += length;
  }
  return out;
}

StatusOr<RoundVerdict> BatchVerdicts::agree(const std::vector<Status>& mine, int stop_batch,
                                            const std::function<std::string(std::size_t)>& describe,
                                            bool device) {
  const int size = control_->size();
  const int me = control_->rank();
  bool failed = false;
  for (const Status& s : mine) failed = failed || !s.ok();
  bits_.assign((2 * static_cast<std::size_t>(size) + 63) / 64, ~uint64_t{0});
  set_bit(&bits_, me, !failed);
  set_bit(&bits_, size + me, stop_batch < 0);
  double late = liveness_seconds_ + std::chrono::duration<double>(kRollCallGrace).count();
  if (device) late = std::max(late, 2 * gpu_timeout_seconds_);
  const double bound = liveness_seconds_ > 0 ? late + liveness_seconds_ : 0;
  if (Status s = control_->start_and(&bits_); !s.ok()) return s;
  if (Status s = wait_round([this] { return control_->test_and(); }, bound, "verdict"); !s.ok()) {
    return s;
  }
  bool all_stand = true;
  for (int r = 0; r < size; ++r) all_stand = all_stand && bit(bits_, r) && bit(bits_, size + r);
  if (all_stand) {
    RoundVerdict stands;
    stands.batches.resize(mine.size());
    return stands;
  }
  std::vector<std::string> names;
  for (std::size_t i = 0; i < mine.size(); ++i) names.push_back(describe(i));
  std::vector<BatchFailure> own;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (mine[i].ok()) continue;
    log().error("{}: {}: failed on this rank: {}", label_, names[i], mine[i].to_string());
    own.push_back({static_cast<uint32_t>(i), me, mine[i], static_cast<int>(i) == stop_batch});
  }
  StatusOr<std::vector<BatchFailure>> chosen = board_ ? share(own, bound) : exchange(own, bound);
  if (!chosen.ok()) return chosen.status();
  for (const BatchFailure& f : *chosen) {
    if (f.batch >= names.size() || f.rank < 0 || f.rank >= size) {
      return Status(StatusCode::kDataLoss, "a batch verdict names batch " +
                                               std::to_string(f.batch) + " of rank " +
                                               std::to_string(f.rank) + ", outside the round");
    }
  }
  return decide_verdicts(*chosen, names, job_ranks_);
}

StatusOr<std::vector<BatchFailure>> BatchVerdicts::exchange(const std::vector<BatchFailure>& own,
                                                            double bound) {
  (void)bound;  // gather and broadcast wait at most the liveness bound themselves
  // Every member is known to be here (the AND completed), as gather() requires.
  StatusOr<std::vector<std::string>> gathered = control_->gather(encode_failures(own));
  if (!gathered.ok()) return gathered.status();
  std::string decided;
  if (control_->rank() == 0) {
    std::vector<BatchFailure> all;
    Status bad;
    for (std::size_t r = 0; r < gathered->size() && bad.ok(); ++r) {
      StatusOr<std::vector<BatchFailure>> got = decode_failures((*gathered)[r]);
      if (got.ok()) {
        all.insert(all.end(), got->begin(), got->end());
      } else {
        bad = Status(got.status().code(),
                     "rank " + std::to_string(r) + "'s verdict record: " + got.status().message());
      }
    }
    // A record rank 0 cannot read stops every member with that reason, as one verdict.
    if (!bad.ok()) all = {{0, 0, bad, /*out_of_step=*/true}};
    decided = encode_failures(choose_failures(all));
  }
  if (Status s = control_->broadcast(&decided); !s.ok()) return s;
  return decode_failures(decided);
}

StatusOr<std::vector<BatchFailure>> BatchVerdicts::share(const std::vector<BatchFailure>& own,
                                                         double bound) {
  // Word 0: the record's length in bytes; the rest: its bytes, a chunk per round.
  constexpr std::size_t kChunk = (Doorbells::kRoundWords - 1) * sizeof(uint64_t);
  const std::string mine = encode_failures(own);
  std::vector<std::string> records(static_cast<std::size_t>(control_->size()));
  std::vector<std::vector<uint64_t>> all;
  std::size_t rounds = 1;
  for (std::size_t k = 0; k < rounds; ++k) {
    std::vector<uint64_t> words(Doorbells::kRoundWords, 0);
    words[0] = mine.size();
    if (k * kChunk < mine.size()) {
      std::memcpy(&words[1], mine.data() + k * kChunk, std::min(kChunk, mine.size() - k * kChunk));
    }
    if (Status s = board_->start_share(words); !s.ok()) return s;
    if (Status s = wait_round([&] { return board_->test_share(&all); }, bound, "verdict");
        !s.ok()) {
      return s;
    }
    for (std::size_t r = 0; r < all.size(); ++r) {
      const std::size_t length = all[r][0];
      if (k == 0) rounds = std::max(rounds, (length + kChunk - 1) / kChunk);
      if (k * kChunk >= length) continue;
      const std::size_t piece = std::min(kChunk, length - k * kChunk);
      records[r].append(reinterpret_cast<const char*>(&all[r][1]), piece);
    }
  }
  std::vector<BatchFailure> failures;
  for (std::size_t r = 0; r < records.size(); ++r) {
    StatusOr<std::vector<BatchFailure>> got = decode_failures(records[r]);
    // Every member read the same bytes, so every member fails alike here.
    if (!got.ok()) {
      return Status(got.status().code(),
                    "rank " + std::to_string(r) + "'s verdict record: " + got.status().message());
    }
    failures.insert(failures.end(), got->begin(), got->end());
  }
  return choose_failures(failures);
}

Status BatchVerdicts::wait_round(const std::function<StatusOr<bool>()>& test, double bound,
                                 const char* what) {
  const Clock::time_point start = Clock::now();
  Clock::time_point next_look = start + kLook;
  // Members that ran the same batches arrive within microseconds of each other: short pauses
  // while that may still be so, then 1 ms ones for a member that is far behind.
  Backoff backoff(std::chrono::microseconds(20), /*eager=*/true, std::chrono::microseconds(1000),
                  std::chrono::microseconds(2000));
  while (true) {
    StatusOr<bool> done = test();
    if (!done.ok()) return done.status();
    if (*done) return {};
    backoff.pause();
    const Clock::time_point now = Clock::now();
    if (now < next_look) continue;
    next_look = now + kLook;
    const std::string exited = control_->exited(control_->missing());
    const double waited = std::chrono::duration<double>(now - start).count();
    std::string why;
    if (!exited.empty()) {
      why = exited + " exited";
    } else if (bound > 0 && waited > bound) {
      // On the board the members not there are known exactly; over MPI a roll call asks.
      const std::vector<int> gone = board_ ? control_->missing() : control_->absent();
      why = "ranks " + ranks_string(control_->job_ranks(gone)) + " did not come within " +
            seconds(bound) + " s (a member's own waits' bound, then CHORUS_LIVENESS_SECONDS)";
    } else {
      continue;
    }
    return Status(StatusCode::kAborted,
                  "rank " + std::to_string(control_->job_rank(control_->rank())) + " (" + label_ +
                      "): stopped waiting for the " + what + " on a round's batches: " + why);
  }
}

}  // namespace chorus
