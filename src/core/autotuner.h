#pragma once
// The autotuner (CHORUS_AUTOTUNE, HOROVOD_AUTOTUNE): during a job's first steps it samples
// settings of the global process set that change no result (core/tuning_search.h: the
// fusion limit, the host algorithm where the set's reductions move messages, the cycle
// time), and keeps the best.
//
// How the ranks agree. Every member of the global set runs the same responses in the same
// rounds, so what the autotuner counts from them is the same on every rank: a sample spans
// CHORUS_AUTOTUNE_STEPS_PER_SAMPLE steps, a step ending where a collective's name comes back
// (the sample ends in the round where some name is reduced for the (steps + 1)-th time; a
// trainer whose names never repeat gets a sample of 100 rounds per step instead), and ends
// in the same round everywhere. Each rank
// scores the sample by its own clock: the bytes of the set's collectives in it (the same
// everywhere) over the seconds they took here. At that round every rank submits one
// collective of Chorus's own, an allreduce of [score, score^2, 1] named
// "chorus.autotune.<k>" (names with that prefix are Chorus's), negotiated like a trainer's.
// It completes in one round on every member, and the end of that round applies the next
// setting: a pure function of the agreed sums. So no round runs with a setting that another
// rank has not, and every rank ends with the same winner. A failed agreement (the job is
// failing) ends the search everywhere with the best setting agreed so far.
//
// What it reports. A CSV (CHORUS_AUTOTUNE_LOG; rank 0's, or every rank's where the path
// holds "{rank}") with one row per sample: the setting, its score in MB/s (the mean over the
// ranks), the spread (their standard deviation), the round whose end applied the next
// setting, and the gain over the defaults; its last row is the winner with the mean and
// spread over its samples and its gain. Rank 0 logs the same in one info line.
// `chorus-trace autotune LOG` draws the samples.
//
// Thread contract: after_cycle() by the thread that runs the cycle (core/cycle.h), with the
// runtime's progress lock held.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/config.h"
#include "core/handle_state.h"
#include "core/set_table.h"
#include "core/tuning_search.h"

namespace chorus {

/// What the autotuner is told by the configuration.
struct AutotuneOptions {
  std::string log_path;  ///< CHORUS_AUTOTUNE_LOG
  int64_t warmup_samples = 3;
  int64_t steps_per_sample = 10;
  int64_t samples_per_setting = 1;
  int64_t max_settings = 20;
  TuningSearchKind search = TuningSearchKind::kCoordinate;
  TuningCandidates candidates = TuningCandidates::standard();
  /// The defaults, apart from the fusion limit, which is the global set's own.
  HostAlgorithm algorithm = HostAlgorithm::kAuto;  ///< CHORUS_HOST_ALGORITHM
  double cycle_ms = 5;                             ///< CHORUS_CYCLE_TIME
};

class Autotuner {
 public:
  using Clock = std::chrono::steady_clock;

  /// The autotuner `config` asks for, or null where CHORUS_AUTOTUNE is off.
  static std::unique_ptr<Autotuner> make(const Config& config);
  explicit Autotuner(AutotuneOptions options) : options_(std::move(options)) {}
  Autotuner(const Autotuner&) = delete;
  Autotuner& operator=(const Autotuner&) = delete;
  ~Autotuner();

  /// After a cycle whose rounds all ran, at `now`: counts the global set's round, submits
  /// the agreement of a sample that ended in it, and returns the setting to apply before the
  /// next round where an agreement completed in it (the same on every rank).
  std::optional<TuningSetting> after_cycle(SetTable& sets, Clock::time_point now);

  /// Whether the search ended (the winner is applied).
  bool done() const { return phase_ == Phase::kDone; }

 private:
  enum class Phase {
    kStart,      // the defaults not read yet
    kMeasuring,  // a sample runs
    kAgreeing,   // its agreement is negotiating
    kDone,
  };

  // The global set's round, in measuring: submits the agreement when the sample ended (a
  // setting to apply only where that failed and the search ended).
  std::optional<TuningSetting> measure(SetTable& sets, SetState& global, Clock::time_point now);
  // The sample's agreement completed with `sums`; returns the next setting.
  TuningSetting agreed(const double* sums);
  // Ends the search with the best setting so far; `why` for the log.
  TuningSetting finish(const std::string& why);
  // One row of the CSV (opened at the first).
  void write_row(const std::string& row);

  AutotuneOptions options_;
  Phase phase_ = Phase::kStart;
  std::optional<TuningSearch> search_;
  int rank_ = -1;
  int64_t rounds_ = 0;  // the global set's rounds so far: the same count on every member

  // The sample in flight.
  bool sampling_ = false;  // its first round ran
  // How often each name was reduced since that round: a step ends where a name comes back.
  std::unordered_map<std::string, int64_t> seen_;
  Clock::time_point started_;
  int64_t bytes_ = 0;
  int64_t steps_ = 0;
  int64_t productive_rounds_ = 0;
  int64_t samples_ = 0;  // samples agreed so far, warm-up included
  std::shared_ptr<detail::HandleState> agreement_;

  // The current setting's samples: sums of the agreed scores, their squares and counts.
  double sum_ = 0, sum_sq_ = 0, count_ = 0;
  // Every setting scored, with its mean and spread (the winner's row and line).
  struct Scored {
    TuningSetting setting;
    double mean = 0;
    double spread = 0;
  };
  std::vector<Scored> scored_;

  std::FILE* log_ = nullptr;
};

}  // namespace chorus
