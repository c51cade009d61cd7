#include "core/batch_verdict.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <utility>

#include "base/logging.h"
#include "collectives/backoff.h"
#include "protocol/message.h"

namespace chorus {
namespace {

using Clock = std::chrono::steady_clock;

// How long the members whose wait ran out listen for each other (collectives/mpi_wait.h):
// a member may come to the exchange that much after its own data wait's bound.
constexpr double kRollCallGraceSeconds = 5;
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
                             const std::vector<std::string>& describe) {
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
    t += std::to_string(f.rank) + ": " + f.status.message();
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
  while (at < bytes.size()) {
    const std::size_t eol = bytes.find('\n', at);
    unsigned long long batch = 0, length = 0;
    int rank = 0, code = 0, step = 0, left_out = 0, used = 0;
    if (eol == std::string::npos ||
        std::sscanf(bytes.c_str() + at, "%llu %d %d %d %d %llu%n", &batch, &rank, &code, &step,
                    &left_out, &length, &used) != 6 ||
        left_out < 0 || at + static_cast<std::size_t>(used) != eol ||
        length > bytes.size() - eol - 1 || code <= 0 || code >= kNumStatusCodes) {
      return Status(StatusCode::kDataLoss,
                    "a batch verdict's record at byte " + std::to_string(at) + " is malformed");
    }
    BatchFailure f;
    f.batch = static_cast<uint32_t>(batch);
    f.rank = rank;
    f.out_of_step = step == 1;
    f.left_out = left_out;
    f.status = Status(static_cast<StatusCode>(code), bytes.substr(eol + 1, length));
    out.push_back(std::move(f));
    at = eol + 1 + length;
  }
  return out;
}

StatusOr<RoundVerdict> BatchVerdicts::agree(const std::vector<Status>& mine, bool out_of_step,
                                            const std::vector<std::string>& describe,
                                            bool may_exchange) {
  const int size = control_->size();
  const int me = control_->rank();
  bool failed = false;
  for (const Status& s : mine) failed = failed || !s.ok();
  bits_.assign((2 * static_cast<std::size_t>(size) + 63) / 64, ~uint64_t{0});
  set_bit(&bits_, me, !failed);
  set_bit(&bits_, size + me, !out_of_step);
  if (Status s = and_round(&bits_, mine.size(), may_exchange); !s.ok()) return s;
  std::vector<int> failing, stepped_out;
  for (int r = 0; r < size; ++r) {
    if (!bit(bits_, r)) failing.push_back(r);
    if (!bit(bits_, size + r)) stepped_out.push_back(r);
  }
  if (failing.empty() && stepped_out.empty()) {
    RoundVerdict stands;
    stands.batches.resize(mine.size());
    return stands;
  }
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (!mine[i].ok())
      log().error("{}: {}: failed on this rank: {}", label_, describe[i], mine[i].to_string());
  }
  if (may_exchange) return exchange(mine, out_of_step, describe);
  // No messages on this thread: the bits say who, each failing member's log says why.
  RoundVerdict v;
  const Status all(StatusCode::kAborted, "a batch of this round failed on ranks " +
                                             ranks_string(failing) + " of " + label_ +
                                             " (each failing rank's log says why)");
  for (std::size_t i = 0; i < mine.size(); ++i)
    v.batches.push_back(Status(all.code(), describe[i] + ": " + all.message()));
  v.stop = !stepped_out.empty();
  if (v.stop && !v.batches.empty()) v.stop_status = v.batches.front();
  return v;
}

StatusOr<RoundVerdict> BatchVerdicts::exchange(const std::vector<Status>& mine, bool out_of_step,
                                               const std::vector<std::string>& describe) {
  std::vector<BatchFailure> own;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (mine[i].ok()) continue;
    own.push_back({static_cast<uint32_t>(i), control_->rank(), mine[i], out_of_step});
  }
  // Every member is known to be here (the AND completed), as gather() requires.
  StatusOr<std::vector<std::string>> gathered = control_->gather(encode_failures(own));
  if (!gathered.ok()) return gathered.status();
  std::string decided;
  if (control_->rank() == 0) {
    std::vector<BatchFailure> all;
    for (const std::string& part : *gathered) {
      StatusOr<std::vector<BatchFailure>> got = decode_failures(part);
      if (!got.ok()) return got.status();
      all.insert(all.end(), got->begin(), got->end());
    }
    decided = encode_failures(choose_failures(all));
  }
  if (Status s = control_->broadcast(&decided); !s.ok()) return s;
  StatusOr<std::vector<BatchFailure>> verdicts = decode_failures(decided);
  if (!verdicts.ok()) return verdicts.status();
  return decide_verdicts(*verdicts, describe);
}

Status BatchVerdicts::and_round(std::vector<uint64_t>* bits, std::size_t batches,
                                bool may_exchange) {
  if (Status s = control_->start_and(bits); !s.ok()) return s;
  const Clock::time_point start = Clock::now();
  const double bound =
      static_cast<double>(batches + 1) * (liveness_seconds_ + kRollCallGraceSeconds);
  Clock::time_point next_look = start + kLook;
  // Members that ran the same batches arrive within microseconds of each other: short pauses
  // while that may still be so, then 1 ms ones for a member that is far behind.
  Backoff backoff(std::chrono::microseconds(20), /*eager=*/true, std::chrono::microseconds(1000),
                  std::chrono::microseconds(2000));
  while (true) {
    StatusOr<bool> done = control_->test_and();
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
    } else if (liveness_seconds_ > 0 && waited > bound) {
      // The roll call that absent() may hold sends messages: the background thread's.
      const std::vector<int> gone = may_exchange ? control_->absent() : control_->missing();
      why = "ranks " + ranks_string(gone) + " did not come within " + seconds(bound) +
            " s ((batches + 1) x (CHORUS_LIVENESS_SECONDS + 5 s))";
    } else {
      continue;
    }
    return Status(StatusCode::kAborted, "rank " + std::to_string(control_->rank()) + " (" + label_ +
                                            "): stopped waiting for the verdict on a round's "
                                            "batches: " +
                                            why);
  }
}

}  // namespace chorus
