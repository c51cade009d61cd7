#include "summary.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

namespace chorus::trace {
namespace {

using Intervals = std::vector<std::pair<int64_t, int64_t>>;  // sorted, disjoint [begin, end)

Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& [b, e] : v) {
    if (!out.empty() && b <= out.back().second) {
      out.back().second = std::max(out.back().second, e);
    } else if (e > b) {
      out.emplace_back(b, e);
    }
  }
  return out;
}

Intervals intersection(const Intervals& a, const Intervals& b) {
  Intervals out;
  for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const int64_t lo = std::max(a[i].first, b[j].first);
    const int64_t hi = std::min(a[i].second, b[j].second);
    if (lo < hi) out.emplace_back(lo, hi);
    (a[i].second < b[j].second ? i : j)++;
  }
  return out;
}

// Microseconds of `v` within [begin, end).
int64_t covered(const Intervals& v, int64_t begin, int64_t end) {
  int64_t total = 0;
  for (const auto& [b, e] : v) total += std::max<int64_t>(0, std::min(e, end) - std::max(b, begin));
  return total;
}

// "step 12" -> 12; -1 otherwise.
int64_t step_number(const std::string& detail) {
  long long n = -1;
  return std::sscanf(detail.c_str(), "step %lld", &n) == 1 ? n : -1;
}

// "fused: 3 tensors, 4096 bytes" -> {3, 4096}; {1, 0} for a collective alone.
std::pair<int64_t, int64_t> batch_of(const std::string& detail) {
  long long tensors = 0, bytes = 0;
  if (std::sscanf(detail.c_str(), "fused: %lld tensors, %lld bytes", &tensors, &bytes) == 2) {
    return {tensors, bytes};
  }
  return {1, 0};
}

bool is_reduction(const std::string& phase) {
  return phase == "MEMCPY_IN" || phase == "COLLECTIVE" || phase == "MEMCPY_OUT";
}

std::string fixed(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) b /= 1024, ++u;
  return fixed(b, u == 0 ? 0 : 1) + " " + units[u];
}

std::string padded(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

void steps_of(const std::vector<Span>& spans, Summary& s) {
  struct RankData {
    std::vector<const Span*> steps;
    Intervals waits, reductions;
  };
  std::map<int, RankData> ranks;
  for (const Span& sp : spans) {
    RankData& r = ranks[sp.rank];
    if (sp.row.empty() && sp.phase == "STEP") r.steps.push_back(&sp);
    if (sp.row.empty() && sp.phase == "WAIT") r.waits.emplace_back(sp.begin_us, sp.end_us);
    if (!sp.row.empty() && is_reduction(sp.phase)) {
      r.reductions.emplace_back(sp.begin_us, sp.end_us);
    }
  }
  std::map<int64_t, StepSummary> steps;
  for (auto& [rank, r] : ranks) {
    s.ranks.push_back(rank);
    if (r.steps.empty()) {
      s.ranks_without_steps.push_back(rank);
      continue;
    }
    const Intervals waits = merged(std::move(r.waits));
    const Intervals reducing = intersection(waits, merged(std::move(r.reductions)));
    for (const Span* st : r.steps) {
      const int64_t n = step_number(st->detail);
      if (n < 0) continue;
      RankStep rs;
      rs.rank = rank;
      const double waited = covered(waits, st->begin_us, st->end_us) / 1e3;
      rs.step_ms = (st->end_us - st->begin_us) / 1e3;
      rs.reduce_ms = covered(reducing, st->begin_us, st->end_us) / 1e3;
      rs.peers_ms = waited - rs.reduce_ms;
      rs.compute_ms = rs.step_ms - waited;
      StepSummary& step = steps[n];
      step.step = n;
      step.ranks.push_back(rs);
    }
  }
  for (auto& [n, step] : steps) {
    const auto slowest = std::max_element(
        step.ranks.begin(), step.ranks.end(),
        [](const RankStep& a, const RankStep& b) { return a.compute_ms < b.compute_ms; });
    step.slowest_rank = slowest->rank;
    s.steps.push_back(std::move(step));
  }
}

void waits_of(const std::vector<Span>& spans, Summary& s) {
  struct Acc {
    TensorWaits w;
    double total_ms = 0;
    int64_t spans = 0;
    std::map<int, int64_t> last;
  };
  std::map<std::string, Acc> by_name;
  for (const std::vector<std::size_t>& group : negotiations(spans)) {
    Acc& a = by_name[spans[group.front()].row];
    a.w.name = spans[group.front()].row;
    ++a.w.collectives;
    for (std::size_t i : group) {
      const double ms = (spans[i].end_us - spans[i].begin_us) / 1e3;
      a.total_ms += ms;
      ++a.spans;
      a.w.max_ms = std::max(a.w.max_ms, ms);
    }
    if (group.size() > 1) ++a.last[spans[last_submitted(spans, group)].rank];
  }
  std::vector<std::pair<double, TensorWaits>> ranked;
  for (auto& [name, a] : by_name) {
    a.w.mean_ms = a.total_ms / static_cast<double>(a.spans);
    for (const auto& [rank, count] : a.last) {
      if (count > a.w.last_count) a.w.last_rank = rank, a.w.last_count = count;
    }
    ranked.emplace_back(a.total_ms, std::move(a.w));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  for (auto& [total, w] : ranked) s.waits.push_back(std::move(w));
}

void fusion_of(const std::vector<Span>& spans, Summary& s) {
  if (s.ranks.empty()) return;
  const int rank = s.ranks.front();
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> batches;  // time -> batch
  for (const Span& sp : spans) {
    if (sp.rank != rank || sp.row.empty() || sp.phase != "COLLECTIVE") continue;
    const auto [tensors, bytes] = batch_of(sp.detail);
    if (tensors < 2) {
      ++s.fusion.alone;
    } else {
      batches[{sp.begin_us, sp.end_us}] = {tensors, bytes};  // one entry per batch
    }
  }
  for (const auto& [when, b] : batches) {
    ++s.fusion.batches;
    s.fusion.fused += b.first;
    s.fusion.max_tensors = std::max(s.fusion.max_tensors, b.first);
    s.fusion.bytes += b.second;
    s.fusion.max_bytes = std::max(s.fusion.max_bytes, b.second);
  }
}

}  // namespace

Summary summarize(const std::vector<Span>& spans) {
  Summary s;
  steps_of(spans, s);
  waits_of(spans, s);
  fusion_of(spans, s);
  return s;
}

std::string summary_text(const Summary& s, std::size_t most_steps, std::size_t most_tensors) {
  std::string out =
      std::to_string(s.ranks.size()) + " rank(s), " + std::to_string(s.steps.size()) + " step(s)\n";
  for (int r : s.ranks_without_steps) {
    out += "rank " + std::to_string(r) +
           " marked no steps: DistributedOptimizer marks them, or chorus::mark_step() / "
           "hvd.mark_step() after each step\n";
  }
  if (!s.steps.empty()) {
    struct Totals {
      double step = 0, compute = 0, peers = 0, reduce = 0;
      int64_t steps = 0, slowest = 0;
    };
    std::map<int, Totals> per_rank;
    for (const StepSummary& st : s.steps) {
      for (const RankStep& r : st.ranks) {
        Totals& t = per_rank[r.rank];
        t.step += r.step_ms, t.compute += r.compute_ms, t.peers += r.peers_ms;
        t.reduce += r.reduce_ms, ++t.steps;
        t.slowest += r.rank == st.slowest_rank;
      }
    }
    out += "\nper rank, mean ms per step:\n";
    out += "  rank     step  computing  waiting for peers  reducing  slowest in\n";
    for (const auto& [rank, t] : per_rank) {
      const double n = static_cast<double>(t.steps);
      out += padded(std::to_string(rank), 6) + padded(fixed(t.step / n), 9) +
             padded(fixed(t.compute / n), 11) + padded(fixed(t.peers / n), 19) +
             padded(fixed(t.reduce / n), 10) + "  " + std::to_string(t.slowest) + " of " +
             std::to_string(t.steps) + " steps\n";
    }
    std::vector<const StepSummary*> longest;
    for (const StepSummary& st : s.steps) longest.push_back(&st);
    auto longest_ms = [](const StepSummary* st) {
      double ms = 0;
      for (const RankStep& r : st->ranks) ms = std::max(ms, r.step_ms);
      return ms;
    };
    std::stable_sort(longest.begin(), longest.end(),
                     [&](const auto* a, const auto* b) { return longest_ms(a) > longest_ms(b); });
    longest.resize(std::min(longest.size(), most_steps));
    out += "\nlongest steps:\n";
    out += "  step       ms  slowest rank  its computing  the others' wait for peers (mean)\n";
    for (const StepSummary* st : longest) {
      double computing = 0, others = 0;
      int n = 0;
      for (const RankStep& r : st->ranks) {
        if (r.rank == st->slowest_rank) {
          computing = r.compute_ms;
        } else {
          others += r.peers_ms, ++n;
        }
      }
      out += padded(std::to_string(st->step), 6) + padded(fixed(longest_ms(st)), 9) +
             padded(std::to_string(st->slowest_rank), 14) + padded(fixed(computing), 15) +
             padded(n ? fixed(others / n) : std::string("-"), 35) + "\n";
    }
  }
  if (!s.waits.empty()) {
    out += "\nlongest waits from submission to agreement (NEGOTIATE), by total:\n";
    out += "  collectives  mean ms   max ms  last to submit  tensor\n";
    for (std::size_t i = 0; i < s.waits.size() && i < most_tensors; ++i) {
      const TensorWaits& w = s.waits[i];
      const std::string last = w.last_rank < 0 ? std::string("-")
                                               : "rank " + std::to_string(w.last_rank) + " (" +
                                                     std::to_string(w.last_count) + "x)";
      out += padded(std::to_string(w.collectives), 13) + padded(fixed(w.mean_ms, 2), 9) +
             padded(fixed(w.max_ms, 2), 9) + padded(last, 16) + "  " + w.name + "\n";
    }
  }
  const FusionSummary& f = s.fusion;
  out += "\nfusion (rank " +
         (s.ranks.empty() ? std::string("-") : std::to_string(s.ranks.front())) + "): ";
  if (f.batches == 0) {
    out += "no fused batches";
  } else {
    out += std::to_string(f.batches) + " batches of " +
           fixed(static_cast<double>(f.fused) / f.batches) + " tensors on average (at most " +
           std::to_string(f.max_tensors) + "), " +
           bytes_text(static_cast<double>(f.bytes) / f.batches) + " on average (at most " +
           bytes_text(static_cast<double>(f.max_bytes)) + ")";
  }
  out += "; " + std::to_string(f.alone) + " collectives of one tensor\n";
  return out;
}

std::string summary_json(const Summary& s) {
  std::string out = "{\"ranks\":[";
  for (std::size_t i = 0; i < s.ranks.size(); ++i)
    out += (i ? "," : "") + std::to_string(s.ranks[i]);
  out += "],\n\"steps\":[";
  for (std::size_t i = 0; i < s.steps.size(); ++i) {
    const StepSummary& st = s.steps[i];
    out += i ? ",\n" : "\n";
    out += "{\"step\":" + std::to_string(st.step) +
           ",\"slowest_rank\":" + std::to_string(st.slowest_rank) + ",\"ranks\":[";
    for (std::size_t j = 0; j < st.ranks.size(); ++j) {
      const RankStep& r = st.ranks[j];
      out += (j ? "," : "") + std::string("{\"rank\":") + std::to_string(r.rank) +
             ",\"step_ms\":" + fixed(r.step_ms, 3) + ",\"compute_ms\":" + fixed(r.compute_ms, 3) +
             ",\"peers_ms\":" + fixed(r.peers_ms, 3) + ",\"reduce_ms\":" + fixed(r.reduce_ms, 3) +
             "}";
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

}  // namespace chorus::trace
