#include "core/config.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace chorus {
namespace {

using Getenv = std::function<const char*(const char*)>;

Status bad_value(const char* var, const std::string& value, const char* accepted) {
  return invalid_argument(std::string(var) + "='" + value + "' is invalid: expected " + accepted);
}

// Each parser fills `out` from the variable when it is set and non-empty, and leaves the
// default alone otherwise.
Status parse_int(const Getenv& env, const char* var, int64_t min, int64_t* out) {
  const char* raw = env(var);
  if (raw == nullptr || *raw == '\0') return {};
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(raw, &end, 10);
  if (errno != 0 || *end != '\0' || v < min) {
    return bad_value(var, raw, min == 0 ? "an integer >= 0" : "an integer >= 1");
  }
  *out = v;
  return {};
}

Status parse_double(const Getenv& env, const char* var, double max, double* out) {
  const char* raw = env(var);
  if (raw == nullptr || *raw == '\0') return {};
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(raw, &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < 0 || v > max) {
    char accepted[64];
    std::snprintf(accepted, sizeof accepted, "a number between 0 and %g", max);
    return bad_value(var, raw, accepted);
  }
  *out = v;
  return {};
}

// A setting that is automatic unless forced: unset, empty or "auto" leaves `out` unset.
Status parse_tristate(const Getenv& env, const char* var, std::optional<bool>* out) {
  const char* raw = env(var);
  if (raw == nullptr || *raw == '\0') return {};
  std::string v = raw;
  if (v == "auto") {
    out->reset();
  } else if (v == "1" || v == "true" || v == "on") {
    *out = true;
  } else if (v == "0" || v == "false" || v == "off") {
    *out = false;
  } else {
    return bad_value(var, raw, "1 (on), 0 (off) or auto (also true/false, on/off; unset: auto)");
  }
  return {};
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

}  // namespace

BuildFeatures BuildFeatures::current() {
  BuildFeatures f;
#ifdef CHORUS_WITH_NCCL
  f.nccl = true;
#endif
  return f;
}

StatusOr<Config> Config::load(const Options& options, const Getenv& env,
                              const BuildFeatures& build) {
  Config c;
  // The environment first, then Options on top: a field set in code wins.
  Status s;
  if (!(s = parse_int(env, "CHORUS_FUSION_THRESHOLD", 0, &c.fusion_threshold_bytes)).ok()) return s;
  if (!(s = parse_double(env, "CHORUS_CYCLE_TIME", 10000, &c.cycle_time_ms)).ok()) return s;
  if (!(s = parse_int(env, "CHORUS_CACHE_CAPACITY", 0, &c.cache_capacity)).ok()) return s;
  if (!(s = parse_double(env, "CHORUS_STALL_CHECK_SECONDS", kMaxSeconds, &c.stall_check_seconds))
           .ok())
    return s;
  if (!(s = parse_double(env, "CHORUS_STALL_SHUTDOWN_SECONDS", kMaxSeconds,
                         &c.stall_shutdown_seconds))
           .ok()) {
    return s;
  }
  if (!(s = parse_double(env, "CHORUS_LIVENESS_SECONDS", kMaxSeconds, &c.liveness_seconds)).ok())
    return s;
  if (!(s = parse_tristate(env, "CHORUS_HIERARCHICAL_ALLREDUCE", &c.hierarchical_allreduce)).ok()) {
    return s;
  }
  if (const char* t = env("CHORUS_TIMELINE"); t != nullptr) c.timeline_path = t;
  if (const char* l = env("CHORUS_LOG_LEVEL"); l != nullptr && *l != '\0') c.log_level = l;

  if (options.fusion_threshold_bytes) c.fusion_threshold_bytes = *options.fusion_threshold_bytes;
  if (options.cycle_time_ms) c.cycle_time_ms = *options.cycle_time_ms;
  if (options.cache_capacity) c.cache_capacity = *options.cache_capacity;
  if (options.timeline_path) c.timeline_path = *options.timeline_path;
  if (options.stall_check_seconds) c.stall_check_seconds = *options.stall_check_seconds;
  if (options.stall_shutdown_seconds) c.stall_shutdown_seconds = *options.stall_shutdown_seconds;
  if (options.liveness_seconds) c.liveness_seconds = *options.liveness_seconds;
  if (options.hierarchical_allreduce) c.hierarchical_allreduce = *options.hierarchical_allreduce;
  if (options.log_level) c.log_level = *options.log_level;
  // An empty or unset CHORUS_BIND means none.
  std::string bind;
  if (const char* b = env("CHORUS_BIND"); b != nullptr) bind = b;
  if (options.bind) bind = *options.bind;
  StatusOr<BindMode> mode = parse_bind_mode(bind, "CHORUS_BIND");
  if (!mode.ok()) return mode.status();
  c.bind = *mode;
  std::string gpu_backend;
  if (const char* g = env("CHORUS_GPU_BACKEND"); g != nullptr) gpu_backend = g;
  if (options.gpu_backend) gpu_backend = *options.gpu_backend;
  StatusOr<GpuBackendRequest> request = parse_gpu_backend(gpu_backend, "CHORUS_GPU_BACKEND");
  if (!request.ok()) return request.status();
  c.gpu_backend = *request;
  if (c.gpu_backend == GpuBackendRequest::kNccl && !build.nccl) {
    // Checked here, not at the first GPU collective, so that the job stops at init().
    return invalid_argument(
        "CHORUS_GPU_BACKEND='nccl' cannot be honoured: this build of Chorus has no NCCL "
        "(configured with CHORUS_WITH_NCCL off, or NCCL was not found); expected auto or mpi, "
        "or rebuild Chorus with NCCL");
  }

  // Options bypass the parsers, so every range is checked on the merged values.
  if (c.fusion_threshold_bytes < 0 || c.fusion_threshold_bytes > kMaxFusionThreshold) {
    return bad_value("CHORUS_FUSION_THRESHOLD", std::to_string(c.fusion_threshold_bytes),
                     "bytes, an integer between 0 and 4294967296 (4 GiB)");
  }
  if (c.cache_capacity < 0 || c.cache_capacity > (1 << 20)) {
    return bad_value("CHORUS_CACHE_CAPACITY", std::to_string(c.cache_capacity),
                     "an integer between 0 and 1048576");
  }
  if (!(c.cycle_time_ms > 0) || c.cycle_time_ms > 10000) {
    return bad_value("CHORUS_CYCLE_TIME", std::to_string(c.cycle_time_ms),
                     "milliseconds, > 0 and <= 10000");
  }
  // Written so that NaN fails too.
  for (auto [var, v] : {std::pair{"CHORUS_STALL_CHECK_SECONDS", c.stall_check_seconds},
                        std::pair{"CHORUS_STALL_SHUTDOWN_SECONDS", c.stall_shutdown_seconds},
                        std::pair{"CHORUS_LIVENESS_SECONDS", c.liveness_seconds}}) {
    if (!(v >= 0 && v <= kMaxSeconds)) {
      return bad_value(var, std::to_string(v), "seconds, between 0 and 604800 (a week)");
    }
  }
  if (!valid_log_level(c.log_level)) {
    return bad_value("CHORUS_LOG_LEVEL", c.log_level,
                     "one of trace, debug, info, warn, error, critical, off");
  }
  return c;
}

StatusOr<Config> Config::load(const Options& options) {
  return load(options, [](const char* name) { return std::getenv(name); });
}

std::string Config::describe() const {
  std::ostringstream out;
  out << "CHORUS_FUSION_THRESHOLD=" << fusion_threshold_bytes
      << " CHORUS_CYCLE_TIME=" << cycle_time_ms << " CHORUS_CACHE_CAPACITY=" << cache_capacity
      << " CHORUS_TIMELINE=" << timeline_path
      << " CHORUS_STALL_CHECK_SECONDS=" << stall_check_seconds
      << " CHORUS_STALL_SHUTDOWN_SECONDS=" << stall_shutdown_seconds
      << " CHORUS_LIVENESS_SECONDS=" << liveness_seconds
      << " CHORUS_HIERARCHICAL_ALLREDUCE=" << tristate_name(hierarchical_allreduce)
      << " CHORUS_LOG_LEVEL=" << log_level << " CHORUS_BIND=" << bind_mode_name(bind)
      << " CHORUS_GPU_BACKEND=" << gpu_backend_name(gpu_backend);
  return out.str();
}

Settings Config::agreed() const {
  // Exact, so that values that differ in the last digit read differently.
  auto text = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  return {
      {"CHORUS_FUSION_THRESHOLD", std::to_string(fusion_threshold_bytes)},
      {"CHORUS_CACHE_CAPACITY", std::to_string(cache_capacity)},
      {"CHORUS_HIERARCHICAL_ALLREDUCE", tristate_name(hierarchical_allreduce)},
      {"CHORUS_GPU_BACKEND", gpu_backend_name(gpu_backend)},
      {"CHORUS_STALL_CHECK_SECONDS", text(stall_check_seconds)},
      {"CHORUS_STALL_SHUTDOWN_SECONDS", text(stall_shutdown_seconds)},
      {"CHORUS_LIVENESS_SECONDS", text(liveness_seconds)},
  };
}

}  // namespace chorus
