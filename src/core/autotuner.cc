#include "core/autotuner.h"

#include <algorithm>
#include <cmath>

#include "base/logging.h"
#include "core/ops/op.h"
#include "timeline/timeline.h"

namespace chorus {
namespace {

// Collectives of Chorus's own: not the trainer's, so not counted in a sample.
constexpr char kAgreementPrefix[] = "chorus.autotune.";
// A sample in which no name comes back (a trainer whose names never repeat) ends after this
// many productive rounds per step.
constexpr int64_t kRoundsPerStepWithoutRepeats = 100;

bool own_collective(const std::string& name) { return name.rfind(kAgreementPrefix, 0) == 0; }

std::string number(double v, const char* format = "%.3f") {
  char text[64];
  std::snprintf(text, sizeof(text), format, v);
  return text;
}

std::string setting_columns(const TuningSetting& s) {
  return std::to_string(s.fusion_bytes) + "," + kHostAlgorithmWords.name(s.algorithm) + "," +
         number(s.cycle_ms, "%g");
}

std::string gain(double score, double defaults) {
  if (!(defaults > 0)) return "";
  return number(100.0 * (score / defaults - 1.0), "%+.1f%%");
}

}  // namespace

std::unique_ptr<Autotuner> Autotuner::make(const Config& config) {
  if (!config.autotune) return nullptr;
  AutotuneOptions o;
  o.log_path = config.autotune_log;
  o.warmup_samples = config.autotune_warmup_samples;
  o.steps_per_sample = config.autotune_steps_per_sample;
  o.samples_per_setting = config.autotune_samples_per_setting;
  o.max_settings = config.autotune_max_settings;
  o.search = config.autotune_search;
  o.algorithm = config.host_algorithm;
  o.cycle_ms = config.cycle_time_ms;
  return std::make_unique<Autotuner>(std::move(o));
}

Autotuner::~Autotuner() {
  if (log_) std::fclose(log_);
}

std::optional<TuningSetting> Autotuner::after_cycle(SetTable& sets, Clock::time_point now) {
  if (phase_ == Phase::kDone) return std::nullopt;
  auto global = std::find_if(sets.begin(), sets.end(), [](const auto& s) { return s.first == 0; });
  if (global == sets.end()) return std::nullopt;
  SetState& set = *global->second;
  ++rounds_;
  if (phase_ == Phase::kStart) {
    rank_ = set.group->rank();
    // The same on every member: the set's backends follow from agreed settings.
    if (!set.executor->host_algorithm_applies()) options_.candidates.algorithms.clear();
    search_.emplace(TuningSetting{static_cast<int64_t>(set.executor->fusion_limit()),
                                  options_.algorithm, options_.cycle_ms},
                    options_.candidates, options_.search, static_cast<int>(options_.max_settings));
    phase_ = Phase::kMeasuring;
  }
  if (phase_ == Phase::kMeasuring) return measure(sets, set, now);
  // Agreeing: the agreement's response runs in one round on every member, which finishes
  // its handle there.
  if (!agreement_->done.load(std::memory_order_acquire)) return std::nullopt;
  std::shared_ptr<detail::HandleState> done = std::move(agreement_);
  phase_ = Phase::kMeasuring;  // the next sample starts in the next round
  if (!done->status.ok()) return finish("its agreement failed: " + done->status.to_string());
  return agreed(static_cast<const double*>(done->outputs[0].data));
}

std::optional<TuningSetting> Autotuner::measure(SetTable& sets, SetState& global,
                                                Clock::time_point now) {
  const auto& responses = global.negotiator->round().responses;
  const bool first_round = !sampling_;
  int64_t bytes = 0;
  bool trainers = false;
  for (const auto& shared : responses) {
    const Response& r = *shared;
    if (!r.status.ok() || !op_descriptor(r.op).run || own_collective(r.name)) continue;
    trainers = true;
    bytes += num_elements(r.shape) * static_cast<int64_t>(dtype_size(r.dtype));
    if (first_round) continue;
    // A name's k-th reduction in the sample ends the sample's (k-1)-th step.
    steps_ = std::max(steps_, ++seen_[r.name] - 1);
  }
  if (!trainers) return std::nullopt;
  if (first_round) {
    // The sample starts at the end of its first round with the trainer's collectives, whose
    // names count as reduced once.
    sampling_ = true;
    started_ = now;
    bytes_ = 0;
    steps_ = 0;
    productive_rounds_ = 0;
    seen_.clear();
    for (const auto& shared : responses) {
      if (!own_collective(shared->name)) seen_[shared->name] = 1;
    }
    return std::nullopt;
  }
  bytes_ += bytes;
  ++productive_rounds_;
  if (steps_ < options_.steps_per_sample &&
      productive_rounds_ < options_.steps_per_sample * kRoundsPerStepWithoutRepeats) {
    return std::nullopt;
  }
  // The sample ended in this round on every member: each submits its score.
  const double seconds = std::chrono::duration<double>(now - started_).count();
  const double score = seconds > 0 ? static_cast<double>(bytes_) / seconds / 1e6 : 0;
  auto handle = std::make_shared<detail::HandleState>(1);
  TensorRef sums = handle->allocate_output(0, DataType::kFloat64, {3});
  double* v = static_cast<double*>(sums.data);
  v[0] = score;
  v[1] = score * score;
  v[2] = 1;
  handle->set_output(0, sums);
  Entry e;
  e.set_id = 0;
  e.request.op = OpType::kAllreduce;
  e.request.name = kAgreementPrefix + std::to_string(samples_);
  e.request.dtype = DataType::kFloat64;
  e.request.reduce_op = ReduceOp::kSum;
  e.request.shape = {3};
  e.input = TensorPlace::of(sums);
  e.output = e.input;
  e.handle = handle;
  e.enqueued = now;
  sampling_ = false;
  phase_ = Phase::kAgreeing;
  agreement_ = handle;
  // Refused only where the trainer has a collective of that name in flight (the global set
  // always exists).
  if (Status s = sets.admit(std::move(e)); !s.ok()) {
    return finish("its agreement could not be submitted: " + s.to_string());
  }
  return std::nullopt;
}

TuningSetting Autotuner::agreed(const double* sums) {
  ++samples_;
  const double ranks = sums[2];
  const double mean = sums[0] / ranks;
  const double spread = std::sqrt(std::max(0.0, sums[1] / ranks - mean * mean));
  const TuningSetting measured = search_->current();
  const bool warmup = samples_ <= options_.warmup_samples;
  const std::string gain_column =
      warmup || search_->scored() == 0 ? "" : gain(mean, search_->defaults_score());
  write_row(std::to_string(samples_) + "," + (warmup ? "warmup," : "sample,") +
            setting_columns(measured) + "," + number(mean) + "," + number(spread) + "," +
            number(ranks, "%.0f") + "," + std::to_string(rounds_) + "," + gain_column);
  if (warmup) return measured;
  sum_ += sums[0];
  sum_sq_ += sums[1];
  count_ += ranks;
  if (count_ < ranks * static_cast<double>(options_.samples_per_setting)) return measured;
  const double setting_mean = sum_ / count_;
  scored_.push_back({measured, setting_mean,
                     std::sqrt(std::max(0.0, sum_sq_ / count_ - setting_mean * setting_mean))});
  sum_ = sum_sq_ = count_ = 0;
  if (search_->record(setting_mean)) return finish("");
  return search_->current();
}

TuningSetting Autotuner::finish(const std::string& why) {
  phase_ = Phase::kDone;
  agreement_.reset();
  const TuningSetting best = search_->best();
  std::string line;
  if (scored_.empty()) {
    line =
        "autotune: stopped before any setting was scored (" + why + "); keeping " + best.describe();
    write_row(std::to_string(samples_) + ",winner," + setting_columns(best) + ",,,," +
              std::to_string(rounds_) + ",");
  } else {
    const Scored& won = *std::find_if(scored_.begin(), scored_.end(),
                                      [&](const Scored& s) { return s.setting == best; });
    const Scored& defaults = scored_.front();
    const std::string gained = gain(won.mean, defaults.mean);
    write_row(std::to_string(samples_) + ",winner," + setting_columns(best) + "," +
              number(won.mean) + "," + number(won.spread) + ",," + std::to_string(rounds_) + "," +
              gained);
    line = "autotune: " + best.describe() + " won after " + std::to_string(scored_.size()) +
           " settings (" + std::to_string(samples_) + " samples): " + number(won.mean, "%.1f") +
           " MB/s reduced (spread " + number(won.spread, "%.1f") + "), " + gained +
           " over the defaults (" + defaults.setting.describe() + ": " +
           number(defaults.mean, "%.1f") + " MB/s)";
    if (!why.empty()) line += "; the search stopped early: " + why;
  }
  if (!options_.log_path.empty()) line += "; samples in " + options_.log_path;
  if (rank_ == 0) log().info("{}", line);
  return best;
}

void Autotuner::write_row(const std::string& row) {
  if (options_.log_path.empty()) return;
  const bool every_rank = timeline_on_every_rank(options_.log_path);
  if (rank_ != 0 && !every_rank) return;
  if (!log_) {
    const std::string path =
        every_rank ? timeline_path_for(options_.log_path, rank_) : options_.log_path;
    log_ = std::fopen(path.c_str(), "w");
    if (!log_) {
      log().warn("autotune: cannot write CHORUS_AUTOTUNE_LOG '{}'; the samples go unrecorded",
                 path);
      options_.log_path.clear();
      return;
    }
    std::fputs(
        "sample,kind,fusion_bytes,host_algorithm,cycle_ms,mb_per_s,spread_mb_per_s,ranks,round,"
        "gain_over_defaults\n",
        log_);
  }
  std::fputs((row + "\n").c_str(), log_);
  std::fflush(log_);
}

}  // namespace chorus
