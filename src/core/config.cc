#include "core/config.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>
#include <type_traits>

#include "collectives/gpu_build.h"

namespace chorus {
namespace {

Status bad_value(const std::string& var, const std::string& value, const char* accepted) {
  return invalid_argument(var + "='" + value + "' is invalid: expected " + accepted);
}

// Exact, so that values that differ in the last digit read differently across ranks.
std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

bool whole_number(const std::string& raw, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(raw.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool real_number(const std::string& raw, double* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(raw.c_str(), &end);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

const char* tristate_name(const std::optional<bool>& v) {
  if (!v) return "auto";
  return *v ? "1" : "0";
}

bool valid_log_level(const std::string& v) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    if (v == level) return true;
  }
  return false;
}

// The rows, one kind of field at a time. Each parser reads a set, non-empty value; `take`
// copies a field that Options sets; `valid` checks the merged value (Options bypass the
// parsers); `show` writes it as describe() and agreed() do.
// A number: whole (int64_t) or real (double), at least 0 (more than 0 where `Positive`),
// at most Max; doubles are written exactly and NaN fails the range. `Option` null where
// programs cannot set it (chorusrun sets it for the workers it launches).
template <class T, T Config::*Field, std::optional<T> Options::*Option, int64_t Max,
          bool Positive = false>
SettingRow number(const char* var, const char* horovod, const char* accepted, bool agreed) {
  return {var,
          horovod,
          accepted,
          agreed,
          [](const std::string& name, const std::string& raw, const char* accepted,
             Config& c) -> Status {
            bool ok;
            if constexpr (std::is_same_v<T, int64_t>) {
              ok = whole_number(raw, &(c.*Field));
            } else {
              ok = real_number(raw, &(c.*Field));
            }
            return ok ? Status() : bad_value(name, raw, accepted);
          },
          [](const std::string&, const Options& o, Config& c) -> Status {
            if constexpr (Option != nullptr) {
              if (o.*Option) c.*Field = *(o.*Option);
            }
            return {};
          },
          [](const Config& c) {
            const T v = c.*Field;
            return (Positive ? v > 0 : v >= 0) && v <= static_cast<T>(Max);
          },
          [](const Config& c) {
            if constexpr (std::is_same_v<T, int64_t>) {
              return std::to_string(c.*Field);
            } else {
              return exact(c.*Field);
            }
          },
          nullptr};
}

// A word from a fixed set, read through the vocabulary that the layer owning its meaning
// declares (base/words.h), from the variable and from Options alike; the accepted form is
// the vocabulary's list. `Option` null where only the environment sets it.
template <class T, T Config::*Field, std::optional<std::string> Options::*Option,
          const auto& Vocabulary>
SettingRow word(const char* var, bool agreed) {
  static const std::string accepted = Vocabulary.accepted();
  struct Word {
    static Status set(const std::string& name, const std::string& raw, Config& c) {
      StatusOr<T> v = Vocabulary.parse(raw, name);
      if (!v.ok()) return v.status();
      c.*Field = *v;
      return {};
    }
  };
  return {var,
          nullptr,
          accepted.c_str(),
          agreed,
          [](const std::string& name, const std::string& raw, const char*, Config& c) {
            return Word::set(name, raw, c);
          },
          [](const std::string& name, const Options& o, Config& c) -> Status {
            if constexpr (Option != nullptr) {
              if (o.*Option) return Word::set(name, *(o.*Option), c);
            }
            return {};
          },
          [](const Config&) { return true; },
          [](const Config& c) { return std::string(Vocabulary.name(c.*Field)); },
          nullptr};
}

// --- Horovod's readings of values -------------------------------------------------------

// Horovod reads a flag or a count as the integer its value starts with (strtol), 0 where none.
long horovod_integer(const std::string& raw) { return std::strtol(raw.c_str(), nullptr, 10); }

// Horovod's switches are integers, on where > 0 (HOROVOD_HIERARCHICAL_ALLREDUCE=2 is on); words
// go to the row's own parser, which takes true/false where the row does.
std::string horovod_switch(const std::string& raw, std::string*) {
  int64_t v = 0;
  if (!whole_number(raw, &v)) return raw;
  return v > 0 ? "1" : "0";
}

// Horovod's cycle time 0 (or less) is a loop that never pauses, so that work never waits for
// the next cycle. Chorus never makes work wait: its cycle time only paces an idle rank's rounds,
// and those rounds without a pause take the cores the trainer needs (about 40% of a 2-rank
// trainer's throughput at 0.001 ms, docs/performance.md). So 0 keeps Chorus's default;
// CHORUS_CYCLE_TIME=0 stays an error.
std::string horovod_cycle_time(const std::string& raw, std::string* why) {
  double v = 0;
  if (!real_number(raw, &v) || !(v <= 0)) return raw;
  *why =
      "Horovod's 0 keeps its loop from pausing so that work never waits for a cycle; Chorus "
      "never makes work wait (the cycle time only paces an idle rank's rounds), and idle rounds "
      "without a pause take the trainer's cores (set CHORUS_CYCLE_TIME to choose another)";
  return "";
}

// Horovod's words in any case (HOROVOD_CONTROLLER=GLOO).
std::string horovod_lower_case(const std::string& raw, std::string*) {
  std::string v;
  for (char ch : raw) v += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return v;
}

// Horovod's log levels, any case, with its two names Chorus spells otherwise.
std::string horovod_log_level(const std::string& raw, std::string* why) {
  const std::string v = horovod_lower_case(raw, why);
  if (v == "warning") return "warn";
  if (v == "fatal") return "critical";
  return v;
}

// A switch, 0 or 1 (a Horovod switch read as horovod_switch does); `Option` null where programs
// cannot set it (the test-only settings).
template <bool Config::*Field, std::optional<bool> Options::*Option = nullptr>
SettingRow flag(const char* var, const char* horovod, const char* accepted, bool agreed) {
  return {
      var,
      horovod,
      accepted,
      agreed,
      [](const std::string& name, const std::string& v, const char* accepted, Config& c) -> Status {
        if (v != "0" && v != "1") return bad_value(name, v, accepted);
        c.*Field = v == "1";
        return {};
      },
      [](const std::string&, const Options& o, Config& c) -> Status {
        if constexpr (Option != nullptr) {
          if (o.*Option) c.*Field = *(o.*Option);
        }
        return {};
      },
      [](const Config&) { return true; },
      [](const Config& c) { return std::string(c.*Field ? "1" : "0"); },
      horovod ? horovod_switch : nullptr};
}

// Text taken as it is: a path or a name; `Option` null where only the environment sets it.
template <std::string Config::*Field, std::optional<std::string> Options::*Option = nullptr>
SettingRow text(const char* var, const char* accepted, bool agreed) {
  return {var,
          nullptr,
          accepted,
          agreed,
          [](const std::string&, const std::string& raw, const char*, Config& c) -> Status {
            c.*Field = raw;
            return {};
          },
          [](const std::string&, const Options& o, Config& c) -> Status {
            if constexpr (Option != nullptr) {
              if (o.*Option) c.*Field = *(o.*Option);
            }
            return {};
          },
          [](const Config&) { return true; },
          [](const Config& c) { return c.*Field; },
          nullptr};
}

std::vector<SettingRow> make_table() {
  std::vector<SettingRow> t;
  t.push_back({"CHORUS_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD",
               "bytes, an integer between 0 and 4294967296 (4 GiB), or auto (unset: auto)", true,
               [](const std::string& name, const std::string& raw, const char* accepted,
                  Config& c) -> Status {
                 int64_t v = 0;
                 if (raw == "auto") {
                   c.fusion_threshold_bytes.reset();
                 } else if (whole_number(raw, &v)) {
                   c.fusion_threshold_bytes = v;
                 } else {
                   return bad_value(name, raw, accepted);
                 }
                 return {};
               },
               [](const std::string&, const Options& o, Config& c) -> Status {
                 if (o.fusion_threshold_bytes) c.fusion_threshold_bytes = *o.fusion_threshold_bytes;
                 return {};
               },
               [](const Config& c) {
                 return !c.fusion_threshold_bytes ||
                        (*c.fusion_threshold_bytes >= 0 &&
                         *c.fusion_threshold_bytes <= Config::kMaxFusionThreshold);
               },
               [](const Config& c) {
                 return c.fusion_threshold_bytes ? std::to_string(*c.fusion_threshold_bytes)
                                                 : std::string("auto");
               },
               nullptr});
  SettingRow cycle = number<double, &Config::cycle_time_ms, &Options::cycle_time_ms, 10000, true>(
      "CHORUS_CYCLE_TIME", "HOROVOD_CYCLE_TIME", "milliseconds, > 0 and <= 10000", false);
  cycle.from_horovod = horovod_cycle_time;
  t.push_back(cycle);
  t.push_back(number<int64_t, &Config::cache_capacity, &Options::cache_capacity, 1 << 20>(
      "CHORUS_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY", "an integer between 0 and 1048576", true));
  t.push_back({"CHORUS_TIMELINE", "HOROVOD_TIMELINE", "a file path", false,
               [](const std::string&, const std::string& raw, const char*, Config& c) -> Status {
                 c.timeline_path = raw;
                 return {};
               },
               [](const std::string&, const Options& o, Config& c) -> Status {
                 if (o.timeline_path) c.timeline_path = *o.timeline_path;
                 return {};
               },
               [](const Config&) { return true; }, [](const Config& c) { return c.timeline_path; },
               // Horovod's "no file until start_timeline()" is Chorus's default.
               [](const std::string& raw, std::string*) {
                 return raw == "DYNAMIC" ? std::string() : raw;
               }});
  t.push_back(number<int64_t, &Config::timeline_max_mb, &Options::timeline_max_mb, 1 << 20, true>(
      "CHORUS_TIMELINE_MAX_MB", nullptr, "MiB, an integer between 1 and 1048576", false));
  t.push_back(flag<&Config::timeline_mark_cycles, &Options::timeline_mark_cycles>(
      "CHORUS_TIMELINE_MARK_CYCLES", "HOROVOD_TIMELINE_MARK_CYCLES", "0 or 1", false));
  t.push_back(
      text<&Config::debug_dir, &Options::debug_dir>("CHORUS_DEBUG_DIR", "a directory", false));
  constexpr auto kWeek = static_cast<int64_t>(Config::kMaxSeconds);
  const char* seconds = "seconds, between 0 and 604800 (a week)";
  t.push_back(number<double, &Config::stall_check_seconds, &Options::stall_check_seconds, kWeek>(
      "CHORUS_STALL_CHECK_SECONDS", "HOROVOD_STALL_CHECK_TIME_SECONDS", seconds, true));
  t.push_back(
      number<double, &Config::stall_shutdown_seconds, &Options::stall_shutdown_seconds, kWeek>(
          "CHORUS_STALL_SHUTDOWN_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", seconds, true));
  t.push_back(number<double, &Config::liveness_seconds, &Options::liveness_seconds, kWeek>(
      "CHORUS_LIVENESS_SECONDS", nullptr, seconds, true));
  t.push_back(
      number<double, &Config::gpu_timeout_seconds, &Options::gpu_timeout_seconds, kWeek, true>(
          "CHORUS_GPU_TIMEOUT_SECONDS", nullptr, "seconds, > 0 and <= 604800 (a week)", true));
  t.push_back({"CHORUS_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLREDUCE",
               "1 (on), 0 (off) or auto (also true/false, on/off; unset: auto)", true,
               [](const std::string& name, const std::string& v, const char* accepted,
                  Config& c) -> Status {
                 if (v == "auto") {
                   c.hierarchical_allreduce.reset();
                 } else if (v == "1" || v == "true" || v == "on") {
                   c.hierarchical_allreduce = true;
                 } else if (v == "0" || v == "false" || v == "off") {
                   c.hierarchical_allreduce = false;
                 } else {
                   return bad_value(name, v, accepted);
                 }
                 return {};
               },
               [](const std::string&, const Options& o, Config& c) -> Status {
                 if (o.hierarchical_allreduce) c.hierarchical_allreduce = *o.hierarchical_allreduce;
                 return {};
               },
               [](const Config&) { return true; },
               [](const Config& c) { return std::string(tristate_name(c.hierarchical_allreduce)); },
               horovod_switch});
  t.push_back(
      word<GpuBackendRequest, &Config::gpu_backend, &Options::gpu_backend, kGpuBackendWords>(
          "CHORUS_GPU_BACKEND", true));
  t.push_back(
      word<HostAlgorithm, &Config::host_algorithm, &Options::host_algorithm, kHostAlgorithmWords>(
          "CHORUS_HOST_ALGORITHM", true));
  t.push_back(flag<&Config::shared_memory, &Options::shared_memory>("CHORUS_SHARED_MEMORY", nullptr,
                                                                    "0 or 1", true));
  t.push_back(word<BindMode, &Config::bind, &Options::bind, kBindWords>("CHORUS_BIND", false));
  // The autotuner (core/autotuner.h): its samples and its search are agreed, so that every
  // rank walks the same settings.
  SettingRow autotune = flag<&Config::autotune, &Options::autotune>(
      "CHORUS_AUTOTUNE", "HOROVOD_AUTOTUNE", "0 or 1", true);
  t.push_back(autotune);
  SettingRow autotune_log = text<&Config::autotune_log, &Options::autotune_log>(
      "CHORUS_AUTOTUNE_LOG", "a file path (\"{rank}\" in it: every rank's)", false);
  autotune_log.horovod = "HOROVOD_AUTOTUNE_LOG";
  t.push_back(autotune_log);
  t.push_back(number<int64_t, &Config::autotune_warmup_samples, nullptr, 1000>(
      "CHORUS_AUTOTUNE_WARMUP_SAMPLES", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES",
      "samples, an integer between 0 and 1000", true));
  t.push_back(number<int64_t, &Config::autotune_steps_per_sample, nullptr, 100000, true>(
      "CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",
      "steps, an integer between 1 and 100000", true));
  t.push_back(number<int64_t, &Config::autotune_samples_per_setting, nullptr, 1000, true>(
      "CHORUS_AUTOTUNE_SAMPLES_PER_SETTING", nullptr, "samples, an integer between 1 and 1000",
      true));
  t.push_back(number<int64_t, &Config::autotune_max_settings, nullptr, 100000, true>(
      "CHORUS_AUTOTUNE_MAX_SETTINGS", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
      "settings, an integer between 1 and 100000", true));
  t.push_back(word<TuningSearchKind, &Config::autotune_search, nullptr, kTuningSearchWords>(
      "CHORUS_AUTOTUNE_SEARCH", true));
  // The world without MPI (docs/torch_distributed.md): how the ranks meet.
  SettingRow controller =
      word<Controller, &Config::controller, &Options::controller, kControllerWords>(
          "CHORUS_CONTROLLER", false);
  controller.horovod = "HOROVOD_CONTROLLER";
  controller.from_horovod = horovod_lower_case;
  t.push_back(controller);
  SettingRow iface = text<&Config::gloo_iface>("CHORUS_GLOO_IFACE", "a network interface", false);
  iface.horovod = "HOROVOD_GLOO_IFACE";
  t.push_back(iface);
  t.push_back(number<int64_t, &Config::store_port, nullptr, 65535>(
      "CHORUS_STORE_PORT", nullptr, "a port, an integer between 0 and 65535", false));
  // Elastic jobs (docs/elastic.md): chorusrun sets the job, the supervisor and the version.
  t.push_back(text<&Config::elastic_job>("CHORUS_ELASTIC_JOB", "a name", true));
  t.push_back(text<&Config::elastic_dir>("CHORUS_ELASTIC_DIR", "a directory", false));
  t.push_back(number<int64_t, &Config::elastic_keep, nullptr, 1000, true>(
      "CHORUS_ELASTIC_KEEP", nullptr, "commits, an integer between 1 and 1000", true));
  t.push_back(text<&Config::elastic_supervisor>("CHORUS_ELASTIC_SUPERVISOR",
                                                "addresses and a port (set by chorusrun)", true));
  t.push_back(number<int64_t, &Config::elastic_hosts_version, nullptr, int64_t{1} << 40>(
      "CHORUS_ELASTIC_HOSTS_VERSION", nullptr, "an integer (set by chorusrun)", true));
  t.push_back(number<int64_t, &Config::elastic_launch, nullptr, int64_t{1} << 40>(
      "CHORUS_ELASTIC_LAUNCH", nullptr, "an integer (set by chorusrun)", true));
  t.push_back(text<&Config::elastic_rendezvous>("CHORUS_ELASTIC_RENDEZVOUS",
                                                "addresses and a port (set by chorusrun)", false));
  t.push_back(
      text<&Config::elastic_worker>("CHORUS_ELASTIC_WORKER", "an id (set by chorusrun)", false));
  // The test-only settings have no Options field: a program sets them in its environment.
  t.push_back(flag<&Config::test_shared_gpu>("CHORUS_TEST_SHARED_GPU", nullptr,
                                             "0 or 1 (tests only)", true));
  t.push_back(text<&Config::test_fail_collective>("CHORUS_TEST_FAIL_COLLECTIVE",
                                                  "a collective's name (tests only)", false));
  t.push_back(text<&Config::test_fail_part>("CHORUS_TEST_FAIL_PART",
                                            "a collective's name (tests only)", false));
  t.push_back(text<&Config::test_fail_at_commit>(
      "CHORUS_TEST_FAIL_AT_COMMIT", "HOST:NUMBER or HOST:NUMBER:hang (tests only)", true));
  t.push_back(
      text<&Config::test_fail_restore>("CHORUS_TEST_FAIL_RESTORE", "a host (tests only)", true));
  t.push_back({"CHORUS_LOG_LEVEL", "HOROVOD_LOG_LEVEL",
               "one of trace, debug, info, warn, error, critical, off", false,
               [](const std::string&, const std::string& raw, const char*, Config& c) -> Status {
                 c.log_level = raw;
                 return {};
               },
               [](const std::string&, const Options& o, Config& c) -> Status {
                 if (o.log_level) c.log_level = *o.log_level;
                 return {};
               },
               [](const Config& c) { return valid_log_level(c.log_level); },
               [](const Config& c) { return c.log_level; }, horovod_log_level});
  return t;
}

// The HOROVOD_* variables that are no row's Horovod name. From horovod/common (common.h's
// names as operations.cc, utils/env_parser.cc, logging.cc, mpi/mpi_context.cc,
// parameter_manager.cc, ops/ccl_operations.cc and gloo/gloo_context.cc read them), horovod/torch
// and horovod/runner/elastic/worker.py (which horovod.torch.elastic imports), as of 0.28.1; then
// the build-time choices that look like run-time ones.
std::vector<HorovodVariable> make_horovod_variables() {
  const char* gloo =
      "Chorus's Gloo world waits for a rank at most CHORUS_LIVENESS_SECONDS, as its MPI world "
      "does";
  const char* gloo_launch =
      "set by horovodrun for a Gloo job; a Chorus job without MPI takes its ranks from "
      "torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), which chorusrun "
      "--gloo sets";
  const char* built =
      "chooses what a Horovod build compiles in, and a running Horovod job does not read it; "
      "Chorus chooses the GPU transport at run time: CHORUS_GPU_BACKEND";
  return {
      {"HOROVOD_STALL_CHECK_DISABLE",
       {{"CHORUS_STALL_CHECK_SECONDS", "0"}, {"CHORUS_STALL_SHUTDOWN_SECONDS", "0"}},
       "no stall inspection: neither warnings nor the stall shutdown, as in Horovod"},
      {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
       {},
       "Chorus's autotuner searches by coordinates or a grid (CHORUS_AUTOTUNE_SEARCH), not by a "
       "Gaussian process"},
      {"HOROVOD_HIERARCHICAL_ALLGATHER",
       {},
       "Chorus's allgather has no two-level form (CHORUS_HIERARCHICAL_ALLREDUCE is allreduce's)"},
      {"HOROVOD_TORUS_ALLREDUCE",
       {},
       "Chorus has no torus allreduce; its two-level allreduce is CHORUS_HIERARCHICAL_ALLREDUCE"},
      {"HOROVOD_ADASUM_MPI_CHUNK_SIZE",
       {},
       "Chorus's Adasum moves each batch in one alltoall and one allgather"},
      {"HOROVOD_BATCH_D2D_MEMCOPIES",
       {},
       "Chorus always packs and unpacks GPU fusion buffers with its batched copy kernel"},
      {"HOROVOD_NUM_NCCL_STREAMS",
       {},
       "Chorus runs each process set's GPU collectives on one stream of its own"},
      {"HOROVOD_ENABLE_ASYNC_COMPLETION",
       {},
       "Chorus always keeps GPU batches in flight without a host wait, and completes each "
       "handle when its device work has finished"},
      {"HOROVOD_DISABLE_NVTX_RANGES",
       {},
       "Chorus marks no NVTX ranges (its trace of collectives is CHORUS_TIMELINE)"},
      {"HOROVOD_DISABLE_GROUP_FUSION",
       {},
       "fusion never changes a result in Chorus, and a group's allreduces fuse by the same rule "
       "as any other (CHORUS_FUSION_THRESHOLD=0 turns fusion off)"},
      {"HOROVOD_ENABLE_XLA_OPS", {}, "TensorFlow's XLA ops; PyTorch has none"},
      {"HOROVOD_CPU_OPERATIONS",
       {},
       "Chorus's host-memory collectives run over the job's world, MPI or Gloo "
       "(CHORUS_CONTROLLER), and shared memory within a host"},
      {"HOROVOD_CCL_CACHE", {}, "Chorus does not use oneCCL"},
      {"HOROVOD_MPI_THREADS_DISABLE",
       {},
       "Chorus never asks MPI for MPI_THREAD_MULTIPLE, which is what this avoids in Horovod: it "
       "initializes MPI with MPI_THREAD_FUNNELED"},
      {"HOROVOD_THREAD_AFFINITY",
       {},
       "Chorus binds with CHORUS_BIND (core or numa: each rank and its background thread on CPUs "
       "of their own), not to a list of cores"},
      {"HOROVOD_DYNAMIC_PROCESS_SETS",
       {},
       "Chorus lets every job add and remove process sets after init()"},
      {"HOROVOD_ELASTIC",
       {},
       "set by horovodrun's elastic mode; a Chorus elastic job is chorusrun's "
       "(--max-restarts, docs/elastic.md), which sets CHORUS_ELASTIC_JOB"},
      {"HOROVOD_LOG_HIDE_TIME", {}, "Chorus's log lines carry no time"},
      {"HOROVOD_GLOO_TIMEOUT_SECONDS", {}, gloo},
      {"HOROVOD_GLOO_RENDEZVOUS_ADDR", {}, gloo_launch},
      {"HOROVOD_GLOO_RENDEZVOUS_PORT", {}, gloo_launch},
      {"HOROVOD_HOSTNAME", {}, gloo_launch},
      {"HOROVOD_RANK", {}, gloo_launch},
      {"HOROVOD_SIZE", {}, gloo_launch},
      {"HOROVOD_LOCAL_RANK", {}, gloo_launch},
      {"HOROVOD_LOCAL_SIZE", {}, gloo_launch},
      {"HOROVOD_CROSS_RANK", {}, gloo_launch},
      {"HOROVOD_CROSS_SIZE", {}, gloo_launch},
      {"HOROVOD_GPU_OPERATIONS", {}, built},
      {"HOROVOD_GPU_ALLREDUCE", {}, built},
      {"HOROVOD_GPU_ALLGATHER", {}, built},
      {"HOROVOD_GPU_BROADCAST", {}, built},
      {"HOROVOD_GPU_ALLTOALL", {}, built},
      {"HOROVOD_GPU_REDUCESCATTER", {}, built},
  };
}

// What the variables of horovod_variables() that `env` sets say: the settings they stand for
// ({CHORUS_X: {HOROVOD_Y, value}}, where CHORUS_X itself is unset), and one note per variable.
using HorovodReadings = std::map<std::string, std::pair<std::string, std::string>>;
HorovodReadings read_horovod_variables(const Config::Getenv& env, std::vector<std::string>* notes) {
  HorovodReadings readings;
  for (const HorovodVariable& h : Config::horovod_variables()) {
    const char* raw = env(h.variable);
    if (raw == nullptr || *raw == '\0') continue;  // empty is unset, as for the settings
    const std::string set = std::string(h.variable) + "=" + raw;
    if (h.sets.empty()) {
      notes->push_back(set + " has no effect in Chorus: " + h.why);
      continue;
    }
    if (horovod_integer(raw) <= 0) {
      notes->push_back(set + " has no effect: Horovod reads it as off (on is an integer > 0)");
      continue;
    }
    std::string read_as;
    for (const auto& [variable, value] : h.sets) {
      if (const char* own = env(variable); own != nullptr && *own != '\0') continue;
      readings[variable] = {h.variable, value};
      read_as += std::string(read_as.empty() ? "" : " ") + variable + "=" + value;
    }
    notes->push_back(read_as.empty()
                         ? set + " has no effect: the CHORUS_* variables it stands for are set"
                         : set + ": read as " + read_as + ": " + h.why);
  }
  return readings;
}

}  // namespace

BuildFeatures BuildFeatures::current() {
  BuildFeatures f;
  f.nccl = nccl_compiled_version_code() != 0;
  return f;
}

const std::vector<SettingRow>& Config::table() {
  static const std::vector<SettingRow> rows = make_table();
  return rows;
}

const std::vector<HorovodVariable>& Config::horovod_variables() {
  static const std::vector<HorovodVariable> variables = make_horovod_variables();
  return variables;
}

StatusOr<Config> Config::load(const Options& options, const Getenv& env,
                              const BuildFeatures& build) {
  Config c;
  const HorovodReadings readings = read_horovod_variables(env, &c.horovod_notes);
  for (const SettingRow& row : table()) {
    // The variable, else what a Horovod variable says of it, else its Horovod name; empty is
    // unset. Options win over all.
    std::string name = row.variable;
    const char* raw = env(row.variable);
    std::string value = raw ? raw : "";
    if (const auto it = readings.find(row.variable); value.empty() && it != readings.end()) {
      std::tie(name, value) = it->second;
    } else if (value.empty() && row.horovod) {
      if (const char* h = env(row.horovod); h != nullptr && *h != '\0') {
        name = row.horovod;
        std::string why;
        value = row.from_horovod ? row.from_horovod(h, &why) : std::string(h);
        if (!why.empty()) {
          const std::string read_as = value.empty() ? std::string("unset (") + row.variable +
                                                          "'s default, " + row.show(Config()) + ")"
                                                    : std::string(row.variable) + "=" + value;
          c.horovod_notes.push_back(name + "=" + h + ": read as " + read_as + ": " + why);
        }
      }
    }
    if (!value.empty()) {
      if (Status s = row.parse(name, value, row.accepted, c); !s.ok()) return s;
      if (!row.valid(c)) return bad_value(name, value, row.accepted);
    }
    if (Status s = row.take(row.variable, options, c); !s.ok()) return s;
    if (!row.valid(c)) return bad_value(name, row.show(c), row.accepted);
  }
  c.rendezvous = options.rendezvous;
  if (c.gpu_backend == GpuBackendRequest::kNccl && !build.nccl) {
    // Checked here, not at the first GPU collective, so that the job stops at init().
    return invalid_argument(
        "CHORUS_GPU_BACKEND='nccl' cannot be honoured: this build of Chorus has no NCCL "
        "(configured with CHORUS_WITH_NCCL off, or NCCL was not found); expected auto or mpi, "
        "or rebuild Chorus with NCCL");
  }
  return c;
}

StatusOr<Config> Config::load(const Options& options) {
  return load(options, [](const char* name) { return std::getenv(name); });
}

std::string Config::describe() const {
  std::string out;
  for (const SettingRow& row : table()) {
    if (!out.empty()) out += ' ';
    out += std::string(row.variable) + "=" + row.show(*this);
  }
  return out;
}

Settings Config::agreed() const {
  Settings out;
  for (const SettingRow& row : table()) {
    // With the autotuner on, the cycle time is where every rank's search starts
    // (core/tuning_search.h), and the ranks' searches must be one.
    const bool tuned = autotune && std::string_view(row.variable) == "CHORUS_CYCLE_TIME";
    if (row.agreed || tuned) out.emplace_back(row.variable, row.show(*this));
  }
  return out;
}

}  // namespace chorus
