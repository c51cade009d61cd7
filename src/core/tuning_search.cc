#include "core/tuning_search.h"

#include <algorithm>
#include <cstdio>

namespace chorus {
namespace {

// `values` with `first` at its head, each value once.
template <class T>
std::vector<T> with_default(const std::vector<T>& values, T first) {
  std::vector<T> out{first};
  for (const T& v : values) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

}  // namespace

std::string TuningSetting::describe() const {
  char cycle[32];
  std::snprintf(cycle, sizeof(cycle), "%g", cycle_ms);
  return "fusion " + std::to_string(fusion_bytes) + " bytes, host algorithm " +
         kHostAlgorithmWords.name(algorithm) + ", cycle time " + cycle + " ms";
}

TuningCandidates TuningCandidates::standard() {
  TuningCandidates c;
  c.fusion_bytes = {64 << 10, 512 << 10, 2 << 20, 8 << 20, 32 << 20};
  c.algorithms = {HostAlgorithm::kAuto, HostAlgorithm::kGatherAll, HostAlgorithm::kDirect,
                  HostAlgorithm::kRecursiveDoubling, HostAlgorithm::kHalvingDoubling};
  c.cycle_ms = {0.2, 1, 5, 20};
  return c;
}

int64_t TuningCandidates::largest_fusion(const TuningSetting& defaults) const {
  int64_t most = defaults.fusion_bytes;
  for (int64_t v : fusion_bytes) most = std::max(most, v);
  return most;
}

TuningSearch::TuningSearch(const TuningSetting& defaults, const TuningCandidates& candidates,
                           TuningSearchKind kind, int max_settings)
    : candidates_(candidates),
      kind_(kind),
      max_settings_(std::max(max_settings, 1)),
      best_(defaults) {
  plan_.push_back(defaults);
  if (kind_ != TuningSearchKind::kGrid) return;
  for (int64_t f : with_default(candidates_.fusion_bytes, defaults.fusion_bytes)) {
    for (HostAlgorithm a : with_default(candidates_.algorithms, defaults.algorithm)) {
      for (double c : with_default(candidates_.cycle_ms, defaults.cycle_ms)) {
        const TuningSetting s{f, a, c};
        if (!(s == defaults)) plan_.push_back(s);
      }
    }
  }
}

bool TuningSearch::record(double score) {
  if (done_) return true;
  ++scored_;
  if (scored_ == 1) defaults_score_ = score;
  if (scored_ == 1 || score > best_score_) {
    best_ = current();
    best_score_ = score;
  }
  ++next_;
  if (scored_ >= max_settings_) {
    done_ = true;
  } else if (next_ == plan_.size()) {
    done_ = kind_ == TuningSearchKind::kGrid || !plan_next_dimension();
  }
  // current() must stay valid after the end: it names the winner then.
  if (done_) {
    plan_.push_back(best_);
    next_ = plan_.size() - 1;
  }
  return done_;
}

bool TuningSearch::plan_next_dimension() {
  const std::size_t before = plan_.size();
  // Each of `values` but best_'s own, in best_.
  auto vary = [&](auto field, const auto& values) {
    for (const auto& v : values) {
      if (v == best_.*field) continue;
      TuningSetting s = best_;
      s.*field = v;
      plan_.push_back(s);
    }
  };
  for (; dimension_ < 3 && plan_.size() == before; ++dimension_) {
    switch (dimension_) {
      case 0: vary(&TuningSetting::fusion_bytes, candidates_.fusion_bytes); break;
      case 1: vary(&TuningSetting::algorithm, candidates_.algorithms); break;
      case 2: vary(&TuningSetting::cycle_ms, candidates_.cycle_ms); break;
    }
  }
  return plan_.size() > before;
}

}  // namespace chorus
