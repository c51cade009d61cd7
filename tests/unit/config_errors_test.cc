// Config::load's errors (src/core/config.h): every kind of bad value, from the environment
// and from Options, fails with kInvalidArgument naming the variable and the value, and the
// accepted form; the range checks are the same for both. The environment is injected
// (config_env.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/config.h"
#include "unit/config_env.h"

namespace chorus {
namespace {

// --- bad values from the environment ---------------------------------------------------

struct BadValue {
  const char* var;
  const char* value;
};

class ConfigBadEnvTest : public ::testing::TestWithParam<BadValue> {};

TEST_P(ConfigBadEnvTest, FailsNamingVariableAndValue) {
  const BadValue& b = GetParam();
  expect_invalid(load_env({{b.var, b.value}}), b.var, b.value);
}

INSTANTIATE_TEST_SUITE_P(
    Integers, ConfigBadEnvTest,
    ::testing::Values(
        BadValue{"CHORUS_FUSION_THRESHOLD", "lots"}, BadValue{"CHORUS_FUSION_THRESHOLD", "-1"},
        BadValue{"CHORUS_FUSION_THRESHOLD", "64k"}, BadValue{"CHORUS_FUSION_THRESHOLD", "1.5"},
        BadValue{"CHORUS_FUSION_THRESHOLD", "0x10"},
        BadValue{"CHORUS_FUSION_THRESHOLD", "99999999999999999999999"},
        BadValue{"CHORUS_CACHE_CAPACITY", "many"}, BadValue{"CHORUS_CACHE_CAPACITY", "-5"},
        BadValue{"CHORUS_CACHE_CAPACITY", "10 "}, BadValue{"CHORUS_CACHE_CAPACITY", "1048577"},
        BadValue{"CHORUS_CACHE_CAPACITY", "2000000"}, BadValue{"CHORUS_TIMELINE_MAX_MB", "0"},
        BadValue{"CHORUS_TIMELINE_MAX_MB", "-1"}, BadValue{"CHORUS_TIMELINE_MAX_MB", "1G"},
        BadValue{"CHORUS_TIMELINE_MAX_MB", "1048577"}));

INSTANTIATE_TEST_SUITE_P(
    Numbers, ConfigBadEnvTest,
    ::testing::Values(
        BadValue{"CHORUS_CYCLE_TIME", "fast"}, BadValue{"CHORUS_CYCLE_TIME", "-2"},
        BadValue{"CHORUS_CYCLE_TIME", "5ms"}, BadValue{"CHORUS_CYCLE_TIME", "0"},
        BadValue{"CHORUS_CYCLE_TIME", "nan"}, BadValue{"CHORUS_CYCLE_TIME", "inf"},
        BadValue{"CHORUS_CYCLE_TIME", "20000"}, BadValue{"CHORUS_STALL_CHECK_SECONDS", "soon"},
        BadValue{"CHORUS_STALL_CHECK_SECONDS", "-1"}, BadValue{"CHORUS_STALL_CHECK_SECONDS", "60s"},
        BadValue{"CHORUS_STALL_CHECK_SECONDS", "inf"},
        BadValue{"CHORUS_STALL_SHUTDOWN_SECONDS", "never"},
        BadValue{"CHORUS_STALL_SHUTDOWN_SECONDS", "-3"},
        BadValue{"CHORUS_STALL_SHUTDOWN_SECONDS", "1,5"},
        BadValue{"CHORUS_STALL_SHUTDOWN_SECONDS", "1e300"},
        BadValue{"CHORUS_LIVENESS_SECONDS", "forever"}, BadValue{"CHORUS_LIVENESS_SECONDS", "-1"},
        BadValue{"CHORUS_LIVENESS_SECONDS", "604801"}));

INSTANTIATE_TEST_SUITE_P(
    Words, ConfigBadEnvTest,
    ::testing::Values(
        BadValue{"CHORUS_HIERARCHICAL_ALLREDUCE", "yes"},
        BadValue{"CHORUS_HIERARCHICAL_ALLREDUCE", "2"},
        BadValue{"CHORUS_HIERARCHICAL_ALLREDUCE", "TRUE"},
        BadValue{"CHORUS_HIERARCHICAL_ALLREDUCE", "1 "},
        BadValue{"CHORUS_HIERARCHICAL_ALLREDUCE", "AUTO"},
        BadValue{"CHORUS_HIERARCHICAL_ALLREDUCE", "-1"}, BadValue{"CHORUS_LOG_LEVEL", "verbose"},
        BadValue{"CHORUS_LOG_LEVEL", "warning"}, BadValue{"CHORUS_LOG_LEVEL", "WARN"},
        BadValue{"CHORUS_GPU_BACKEND", "NCCL"}, BadValue{"CHORUS_GPU_BACKEND", "gloo"},
        BadValue{"CHORUS_GPU_BACKEND", "mpi "}, BadValue{"CHORUS_BIND", "socket"},
        BadValue{"CHORUS_BIND", "Core"}, BadValue{"CHORUS_TIMELINE_MARK_CYCLES", "yes"},
        BadValue{"CHORUS_TIMELINE_MARK_CYCLES", "2"},
        BadValue{"CHORUS_TIMELINE_MARK_CYCLES", "true"}, BadValue{"CHORUS_SHARED_MEMORY", "off"},
        BadValue{"CHORUS_SHARED_MEMORY", "2"}));

TEST(ConfigTest, MessageStatesTheAcceptedForm) {
  StatusOr<Config> c = load_env({{"CHORUS_HIERARCHICAL_ALLREDUCE", "maybe"}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("expected"), std::string::npos) << c.status().message();
  for (const char* form : {"1 (on)", "0 (off)", "auto"}) {
    EXPECT_NE(c.status().message().find(form), std::string::npos) << c.status().message();
  }
}

TEST(ConfigTest, OneBadVariableFailsEvenWhenOthersAreGood) {
  expect_invalid(load_env({{"CHORUS_FUSION_THRESHOLD", "1024"},
                           {"CHORUS_CACHE_CAPACITY", "16"},
                           {"CHORUS_LOG_LEVEL", "chatty"}}),
                 "CHORUS_LOG_LEVEL", "chatty");
}

// --- bad values from Options: the same range checks apply ------------------------------

TEST(ConfigTest, NegativeFusionThresholdInOptions) {
  Options o;
  o.fusion_threshold_bytes = -7;
  expect_invalid(load_env({}, o), "CHORUS_FUSION_THRESHOLD", "-7");
}

TEST(ConfigTest, CacheCapacityOutOfRangeInOptions) {
  Options o;
  o.cache_capacity = (1 << 20) + 1;
  expect_invalid(load_env({}, o), "CHORUS_CACHE_CAPACITY", "1048577");
  o.cache_capacity = -1;
  expect_invalid(load_env({}, o), "CHORUS_CACHE_CAPACITY", "-1");
}

TEST(ConfigTest, CycleTimeZeroOrNegativeInOptions) {
  Options o;
  o.cycle_time_ms = 0;
  expect_invalid(load_env({}, o), "CHORUS_CYCLE_TIME", "0");
  o.cycle_time_ms = -1;
  expect_invalid(load_env({}, o), "CHORUS_CYCLE_TIME", "-1");
  o.cycle_time_ms = std::nan("");
  StatusOr<Config> c = load_env({}, o);
  ASSERT_FALSE(c.ok()) << "cycle time NaN accepted";
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
}

TEST(ConfigTest, BadLogLevelInOptions) {
  Options o;
  o.log_level = "loud";
  expect_invalid(load_env({}, o), "CHORUS_LOG_LEVEL", "loud");
}

TEST(ConfigTest, NegativeStallCheckInOptions) {
  Options o;
  o.stall_check_seconds = -2;
  expect_invalid(load_env({}, o), "CHORUS_STALL_CHECK_SECONDS", "-2");
}

// The error must name the variable that is wrong, not its neighbour.
TEST(ConfigTest, NegativeStallShutdownInOptionsNamesItsOwnVariable) {
  Options o;
  o.stall_shutdown_seconds = -4;
  expect_invalid(load_env({}, o), "CHORUS_STALL_SHUTDOWN_SECONDS", "-4");
}

TEST(ConfigTest, NanStallSecondsInOptionsAreRejected) {
  for (bool shutdown : {false, true}) {
    Options o;
    (shutdown ? o.stall_shutdown_seconds : o.stall_check_seconds) =
        std::numeric_limits<double>::quiet_NaN();
    StatusOr<Config> c = load_env({}, o);
    ASSERT_FALSE(c.ok()) << (shutdown ? "stall_shutdown_seconds" : "stall_check_seconds")
                         << " = NaN accepted";
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace chorus
