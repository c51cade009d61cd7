// Unit tests of Config::load (src/core/config.h): defaults, every CHORUS_* variable and its
// Horovod name, Options over the environment, docs/configuration.md's table against the settings
// table, and chorus::build_info() against the configuration. The errors for bad values are
// config_errors_test.cc. The environment is an injected map (config_env.h), so nothing here
// reads or changes the process environment.
#include "core/config.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "chorus/chorus.h"
#include "unit/config_env.h"

namespace chorus {
namespace {

TEST(ConfigTest, DefaultsWithEmptyEnvironment) {
  StatusOr<Config> c = load_env({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->fusion_threshold_bytes, std::nullopt);  // automatic: by the set's layout
  EXPECT_EQ(c->fusion_threshold_for(false), 512 << 10);
  EXPECT_EQ(c->fusion_threshold_for(true), 4 << 20);
  EXPECT_EQ(c->cycle_time_ms, 5.0);
  EXPECT_EQ(c->cache_capacity, 1024);
  EXPECT_EQ(c->timeline_path, "");
  EXPECT_EQ(c->timeline_max_mb, 64);
  EXPECT_EQ(c->stall_check_seconds, 60.0);
  EXPECT_EQ(c->stall_shutdown_seconds, 600.0);
  EXPECT_EQ(c->hierarchical_allreduce, std::nullopt);  // automatic
  EXPECT_EQ(c->log_level, "warn");
}

TEST(ConfigTest, UnrelatedVariablesAreIgnored) {
  StatusOr<Config> c = load_env({{"HOROVOD_GPU_OPERATIONS", "NCCL"}, {"CHORUS_UNKNOWN", "x"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->fusion_threshold_bytes, std::nullopt);
}

// Job scripts written for Horovod keep their tuning: a HOROVOD_* variable is read where the
// CHORUS_* one is unset or empty, through the same parsers and ranges.
TEST(ConfigTest, HorovodNamesAreReadWhereChorusOnesAreUnset) {
  StatusOr<Config> c = load_env({{"HOROVOD_FUSION_THRESHOLD", "1"},
                                 {"HOROVOD_STALL_CHECK_TIME_SECONDS", "5"},
                                 {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "7"},
                                 {"HOROVOD_HIERARCHICAL_ALLREDUCE", "0"},
                                 {"HOROVOD_LOG_LEVEL", "ERROR"},
                                 {"HOROVOD_TIMELINE", "/tmp/h.json"},
                                 {"HOROVOD_CACHE_CAPACITY", "8"},
                                 {"CHORUS_CYCLE_TIME", ""},
                                 {"HOROVOD_CYCLE_TIME", "2.5"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->fusion_threshold_bytes, 1);
  EXPECT_EQ(c->stall_check_seconds, 5);
  EXPECT_EQ(c->stall_shutdown_seconds, 7);
  EXPECT_EQ(c->hierarchical_allreduce, std::optional<bool>(false));
  EXPECT_EQ(c->log_level, "error");
  EXPECT_EQ(c->timeline_path, "/tmp/h.json");
  EXPECT_EQ(c->cache_capacity, 8);
  EXPECT_EQ(c->cycle_time_ms, 2.5);

  c = load_env({{"HOROVOD_FUSION_THRESHOLD", "1"}, {"CHORUS_FUSION_THRESHOLD", "2"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->fusion_threshold_bytes, 2) << "the CHORUS_* variable wins";

  // Horovod's names for two log levels, and its "no file until start_timeline()".
  c = load_env({{"HOROVOD_LOG_LEVEL", "warning"}, {"HOROVOD_TIMELINE", "DYNAMIC"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->log_level, "warn");
  EXPECT_EQ(c->timeline_path, "");
  c = load_env({{"HOROVOD_LOG_LEVEL", "FATAL"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->log_level, "critical");
}

TEST(ConfigTest, BadHorovodValuesFailNamingTheHorovodVariable) {
  expect_invalid(load_env({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "sometimes"}}),
                 "HOROVOD_HIERARCHICAL_ALLREDUCE", "sometimes");
  expect_invalid(load_env({{"HOROVOD_FUSION_THRESHOLD", "-1"}}), "HOROVOD_FUSION_THRESHOLD", "-1");
  expect_invalid(load_env({{"HOROVOD_LOG_LEVEL", "chatty"}}), "HOROVOD_LOG_LEVEL", "chatty");
}

// docs/configuration.md's table of variables is the table Config reads: the same variables in the
// same order, each with its Horovod name, its default as describe() writes it, and *agreed* exactly
// where init() compares the setting across ranks. "auto" is a value of its own: it reads as unset,
// a number set to the one-host default is not the same setting (init() compares them across ranks
// as written), and each set takes the default of its layout.
TEST(ConfigTest, FusionThresholdAutoIsItsOwnValue) {
  StatusOr<Config> a = load_env({{"CHORUS_FUSION_THRESHOLD", "auto"}});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->fusion_threshold_bytes, std::nullopt);
  StatusOr<Config> n = load_env({{"CHORUS_FUSION_THRESHOLD", "524288"}});
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(n->fusion_threshold_for(true), 524288) << "a set number holds across hosts too";
  EXPECT_NE(a->agreed(), n->agreed());
  EXPECT_NE(a->describe().find("CHORUS_FUSION_THRESHOLD=auto"), std::string::npos) << a->describe();
  expect_invalid(load_env({{"CHORUS_FUSION_THRESHOLD", "automatic"}}), "CHORUS_FUSION_THRESHOLD",
                 "automatic");
}

TEST(ConfigTest, DocumentedTableIsTheSettingsTable) {
  const std::vector<std::vector<std::string>> rows =
      table_rows(CHORUS_TEST_SOURCE_DIR "/docs/configuration.md", "| `CHORUS_");
  const Config defaults;
  const std::vector<SettingRow>& table = Config::table();
  ASSERT_EQ(rows.size(), table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const SettingRow& want = table[i];
    ASSERT_GE(rows[i].size(), 4u) << want.variable;
    EXPECT_EQ(rows[i][0], "`" + std::string(want.variable) + "`");
    EXPECT_EQ(rows[i][1], want.horovod ? "`" + std::string(want.horovod) + "`" : "")
        << want.variable;
    const std::string shown = want.show(defaults);
    EXPECT_EQ(rows[i][2], shown.empty() ? "(off)" : shown) << want.variable;
    EXPECT_EQ(rows[i][3].rfind("*agreed*", 0) == 0, want.agreed) << want.variable;
  }
}

TEST(ConfigTest, EmptyValuesKeepDefaults) {
  StatusOr<Config> c = load_env({{"CHORUS_FUSION_THRESHOLD", ""},
                                 {"CHORUS_CYCLE_TIME", ""},
                                 {"CHORUS_CACHE_CAPACITY", ""},
                                 {"CHORUS_STALL_CHECK_SECONDS", ""},
                                 {"CHORUS_STALL_SHUTDOWN_SECONDS", ""},
                                 {"CHORUS_HIERARCHICAL_ALLREDUCE", ""},
                                 {"CHORUS_LOG_LEVEL", ""}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->fusion_threshold_bytes, std::nullopt);
  EXPECT_EQ(c->cycle_time_ms, 5.0);
  EXPECT_EQ(c->cache_capacity, 1024);
  EXPECT_EQ(c->stall_check_seconds, 60.0);
  EXPECT_EQ(c->stall_shutdown_seconds, 600.0);
  EXPECT_EQ(c->hierarchical_allreduce, std::nullopt);  // automatic
  EXPECT_EQ(c->log_level, "warn");
}

TEST(ConfigTest, EveryVariableIsParsed) {
  StatusOr<Config> c = load_env({{"CHORUS_FUSION_THRESHOLD", "12345"},
                                 {"CHORUS_CYCLE_TIME", "2.5"},
                                 {"CHORUS_CACHE_CAPACITY", "17"},
                                 {"CHORUS_TIMELINE", "/tmp/trace.json"},
                                 {"CHORUS_TIMELINE_MAX_MB", "3"},
                                 {"CHORUS_STALL_CHECK_SECONDS", "7.25"},
                                 {"CHORUS_STALL_SHUTDOWN_SECONDS", "30"},
                                 {"CHORUS_HIERARCHICAL_ALLREDUCE", "1"},
                                 {"CHORUS_LOG_LEVEL", "debug"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->fusion_threshold_bytes, 12345);
  EXPECT_EQ(c->cycle_time_ms, 2.5);
  EXPECT_EQ(c->cache_capacity, 17);
  EXPECT_EQ(c->timeline_path, "/tmp/trace.json");
  EXPECT_EQ(c->timeline_max_mb, 3);
  EXPECT_EQ(c->stall_check_seconds, 7.25);
  EXPECT_EQ(c->stall_shutdown_seconds, 30.0);
  EXPECT_EQ(c->hierarchical_allreduce, true);
  EXPECT_EQ(c->log_level, "debug");
}

TEST(ConfigTest, ZeroTurnsFeaturesOff) {
  StatusOr<Config> c = load_env({{"CHORUS_FUSION_THRESHOLD", "0"},
                                 {"CHORUS_CACHE_CAPACITY", "0"},
                                 {"CHORUS_STALL_CHECK_SECONDS", "0"},
                                 {"CHORUS_STALL_SHUTDOWN_SECONDS", "0"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->fusion_threshold_bytes, 0);
  EXPECT_EQ(c->cache_capacity, 0);
  EXPECT_EQ(c->stall_check_seconds, 0.0);
  EXPECT_EQ(c->stall_shutdown_seconds, 0.0);
}

TEST(ConfigTest, FusionThresholdUpToFourGiB) {
  StatusOr<Config> c = load_env({{"CHORUS_FUSION_THRESHOLD", "4294967296"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->fusion_threshold_bytes, int64_t{4} << 30);
}

// A threshold no allocation could honour fails at init, with the range, instead of in the
// first fused batch.
TEST(ConfigTest, FusionThresholdBeyondFourGiBFailsWithTheRange) {
  for (const char* v : {"4294967297", "1000000000000000"}) {
    StatusOr<Config> c = load_env({{"CHORUS_FUSION_THRESHOLD", v}});
    expect_invalid(c, "CHORUS_FUSION_THRESHOLD", v);
    EXPECT_NE(c.status().message().find("between 0 and 4294967296"), std::string::npos)
        << c.status().message();
  }
  Options o;
  o.fusion_threshold_bytes = int64_t{1} << 40;
  expect_invalid(load_env({}, o), "CHORUS_FUSION_THRESHOLD", "1099511627776");
}

// The bound of every GPU wait: positive (no wait may be unbounded), agreed across ranks.
TEST(ConfigTest, GpuTimeoutSeconds) {
  StatusOr<Config> c = load_env({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->gpu_timeout_seconds, 300.0);
  c = load_env({{"CHORUS_GPU_TIMEOUT_SECONDS", "2.5"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->gpu_timeout_seconds, 2.5);
  bool agreed = false;
  for (const auto& [name, value] : c->agreed()) {
    agreed = agreed || (name == "CHORUS_GPU_TIMEOUT_SECONDS" && value == "2.5");
  }
  EXPECT_TRUE(agreed) << "the GPU timeout must be the same on every rank";
  expect_invalid(load_env({{"CHORUS_GPU_TIMEOUT_SECONDS", "0"}}), "CHORUS_GPU_TIMEOUT_SECONDS",
                 "0");
  Options o;
  o.gpu_timeout_seconds = 1e9;
  expect_invalid(load_env({}, o), "CHORUS_GPU_TIMEOUT_SECONDS", "1000000000");
}

// The test-only settings: the shared-GPU NCCL mode (agreed: a rank on NCCL and one on MPI
// could never meet) and the injected backend failure (this rank's own).
TEST(ConfigTest, TestOnlySettings) {
  StatusOr<Config> c = load_env({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->test_shared_gpu);
  EXPECT_EQ(c->test_fail_collective, "");
  c = load_env({{"CHORUS_TEST_SHARED_GPU", "1"}, {"CHORUS_TEST_FAIL_COLLECTIVE", "grad.w"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->test_shared_gpu);
  EXPECT_EQ(c->test_fail_collective, "grad.w");
  bool shared_agreed = false, fail_agreed = false;
  for (const auto& [name, value] : c->agreed()) {
    shared_agreed = shared_agreed || name == "CHORUS_TEST_SHARED_GPU";
    fail_agreed = fail_agreed || name == "CHORUS_TEST_FAIL_COLLECTIVE";
  }
  EXPECT_TRUE(shared_agreed);
  EXPECT_FALSE(fail_agreed);
  expect_invalid(load_env({{"CHORUS_TEST_SHARED_GPU", "yes"}}), "CHORUS_TEST_SHARED_GPU", "yes");
}

// Shared-memory reductions: on by default, off by the variable or Options (which wins), and
// agreed: a member that joined the segment would wait there for one that did not.
TEST(ConfigTest, SharedMemory) {
  StatusOr<Config> c = load_env({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->shared_memory);
  c = load_env({{"CHORUS_SHARED_MEMORY", "0"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->shared_memory);
  bool agreed = false;
  for (const auto& [name, value] : c->agreed()) {
    agreed = agreed || (name == "CHORUS_SHARED_MEMORY" && value == "0");
  }
  EXPECT_TRUE(agreed);
  Options o;
  o.shared_memory = true;
  c = load_env({{"CHORUS_SHARED_MEMORY", "0"}}, o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->shared_memory);
}

TEST(ConfigTest, LivenessSeconds) {
  StatusOr<Config> c = load_env({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->liveness_seconds, 60.0);
  c = load_env({{"CHORUS_LIVENESS_SECONDS", "2.5"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->liveness_seconds, 2.5);
  Options o;
  o.liveness_seconds = 0;
  c = load_env({{"CHORUS_LIVENESS_SECONDS", "2.5"}}, o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->liveness_seconds, 0.0);
  o.liveness_seconds = 1e9;
  expect_invalid(load_env({}, o), "CHORUS_LIVENESS_SECONDS", "1000000000");
}

// The settings init() compares across ranks, and only those.
TEST(ConfigTest, AgreedSettingsAreThoseRanksShare) {
  StatusOr<Config> c = load_env({{"CHORUS_FUSION_THRESHOLD", "4096"},
                                 {"CHORUS_CACHE_CAPACITY", "33"},
                                 {"CHORUS_STALL_CHECK_SECONDS", "0.1"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const Settings list = c->agreed();
  std::map<std::string, std::string> agreed(list.begin(), list.end());
  EXPECT_EQ(agreed["CHORUS_FUSION_THRESHOLD"], "4096");
  EXPECT_EQ(agreed["CHORUS_CACHE_CAPACITY"], "33");
  EXPECT_EQ(agreed["CHORUS_HIERARCHICAL_ALLREDUCE"], "auto");
  EXPECT_EQ(agreed["CHORUS_GPU_BACKEND"], "auto");
  EXPECT_EQ(agreed["CHORUS_STALL_CHECK_SECONDS"], "0.10000000000000001");
  EXPECT_EQ(agreed["CHORUS_LIVENESS_SECONDS"], "60");
  for (const char* own :
       {"CHORUS_CYCLE_TIME", "CHORUS_TIMELINE", "CHORUS_LOG_LEVEL", "CHORUS_BIND"})
    EXPECT_EQ(agreed.count(own), 0u) << own;
}

// With the autotuner on, the cycle time is where every rank's search starts: a rank with
// another one would walk other settings, so it is compared too.
TEST(ConfigTest, TheCycleTimeIsAgreedWhereTheAutotunerIsOn) {
  StatusOr<Config> c = load_env({{"CHORUS_AUTOTUNE", "1"}, {"CHORUS_CYCLE_TIME", "0.1"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const Settings list = c->agreed();
  std::map<std::string, std::string> agreed(list.begin(), list.end());
  EXPECT_EQ(agreed["CHORUS_AUTOTUNE"], "1");
  EXPECT_EQ(agreed["CHORUS_CYCLE_TIME"], "0.10000000000000001");
  EXPECT_EQ(agreed["CHORUS_AUTOTUNE_SEARCH"], "coordinate");
  EXPECT_EQ(agreed.count("CHORUS_AUTOTUNE_LOG"), 0u) << "each rank's own file";
}

TEST(ConfigTest, CacheCapacityUpperBoundIsAccepted) {
  StatusOr<Config> c = load_env({{"CHORUS_CACHE_CAPACITY", "1048576"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->cache_capacity, 1048576);
}

TEST(ConfigTest, HierarchicalAllreduceIsTriState) {
  for (const char* yes : {"1", "true", "on"}) {
    StatusOr<Config> c = load_env({{"CHORUS_HIERARCHICAL_ALLREDUCE", yes}});
    ASSERT_TRUE(c.ok()) << yes << ": " << c.status().to_string();
    EXPECT_EQ(c->hierarchical_allreduce, true) << yes;
  }
  // 0 is a decision of its own (off), not the automatic choice.
  for (const char* no : {"0", "false", "off"}) {
    StatusOr<Config> c = load_env({{"CHORUS_HIERARCHICAL_ALLREDUCE", no}});
    ASSERT_TRUE(c.ok()) << no << ": " << c.status().to_string();
    EXPECT_EQ(c->hierarchical_allreduce, false) << no;
  }
  for (const char* automatic : {"auto", ""}) {
    StatusOr<Config> c = load_env({{"CHORUS_HIERARCHICAL_ALLREDUCE", automatic}});
    ASSERT_TRUE(c.ok()) << automatic << ": " << c.status().to_string();
    EXPECT_EQ(c->hierarchical_allreduce, std::nullopt) << "'" << automatic << "'";
  }
}

TEST(ConfigTest, HierarchicalAllreduceOptionsForceEitherWay) {
  Options o;
  o.hierarchical_allreduce = false;
  StatusOr<Config> c = load_env({}, o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->hierarchical_allreduce, false);
  // An unset option leaves the variable's choice, automatic included.
  c = load_env({{"CHORUS_HIERARCHICAL_ALLREDUCE", "0"}}, Options{});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->hierarchical_allreduce, false);
  o.hierarchical_allreduce = true;
  c = load_env({{"CHORUS_HIERARCHICAL_ALLREDUCE", "0"}}, o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->hierarchical_allreduce, true);
}

TEST(ConfigTest, DescribeEchoesTheHierarchicalSetting) {
  Config c;
  EXPECT_NE(c.describe().find("CHORUS_HIERARCHICAL_ALLREDUCE=auto"), std::string::npos)
      << c.describe();
  c.hierarchical_allreduce = false;
  EXPECT_NE(c.describe().find("CHORUS_HIERARCHICAL_ALLREDUCE=0"), std::string::npos);
  c.hierarchical_allreduce = true;
  EXPECT_NE(c.describe().find("CHORUS_HIERARCHICAL_ALLREDUCE=1"), std::string::npos);
}

// Config::load for a build with and without NCCL, whatever this build has.
StatusOr<Config> load_built(std::map<std::string, std::string> vars, bool nccl,
                            const Options& o = {}) {
  FakeEnv env(std::move(vars));
  BuildFeatures build;
  build.nccl = nccl;
  return Config::load(o, env.fn(), build);
}

TEST(ConfigTest, GpuBackendFromEnvironmentAndOptions) {
  EXPECT_EQ(load_built({}, true)->gpu_backend, GpuBackendRequest::kAuto);
  EXPECT_EQ(load_built({{"CHORUS_GPU_BACKEND", ""}}, true)->gpu_backend, GpuBackendRequest::kAuto);
  EXPECT_EQ(load_built({{"CHORUS_GPU_BACKEND", "auto"}}, true)->gpu_backend,
            GpuBackendRequest::kAuto);
  EXPECT_EQ(load_built({{"CHORUS_GPU_BACKEND", "nccl"}}, true)->gpu_backend,
            GpuBackendRequest::kNccl);
  for (bool nccl : {false, true}) {
    StatusOr<Config> c = load_built({{"CHORUS_GPU_BACKEND", "mpi"}}, nccl);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->gpu_backend, GpuBackendRequest::kMpi);
  }
  Options o;
  o.gpu_backend = "mpi";
  StatusOr<Config> c = load_built({{"CHORUS_GPU_BACKEND", "nccl"}}, true, o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->gpu_backend, GpuBackendRequest::kMpi);
  o.gpu_backend = "bogus";
  expect_invalid(load_built({}, true, o), "CHORUS_GPU_BACKEND", "bogus");
}

TEST(ConfigTest, ForcingNcclWithoutNcclInTheBuildFails) {
  StatusOr<Config> c = load_built({{"CHORUS_GPU_BACKEND", "nccl"}}, false);
  expect_invalid(c, "CHORUS_GPU_BACKEND", "nccl");
  EXPECT_NE(c.status().message().find("no NCCL"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("auto or mpi"), std::string::npos) << c.status().message();
  Options o;
  o.gpu_backend = "nccl";
  expect_invalid(load_built({}, false, o), "CHORUS_GPU_BACKEND", "nccl");
  // An Options value that does not force NCCL lets the same environment load.
  o.gpu_backend = "auto";
  EXPECT_TRUE(load_built({{"CHORUS_GPU_BACKEND", "nccl"}}, false, o).ok());
}

TEST(ConfigTest, ThisBuildsNcclDecidesWhetherNcclCanBeForced) {
  StatusOr<Config> c = load_env({{"CHORUS_GPU_BACKEND", "nccl"}});
  EXPECT_EQ(c.ok(), BuildFeatures::current().nccl) << c.status().to_string();
}

TEST(ConfigTest, DescribeEchoesTheGpuBackend) {
  Config c;
  EXPECT_NE(c.describe().find("CHORUS_GPU_BACKEND=auto"), std::string::npos) << c.describe();
  c.gpu_backend = GpuBackendRequest::kMpi;
  EXPECT_NE(c.describe().find("CHORUS_GPU_BACKEND=mpi"), std::string::npos) << c.describe();
}

TEST(ConfigTest, EveryLogLevelIsAccepted) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    StatusOr<Config> c = load_env({{"CHORUS_LOG_LEVEL", level}});
    ASSERT_TRUE(c.ok()) << level << ": " << c.status().to_string();
    EXPECT_EQ(c->log_level, level);
  }
}

TEST(ConfigTest, OptionsOverrideEnvironment) {
  Options o;
  o.fusion_threshold_bytes = 64;
  o.cycle_time_ms = 3.5;
  o.cache_capacity = 5;
  o.timeline_path = "/from/options";
  o.stall_check_seconds = 11;
  o.stall_shutdown_seconds = 22;
  o.hierarchical_allreduce = false;
  o.log_level = "error";
  StatusOr<Config> c = load_env({{"CHORUS_FUSION_THRESHOLD", "12345"},
                                 {"CHORUS_CYCLE_TIME", "2.5"},
                                 {"CHORUS_CACHE_CAPACITY", "17"},
                                 {"CHORUS_TIMELINE", "/from/env"},
                                 {"CHORUS_STALL_CHECK_SECONDS", "7"},
                                 {"CHORUS_STALL_SHUTDOWN_SECONDS", "30"},
                                 {"CHORUS_HIERARCHICAL_ALLREDUCE", "1"},
                                 {"CHORUS_LOG_LEVEL", "debug"}},
                                o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->fusion_threshold_bytes, 64);
  EXPECT_EQ(c->cycle_time_ms, 3.5);
  EXPECT_EQ(c->cache_capacity, 5);
  EXPECT_EQ(c->timeline_path, "/from/options");
  EXPECT_EQ(c->stall_check_seconds, 11.0);
  EXPECT_EQ(c->stall_shutdown_seconds, 22.0);
  EXPECT_EQ(c->hierarchical_allreduce, false);
  EXPECT_EQ(c->log_level, "error");
}

TEST(ConfigTest, UnsetOptionsFallBackToEnvironment) {
  Options o;
  o.cache_capacity = 5;  // only this one is set in code
  StatusOr<Config> c =
      load_env({{"CHORUS_FUSION_THRESHOLD", "999"}, {"CHORUS_CACHE_CAPACITY", "17"}}, o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->cache_capacity, 5);
  EXPECT_EQ(c->fusion_threshold_bytes, 999);
  EXPECT_EQ(c->cycle_time_ms, 5.0);
}

TEST(ConfigTest, OptionsAloneWithoutEnvironment) {
  Options o;
  o.hierarchical_allreduce = true;
  o.stall_check_seconds = 0;
  StatusOr<Config> c = load_env({}, o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->hierarchical_allreduce, true);
  EXPECT_EQ(c->stall_check_seconds, 0.0);
}

TEST(ConfigTest, BindFromEnvironmentAndOptions) {
  StatusOr<Config> c = load_env({{"CHORUS_BIND", "numa"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->bind, BindMode::kNuma);
  Options o;
  o.bind = "core";
  c = Config::load(
      o, [](const char* v) { return std::string(v) == "CHORUS_BIND" ? "numa" : nullptr; });
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->bind, BindMode::kCore);
  o.bind = "everywhere";
  c = Config::load(o, [](const char*) -> const char* { return nullptr; });
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("CHORUS_BIND='everywhere'"), std::string::npos);
}

TEST(ConfigTest, DescribeNamesEverySetting) {
  StatusOr<Config> c = load_env({{"CHORUS_FUSION_THRESHOLD", "4096"},
                                 {"CHORUS_CACHE_CAPACITY", "33"},
                                 {"CHORUS_TIMELINE", "/tmp/t.json"},
                                 {"CHORUS_HIERARCHICAL_ALLREDUCE", "on"},
                                 {"CHORUS_LOG_LEVEL", "info"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const std::string d = c->describe();
  for (const char* want :
       {"CHORUS_FUSION_THRESHOLD=4096", "CHORUS_CYCLE_TIME=5", "CHORUS_CACHE_CAPACITY=33",
        "CHORUS_TIMELINE=/tmp/t.json", "CHORUS_STALL_CHECK_SECONDS=60",
        "CHORUS_STALL_SHUTDOWN_SECONDS=600", "CHORUS_LIVENESS_SECONDS=60",
        "CHORUS_GPU_TIMEOUT_SECONDS=300", "CHORUS_TEST_SHARED_GPU=0",
        "CHORUS_HIERARCHICAL_ALLREDUCE=1", "CHORUS_LOG_LEVEL=info", "CHORUS_BIND=none"}) {
    EXPECT_NE(d.find(want), std::string::npos) << "missing " << want << " in: " << d;
  }
}

// What the library reports it was built with is what CMake configured.
TEST(BuildInfoTest, MatchesTheConfiguration) {
  const BuildInfo b = build_info();
#ifdef CHORUS_TEST_WITH_CUDA
  EXPECT_TRUE(b.cuda);
#else
  EXPECT_FALSE(b.cuda);
#endif
#ifdef CHORUS_TEST_WITH_NCCL
  EXPECT_GE(b.nccl_version_code, 20000);  // NCCL 2.x encodes major*10000 + minor*100 + patch
  EXPECT_TRUE(BuildFeatures::current().nccl);
#else
  EXPECT_EQ(b.nccl_version_code, 0);
  EXPECT_FALSE(BuildFeatures::current().nccl);
#endif
}

}  // namespace
}  // namespace chorus
