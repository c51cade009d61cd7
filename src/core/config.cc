#include "core/config.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

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
// at most Max; doubles are written exactly and NaN fails the range.
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
            if (o.*Option) c.*Field = *(o.*Option);
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

// A word from a fixed set, read by the parser of the layer that owns its meaning, from the
// variable and from Options alike.
template <class T, T Config::*Field, std::optional<std::string> Options::*Option,
          StatusOr<T> (*Parse)(const std::string&, const std::string&), const char* (*Name)(T)>
SettingRow word(const char* var, const char* accepted, bool agreed) {
  struct Word {
    static Status set(const std::string& name, const std::string& raw, Config& c) {
      StatusOr<T> v = Parse(raw, name);
      if (!v.ok()) return v.status();
      c.*Field = *v;
      return {};
    }
  };
  return {var,
          nullptr,
          accepted,
          agreed,
          [](const std::string& name, const std::string& raw, const char*, Config& c) {
            return Word::set(name, raw, c);
          },
          [](const std::string& name, const Options& o, Config& c) -> Status {
            return o.*Option ? Word::set(name, *(o.*Option), c) : Status();
          },
          [](const Config&) { return true; },
          [](const Config& c) { return std::string(Name(c.*Field)); },
          nullptr};
}

// Horovod's log levels, any case, with its two names Chorus spells otherwise.
std::string horovod_log_level(const std::string& raw) {
  std::string v;
  for (char ch : raw) v += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (v == "warning") return "warn";
  if (v == "fatal") return "critical";
  return v;
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
  t.push_back(number<double, &Config::cycle_time_ms, &Options::cycle_time_ms, 10000, true>(
      "CHORUS_CYCLE_TIME", "HOROVOD_CYCLE_TIME", "milliseconds, > 0 and <= 10000", false));
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
               [](const std::string& raw) { return raw == "DYNAMIC" ? std::string() : raw; }});
  t.push_back(number<int64_t, &Config::timeline_max_mb, &Options::timeline_max_mb, 1 << 20, true>(
      "CHORUS_TIMELINE_MAX_MB", nullptr, "MiB, an integer between 1 and 1048576", false));
  t.push_back({"CHORUS_DEBUG_DIR", nullptr, "a directory", false,
               [](const std::string&, const std::string& raw, const char*, Config& c) -> Status {
                 c.debug_dir = raw;
                 return {};
               },
               [](const std::string&, const Options& o, Config& c) -> Status {
                 if (o.debug_dir) c.debug_dir = *o.debug_dir;
                 return {};
               },
               [](const Config&) { return true; }, [](const Config& c) { return c.debug_dir; },
               nullptr});
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
               nullptr});
  t.push_back(
      word<GpuBackendRequest, &Config::gpu_backend, &Options::gpu_backend, parse_gpu_backend,
           gpu_backend_name>("CHORUS_GPU_BACKEND", "auto, nccl or mpi", true));
  t.push_back(word<HostAlgorithm, &Config::host_algorithm, &Options::host_algorithm,
                   parse_host_algorithm, host_algorithm_name>(
      "CHORUS_HOST_ALGORITHM", "auto, gather, direct, doubling or halving", true));
  t.push_back(word<BindMode, &Config::bind, &Options::bind, parse_bind_mode, bind_mode_name>(
      "CHORUS_BIND", "none, core or numa", false));
  // The test-only settings have no Options field: a program sets them in its environment.
  t.push_back({"CHORUS_TEST_SHARED_GPU", nullptr, "0 or 1 (tests only)", true,
               [](const std::string& name, const std::string& v, const char* accepted,
                  Config& c) -> Status {
                 if (v != "0" && v != "1") return bad_value(name, v, accepted);
                 c.test_shared_gpu = v == "1";
                 return {};
               },
               [](const std::string&, const Options&, Config&) { return Status(); },
               [](const Config&) { return true; },
               [](const Config& c) { return std::string(c.test_shared_gpu ? "1" : "0"); },
               nullptr});
  t.push_back({"CHORUS_TEST_FAIL_COLLECTIVE", nullptr, "a collective's name (tests only)", false,
               [](const std::string&, const std::string& raw, const char*, Config& c) -> Status {
                 c.test_fail_collective = raw;
                 return {};
               },
               [](const std::string&, const Options&, Config&) { return Status(); },
               [](const Config&) { return true; },
               [](const Config& c) { return c.test_fail_collective; }, nullptr});
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

}  // namespace

BuildFeatures BuildFeatures::current() {
  BuildFeatures f;
#ifdef CHORUS_WITH_NCCL
  f.nccl = true;
#endif
  return f;
}

const std::vector<SettingRow>& Config::table() {
  static const std::vector<SettingRow> rows = make_table();
  return rows;
}

StatusOr<Config> Config::load(const Options& options, const Getenv& env,
                              const BuildFeatures& build) {
  Config c;
  for (const SettingRow& row : table()) {
    // The variable, else Horovod's name for it; empty is unset. Options win over both.
    std::string name = row.variable;
    const char* raw = env(row.variable);
    std::string value = raw ? raw : "";
    if (value.empty() && row.horovod) {
      if (const char* h = env(row.horovod); h != nullptr && *h != '\0') {
        name = row.horovod;
        value = row.from_horovod ? row.from_horovod(h) : std::string(h);
      }
    }
    if (!value.empty()) {
      if (Status s = row.parse(name, value, row.accepted, c); !s.ok()) return s;
      if (!row.valid(c)) return bad_value(name, value, row.accepted);
    }
    if (Status s = row.take(row.variable, options, c); !s.ok()) return s;
    if (!row.valid(c)) return bad_value(name, row.show(c), row.accepted);
  }
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
    if (row.agreed) out.emplace_back(row.variable, row.show(*this));
  }
  return out;
}

}  // namespace chorus
