#pragma once
// The autotuner's search (core/autotuner.h): which setting to sample next, from the scores of
// the samples so far, and which one wins. A pure function of the scores it is given, so that
// every rank, given the same agreed scores, walks the same settings in the same order and
// ends with the same winner.
//
// The settings it varies change how long a step takes and never a result: the fusion limit
// (how many bytes one fused batch holds), the host algorithm of the global set's reductions
// (collectives/cost_model.h: every algorithm evaluates the same combination tree) and the
// cycle time (how an idle rank paces its rounds). The defaults are sampled first, so that
// the winner's gain over them is measured in the same run.
//
// Two searches:
//  - coordinate: one dimension at a time, in the order fusion limit, host algorithm, cycle
//    time; each candidate of a dimension is sampled with the best of the dimensions before
//    it and the defaults of those after: at most 1 + sum(candidates) settings, 15 for the
//    standard candidates; it finds the best setting whenever the dimensions' effects add
//    (in docs/performance.md, the grid found nothing that it missed).
//  - grid: every combination (up to 150 for the standard candidates), for when they do not.
// Either ends early after `max_settings` settings, with the best so far.

#include <cstdint>
#include <string>
#include <vector>

#include "base/words.h"
#include "collectives/cost_model.h"

namespace chorus {

enum class TuningSearchKind : uint8_t { kCoordinate, kGrid };

/// CHORUS_AUTOTUNE_SEARCH's words.
inline constexpr Words<TuningSearchKind, 2> kTuningSearchWords{{{
    {TuningSearchKind::kCoordinate, "coordinate"},
    {TuningSearchKind::kGrid, "grid"},
}}};

/// One point of the search.
struct TuningSetting {
  int64_t fusion_bytes = 0;
  HostAlgorithm algorithm = HostAlgorithm::kAuto;
  double cycle_ms = 0;

  friend bool operator==(const TuningSetting&, const TuningSetting&) = default;
  /// "fusion 4194304 bytes, host algorithm auto, cycle time 5 ms".
  std::string describe() const;
};

/// The values each dimension may take. The defaults' values need not be among them: they
/// are added.
struct TuningCandidates {
  std::vector<int64_t> fusion_bytes;
  std::vector<HostAlgorithm> algorithms;
  std::vector<double> cycle_ms;

  /// Chorus's candidates: fusion limits 64 KiB..32 MiB, every host algorithm, cycle times
  /// 0.2..20 ms.
  static TuningCandidates standard();
  /// The largest fusion limit among them and `defaults`: the fusion buffer's size.
  int64_t largest_fusion(const TuningSetting& defaults) const;
};

class TuningSearch {
 public:
  /// Starts at `defaults`. `max_settings` >= 1.
  TuningSearch(const TuningSetting& defaults, const TuningCandidates& candidates,
               TuningSearchKind kind, int max_settings);

  /// The setting to sample now.
  const TuningSetting& current() const { return plan_[next_]; }
  /// Whether the search ended: best() is the winner.
  bool done() const { return done_; }
  /// The sample of current() scored `score` (higher is better): moves to the next setting.
  /// Returns done().
  bool record(double score);

  /// The best setting scored so far, and its score (the defaults before any record()).
  const TuningSetting& best() const { return best_; }
  double best_score() const { return best_score_; }
  /// The defaults' score: the first record().
  double defaults_score() const { return defaults_score_; }
  /// Settings scored so far.
  int scored() const { return scored_; }

 private:
  // Appends the next dimension's settings around best_ to plan_ (coordinate); false when no
  // dimension is left.
  bool plan_next_dimension();

  TuningCandidates candidates_;
  TuningSearchKind kind_;
  int max_settings_;
  std::vector<TuningSetting> plan_;  // settings to sample, in order; plan_[next_] is next
  std::size_t next_ = 0;
  int dimension_ = 0;  // coordinate: the next dimension to plan
  TuningSetting best_;
  double best_score_ = 0;
  double defaults_score_ = 0;
  int scored_ = 0;
  bool done_ = false;
};

}  // namespace chorus
