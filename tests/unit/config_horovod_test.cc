// Job scripts written for Horovod run unchanged (issue 32): every HOROVOD_* variable that
// horovod.torch 0.28.1 reads at run time loads, with its Chorus meaning or noted as having no
// effect (Config::horovod_variables(), Config::horovod_notes), and docs/python.md's table lists
// exactly those variables with what Chorus does with each. The environment is an injected map
// (config_env.h).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/config.h"
#include "unit/config_env.h"

namespace chorus {
namespace {

// How many notes name `variable` (as "HOROVOD_X=..." at their start).
int notes_naming(const Config& c, const std::string& variable) {
  int n = 0;
  for (const std::string& note : c.horovod_notes) n += note.rfind(variable + "=", 0) == 0;
  return n;
}

std::string all_notes(const Config& c) {
  std::string out;
  for (const std::string& note : c.horovod_notes) out += "\n  " + note;
  return out;
}

// A value Horovod takes for each variable without a row of its own, as a job script sets it.
std::map<std::string, std::string> horovod_only_values() {
  std::map<std::string, std::string> v = {
      {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.8"},
      {"HOROVOD_ADASUM_MPI_CHUNK_SIZE", "1073741824"},
      {"HOROVOD_BATCH_D2D_MEMCOPIES", "0"},
      {"HOROVOD_NUM_NCCL_STREAMS", "2"},
      {"HOROVOD_CPU_OPERATIONS", "gloo"},
      {"HOROVOD_THREAD_AFFINITY", "0,1,2,3"},
      {"HOROVOD_GLOO_RENDEZVOUS_ADDR", "10.0.0.1"},
      {"HOROVOD_HOSTNAME", "node1"},
      {"HOROVOD_GPU_OPERATIONS", "NCCL"},
      {"HOROVOD_GPU_ALLREDUCE", "MPI"},
      {"HOROVOD_GPU_ALLGATHER", "MPI"},
      {"HOROVOD_GPU_BROADCAST", "NCCL"},
      {"HOROVOD_GPU_ALLTOALL", "NCCL"},
      {"HOROVOD_GPU_REDUCESCATTER", "NCCL"},
  };
  for (const HorovodVariable& h : Config::horovod_variables()) v.emplace(h.variable, "1");
  return v;
}

// Every variable of the list at once, with every row's Horovod name: the job loads, the
// mapped ones take their meaning, and each variable of the list is noted once.
TEST(ConfigHorovodTest, EveryHorovodVariableAtOnceLoads) {
  std::map<std::string, std::string> env = horovod_only_values();
  env.insert({{"HOROVOD_FUSION_THRESHOLD", "67108864"},
              {"HOROVOD_CYCLE_TIME", "0"},
              {"HOROVOD_CACHE_CAPACITY", "2048"},
              {"HOROVOD_TIMELINE", "/tmp/horovod_timeline.json"},
              {"HOROVOD_TIMELINE_MARK_CYCLES", "1"},
              {"HOROVOD_STALL_CHECK_TIME_SECONDS", "120"},
              {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "900"},
              {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
              {"HOROVOD_LOG_LEVEL", "INFO"},
              {"HOROVOD_CONTROLLER", "GLOO"},
              {"HOROVOD_GLOO_IFACE", "eth0"},
              {"HOROVOD_AUTOTUNE", "2"},
              {"HOROVOD_AUTOTUNE_LOG", "/tmp/autotune.csv"},
              {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "5"},
              {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "20"},
              {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "30"}});
  StatusOr<Config> c = load_env(env);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->fusion_threshold_bytes, 64 << 20);
  EXPECT_EQ(c->cycle_time_ms, 5.0) << "HOROVOD_CYCLE_TIME=0 keeps the default";
  EXPECT_EQ(c->cache_capacity, 2048);
  EXPECT_EQ(c->timeline_path, "/tmp/horovod_timeline.json");
  EXPECT_TRUE(c->timeline_mark_cycles);
  // HOROVOD_STALL_CHECK_DISABLE=1 wins over Horovod's stall times, as in Horovod.
  EXPECT_EQ(c->stall_check_seconds, 0.0);
  EXPECT_EQ(c->stall_shutdown_seconds, 0.0);
  EXPECT_EQ(c->hierarchical_allreduce, std::optional<bool>(true));
  EXPECT_EQ(c->log_level, "info");
  EXPECT_EQ(c->controller, Controller::kGloo) << "Horovod's words in any case";
  EXPECT_EQ(c->gloo_iface, "eth0");
  EXPECT_TRUE(c->autotune) << "Horovod's integer switch: > 0 is on";
  EXPECT_EQ(c->autotune_log, "/tmp/autotune.csv");
  EXPECT_EQ(c->autotune_warmup_samples, 5);
  EXPECT_EQ(c->autotune_steps_per_sample, 20);
  EXPECT_EQ(c->autotune_max_settings, 30);
  for (const HorovodVariable& h : Config::horovod_variables()) {
    EXPECT_EQ(notes_naming(*c, h.variable), 1) << h.variable << all_notes(*c);
  }
  EXPECT_EQ(notes_naming(*c, "HOROVOD_CYCLE_TIME"), 1) << all_notes(*c);
  EXPECT_EQ(c->horovod_notes.size(), Config::horovod_variables().size() + 1) << all_notes(*c);
}

TEST(ConfigHorovodTest, NoHorovodVariablesNoNotes) {
  StatusOr<Config> c = load_env({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->horovod_notes.empty()) << all_notes(*c);
  // A Horovod name read as its plain value is in the debug log's config line, not a note.
  c = load_env({{"HOROVOD_FUSION_THRESHOLD", "1024"}, {"HOROVOD_CYCLE_TIME", "2"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->horovod_notes.empty()) << all_notes(*c);
}

// A variable with no effect is never read, so no value of it fails the job; empty is unset.
TEST(ConfigHorovodTest, NoEffectVariablesTakeAnyValue) {
  for (const HorovodVariable& h : Config::horovod_variables()) {
    if (!h.sets.empty()) continue;
    for (const char* value : {"1", "0", "-7", "lots", "NCCL", "1.5", " "}) {
      StatusOr<Config> c = load_env({{h.variable, value}});
      ASSERT_TRUE(c.ok()) << h.variable << "=" << value << ": " << c.status().to_string();
      ASSERT_EQ(c->horovod_notes.size(), 1u) << h.variable << all_notes(*c);
      const std::string& note = c->horovod_notes[0];
      EXPECT_EQ(note, std::string(h.variable) + "=" + value + " has no effect in Chorus: " + h.why);
    }
    StatusOr<Config> c = load_env({{h.variable, ""}});
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(c->horovod_notes.empty()) << h.variable << all_notes(*c);
  }
}

// Horovod's cycle time 0 is a loop that never pauses; Chorus never makes work wait, so 0 (or
// less) keeps the default idle pace, noted; CHORUS_CYCLE_TIME=0 stays an error.
TEST(ConfigHorovodTest, CycleTimeZeroLoads) {
  for (const char* zero : {"0", "0.0", "-1"}) {
    StatusOr<Config> c = load_env({{"HOROVOD_CYCLE_TIME", zero}});
    ASSERT_TRUE(c.ok()) << zero << ": " << c.status().to_string();
    EXPECT_EQ(c->cycle_time_ms, 5.0) << zero;
    ASSERT_EQ(c->horovod_notes.size(), 1u) << all_notes(*c);
    const std::string& note = c->horovod_notes[0];
    const std::string read_as = ": read as unset (CHORUS_CYCLE_TIME's default, 5): ";
    EXPECT_EQ(note.rfind(std::string("HOROVOD_CYCLE_TIME=") + zero + read_as, 0), 0u) << note;
  }
  StatusOr<Config> c = load_env({{"HOROVOD_CYCLE_TIME", "0.5"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->cycle_time_ms, 0.5);
  EXPECT_TRUE(c->horovod_notes.empty()) << all_notes(*c);
  // The CHORUS_* variable wins, and then the Horovod one is not read, nor noted.
  c = load_env({{"HOROVOD_CYCLE_TIME", "0"}, {"CHORUS_CYCLE_TIME", "2"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->cycle_time_ms, 2.0);
  EXPECT_TRUE(c->horovod_notes.empty()) << all_notes(*c);
  expect_invalid(load_env({{"CHORUS_CYCLE_TIME", "0"}}), "CHORUS_CYCLE_TIME", "0");
  expect_invalid(load_env({{"HOROVOD_CYCLE_TIME", "fast"}}), "HOROVOD_CYCLE_TIME", "fast");
}

// Horovod reads the flag as an integer > 0; it then turns stall inspection off entirely
// (warnings and shutdown), over Horovod's own stall times but not over the CHORUS_* ones.
TEST(ConfigHorovodTest, StallCheckDisable) {
  StatusOr<Config> c = load_env({{"HOROVOD_STALL_CHECK_DISABLE", "1"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->stall_check_seconds, 0.0);
  EXPECT_EQ(c->stall_shutdown_seconds, 0.0);
  ASSERT_EQ(c->horovod_notes.size(), 1u) << all_notes(*c);
  EXPECT_NE(c->horovod_notes[0].find("read as CHORUS_STALL_CHECK_SECONDS=0 "
                                     "CHORUS_STALL_SHUTDOWN_SECONDS=0"),
            std::string::npos)
      << c->horovod_notes[0];

  c = load_env({{"HOROVOD_STALL_CHECK_DISABLE", "1"},
                {"HOROVOD_STALL_CHECK_TIME_SECONDS", "5"},
                {"CHORUS_STALL_SHUTDOWN_SECONDS", "30"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->stall_check_seconds, 0.0);
  EXPECT_EQ(c->stall_shutdown_seconds, 30.0) << "the CHORUS_* variable wins";
  EXPECT_EQ(c->horovod_notes.size(), 1u) << all_notes(*c);

  c = load_env({{"HOROVOD_STALL_CHECK_DISABLE", "1"},
                {"CHORUS_STALL_CHECK_SECONDS", "7"},
                {"CHORUS_STALL_SHUTDOWN_SECONDS", "30"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->stall_check_seconds, 7.0);
  ASSERT_EQ(c->horovod_notes.size(), 1u) << all_notes(*c);
  EXPECT_NE(c->horovod_notes[0].find("has no effect"), std::string::npos) << all_notes(*c);

  Options o;
  o.stall_check_seconds = 9;
  c = load_env({{"HOROVOD_STALL_CHECK_DISABLE", "1"}}, o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->stall_check_seconds, 9.0) << "Options win";

  // Off, or not an integer: Horovod leaves the check on, and so does Chorus, saying so.
  for (const char* off : {"0", "-1", "true", "yes"}) {
    c = load_env({{"HOROVOD_STALL_CHECK_DISABLE", off}, {"HOROVOD_STALL_CHECK_TIME_SECONDS", "5"}});
    ASSERT_TRUE(c.ok()) << off << ": " << c.status().to_string();
    EXPECT_EQ(c->stall_check_seconds, 5.0) << off;
    EXPECT_EQ(c->stall_shutdown_seconds, 600.0) << off;
    ASSERT_EQ(c->horovod_notes.size(), 1u) << all_notes(*c);
    EXPECT_NE(c->horovod_notes[0].find("has no effect"), std::string::npos) << all_notes(*c);
  }
}

// Horovod's switches are integers, on where > 0; Chorus's words still read on the Horovod
// name, and other words still fail naming it.
TEST(ConfigHorovodTest, SwitchesReadAsHorovodReadsThem) {
  for (const char* on : {"1", "2", "100"}) {
    StatusOr<Config> c =
        load_env({{"HOROVOD_HIERARCHICAL_ALLREDUCE", on}, {"HOROVOD_TIMELINE_MARK_CYCLES", on}});
    ASSERT_TRUE(c.ok()) << on << ": " << c.status().to_string();
    EXPECT_EQ(c->hierarchical_allreduce, std::optional<bool>(true)) << on;
    EXPECT_TRUE(c->timeline_mark_cycles) << on;
  }
  for (const char* off : {"0", "-1"}) {
    StatusOr<Config> c =
        load_env({{"HOROVOD_HIERARCHICAL_ALLREDUCE", off}, {"HOROVOD_TIMELINE_MARK_CYCLES", off}});
    ASSERT_TRUE(c.ok()) << off << ": " << c.status().to_string();
    EXPECT_EQ(c->hierarchical_allreduce, std::optional<bool>(false)) << off;
    EXPECT_FALSE(c->timeline_mark_cycles) << off;
  }
  StatusOr<Config> c = load_env({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "auto"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->hierarchical_allreduce, std::nullopt);
  expect_invalid(load_env({{"HOROVOD_TIMELINE_MARK_CYCLES", "yes"}}),
                 "HOROVOD_TIMELINE_MARK_CYCLES", "yes");
}

TEST(ConfigHorovodTest, TimelineMarkCycles) {
  StatusOr<Config> c = load_env({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->timeline_mark_cycles);
  c = load_env({{"CHORUS_TIMELINE_MARK_CYCLES", "1"}, {"HOROVOD_TIMELINE_MARK_CYCLES", "0"}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->timeline_mark_cycles);
  EXPECT_NE(c->describe().find("CHORUS_TIMELINE_MARK_CYCLES=1"), std::string::npos);
  Options o;
  o.timeline_mark_cycles = false;
  c = load_env({{"CHORUS_TIMELINE_MARK_CYCLES", "1"}}, o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->timeline_mark_cycles);
  for (const auto& [name, value] : c->agreed()) {
    EXPECT_NE(name, "CHORUS_TIMELINE_MARK_CYCLES") << "each rank's own, as its timeline";
  }
}

// Each Horovod variable is one row's Horovod name or in the list, never both, once.
TEST(ConfigHorovodTest, EachHorovodVariableIsDeclaredOnce) {
  std::set<std::string> seen;
  for (const SettingRow& row : Config::table()) {
    if (row.horovod == nullptr) continue;
    EXPECT_EQ(std::string(row.horovod).rfind("HOROVOD_", 0), 0u) << row.horovod;
    EXPECT_TRUE(seen.insert(row.horovod).second) << row.horovod;
  }
  std::set<std::string> settings;
  for (const SettingRow& row : Config::table()) settings.insert(row.variable);
  for (const HorovodVariable& h : Config::horovod_variables()) {
    EXPECT_EQ(std::string(h.variable).rfind("HOROVOD_", 0), 0u) << h.variable;
    EXPECT_TRUE(seen.insert(h.variable).second) << h.variable;
    EXPECT_NE(std::string(h.why), "") << h.variable;
    for (const auto& [variable, value] : h.sets) {
      EXPECT_EQ(settings.count(variable), 1u) << h.variable << " sets unknown " << variable;
    }
  }
}

// docs/python.md's table: the rows' Horovod names in the table's order, then the list's, each
// with what Chorus does: its CHORUS_* variable, or "no effect: " and the note's reason.
TEST(ConfigHorovodTest, DocsTableIsTheHorovodList) {
  const std::vector<std::vector<std::string>> rows =
      table_rows(CHORUS_TEST_SOURCE_DIR "/docs/python.md", "| `HOROVOD_");
  std::vector<std::string> want;
  for (const SettingRow& row : Config::table()) {
    if (row.horovod) want.push_back(row.horovod);
  }
  for (const HorovodVariable& h : Config::horovod_variables()) want.push_back(h.variable);
  ASSERT_EQ(rows.size(), want.size());
  std::size_t i = 0;
  for (const SettingRow& row : Config::table()) {
    if (!row.horovod) continue;
    ASSERT_EQ(rows[i].size(), 3u) << row.horovod;
    EXPECT_EQ(rows[i][0], "`" + std::string(row.horovod) + "`");
    EXPECT_EQ(rows[i][2].rfind("`" + std::string(row.variable) + "`", 0), 0u)
        << row.horovod << ": " << rows[i][2];
    ++i;
  }
  for (const HorovodVariable& h : Config::horovod_variables()) {
    ASSERT_EQ(rows[i].size(), 3u) << h.variable;
    EXPECT_EQ(rows[i][0], "`" + std::string(h.variable) + "`");
    if (h.sets.empty()) {
      EXPECT_EQ(rows[i][2], "no effect: " + std::string(h.why)) << h.variable;
    }
    for (const auto& [variable, value] : h.sets) {
      EXPECT_NE(rows[i][2].find("`" + std::string(variable) + "=" + value + "`"), std::string::npos)
          << h.variable << ": " << rows[i][2];
    }
    ++i;
  }
}

}  // namespace
}  // namespace chorus
