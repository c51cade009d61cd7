// The autotuner (src/core/autotuner.h) through whole runtimes (ranks as threads,
// runtime_job.h): ranks that see different noise (each sleeps its own random time between
// steps) still walk the same settings, switch at the same rounds and end with the same
// winner; every rank's log (CHORUS_AUTOTUNE_LOG with "{rank}") is the same file, byte for
// byte; the log's rows say what the search did; and no result changes while settings do.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "in_memory_world.h"
#include "runtime_job.h"

namespace chorus::testing {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::stringstream fields(line);
    std::string cell;
    while (std::getline(fields, cell, ',')) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    rows.push_back(cells);
  }
  return rows;
}

// The autotuner's settings for the test's job, in its environment (they are agreed, and the
// ranks share the process's).
class AutotuneEnv {
 public:
  AutotuneEnv() {
    setenv("CHORUS_AUTOTUNE_WARMUP_SAMPLES", "1", 1);
    setenv("CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "2", 1);
    setenv("CHORUS_AUTOTUNE_SAMPLES_PER_SETTING", "2", 1);
    setenv("CHORUS_AUTOTUNE_MAX_SETTINGS", "8", 1);
  }
  ~AutotuneEnv() {
    unsetenv("CHORUS_AUTOTUNE_WARMUP_SAMPLES");
    unsetenv("CHORUS_AUTOTUNE_STEPS_PER_SAMPLE");
    unsetenv("CHORUS_AUTOTUNE_SAMPLES_PER_SETTING");
    unsetenv("CHORUS_AUTOTUNE_MAX_SETTINGS");
  }
};

constexpr char kHeader[] =
    "sample,kind,fusion_bytes,host_algorithm,cycle_ms,mb_per_s,spread_mb_per_s,ranks,round,"
    "gain_over_defaults";

// Rank `rank`'s element `i` of gradient `t` at `step`: fractions of many magnitudes, whose
// sums round differently in different orders.
float value(int rank, int step, std::size_t t, std::size_t i) {
  const uint64_t h = (i * 2654435761u + static_cast<uint64_t>(step) * 40503u + t * 977u +
                      static_cast<uint64_t>(rank) * 7919u) %
                     100003u;
  return static_cast<float>(h) / 997.0f * (h % 3 == 0 ? 1e-3f : 1.0f) - 50.0f;
}

// Three ranks on two hosts (the global set's default fusion limit is the across-hosts one,
// 4 MiB) train `steps` steps of four gradients, each rank pausing its own random time after
// each step. Checks every sum's bits against the rank-order sum and that every rank's log is
// the same bytes; returns rank 0's log.
std::string run_tuned_job(int steps) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("chorus_autotune_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string log = (dir / "autotune.{rank}.csv").string();
  InMemoryJob job({"a", "a", "b"});
  const std::vector<int64_t> sizes = {1000, 20000, 300, 70000};
  std::vector<int> wrong(3, 0);
  run_job(
      job,
      [&](int rank) {
        std::mt19937 noise(1234u + static_cast<unsigned>(rank) * 977u);
        std::uniform_int_distribution<int> pause_us(0, 400 * (rank + 1));
        for (int step = 0; step < steps; ++step) {
          std::vector<std::vector<float>> grads;
          std::vector<Handle> handles;
          for (std::size_t t = 0; t < sizes.size(); ++t) {
            grads.emplace_back(static_cast<std::size_t>(sizes[t]));
            for (std::size_t i = 0; i < grads[t].size(); ++i) grads[t][i] = value(rank, step, t, i);
          }
          for (std::size_t t = 0; t < sizes.size(); ++t) {
            AllreduceOptions o;
            o.op = ReduceOp::kSum;
            TensorRef ref = tensor(grads[t], DataType::kFloat32);
            handles.push_back(allreduce("w" + std::to_string(t), ref, ref, o));
          }
          for (std::size_t t = 0; t < sizes.size(); ++t) {
            ASSERT_TRUE(handles[t].wait().ok()) << "rank " << rank << " step " << step;
            // The job's backends combine in rank order, fused or alone: the same bits
            // whatever setting ran the step.
            for (std::size_t i = 0; i < grads[t].size(); ++i) {
              float sum = value(0, step, t, i);
              sum += value(1, step, t, i);
              sum += value(2, step, t, i);
              if (std::memcmp(&grads[t][i], &sum, sizeof(float)) != 0) ++wrong[rank];
            }
          }
          std::this_thread::sleep_for(std::chrono::microseconds(pause_us(noise)));
        }
      },
      [&](int) {
        Options o;
        o.autotune = true;
        o.autotune_log = log;
        return o;
      });
  EXPECT_EQ(wrong, std::vector<int>(3, 0)) << "elements reduced wrong, per rank";
  const std::string first = read(dir / "autotune.0.csv");
  EXPECT_EQ(read(dir / "autotune.1.csv"), first) << "rank 1's log differs from rank 0's";
  EXPECT_EQ(read(dir / "autotune.2.csv"), first) << "rank 2's log differs from rank 0's";
  std::filesystem::remove_all(dir);
  return first;
}

TEST(Autotune, RanksWithDifferentNoiseWalkTheSameSettingsAndEndWithOneWinner) {
  AutotuneEnv env;
  const std::string first = run_tuned_job(200);
  const std::vector<std::vector<std::string>> rows = csv_rows(first);
  ASSERT_GE(rows.size(), 3u) << first;
  std::string header;
  for (std::size_t i = 0; i < rows[0].size(); ++i) header += (i ? "," : "") + rows[0][i];
  EXPECT_EQ(header, kHeader);
  // 1 warm-up sample, 8 settings of 2 samples each, then the winner.
  ASSERT_EQ(rows.size(), 1u + 1u + 16u + 1u) << first;
  EXPECT_EQ(rows[1][1], "warmup");
  EXPECT_EQ(rows[2][2] + "," + rows[2][3] + "," + rows[2][4], "4194304,auto,5")
      << "the defaults are sampled first";
  long previous_round = 0;
  std::map<std::string, std::vector<double>> scores;  // setting -> its samples' MB/s
  std::vector<std::string> order;
  for (std::size_t i = 1; i + 1 < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 10u) << first;
    EXPECT_EQ(rows[i][0], std::to_string(i));
    EXPECT_EQ(rows[i][7], "3") << "every rank's score counts";
    const long round = std::stol(rows[i][8]);
    EXPECT_GT(round, previous_round) << "row " << i;
    previous_round = round;
    EXPECT_GT(std::stod(rows[i][5]), 0.0) << "row " << i;
    EXPECT_GE(std::stod(rows[i][6]), 0.0) << "row " << i;
    if (i == 1) continue;
    EXPECT_EQ(rows[i][1], "sample");
    const std::string setting = rows[i][2] + "," + rows[i][3] + "," + rows[i][4];
    if (!scores.count(setting)) order.push_back(setting);
    scores[setting].push_back(std::stod(rows[i][5]));
  }
  ASSERT_EQ(order.size(), 8u);
  // Coordinates: the first dimension varied is the fusion limit, the others kept.
  for (std::size_t k = 1; k < 6; ++k) {
    EXPECT_NE(order[k].rfind("4194304,", 0), 0u) << order[k];
    EXPECT_EQ(order[k].substr(order[k].find(',')), ",auto,5") << order[k];
  }
  // The winner is the setting with the best mean of its samples (the log rounds to 0.001).
  std::string best;
  double best_mean = -1;
  for (const std::string& s : order) {
    const double mean = (scores[s][0] + scores[s][1]) / 2;
    ASSERT_EQ(scores[s].size(), 2u) << s;
    if (mean > best_mean + 0.002) {
      best = s;
      best_mean = mean;
    }
  }
  const std::vector<std::string>& winner = rows.back();
  ASSERT_EQ(winner.size(), 10u) << first;
  EXPECT_EQ(winner[1], "winner");
  EXPECT_EQ(winner[2] + "," + winner[3] + "," + winner[4], best) << first;
  EXPECT_NEAR(std::stod(winner[5]), best_mean, 0.002);
  const std::vector<double>& defaults = scores[order[0]];
  const double gain = 100 * (best_mean / ((defaults[0] + defaults[1]) / 2) - 1);
  EXPECT_NEAR(std::stod(winner[9]), gain, 0.1) << winner[9];
  EXPECT_EQ(winner[9].back(), '%');
}

// A failed agreement (here every rank's own part of the fifth one fails, with one verdict)
// ends the search on every rank with the best setting agreed so far, and training goes on.
TEST(Autotune, AFailedAgreementEndsTheSearchEverywhereWithTheBestSoFar) {
  AutotuneEnv env;
  setenv("CHORUS_TEST_FAIL_PART", "chorus.autotune.4", 1);
  const std::string first = run_tuned_job(120);
  unsetenv("CHORUS_TEST_FAIL_PART");
  const std::vector<std::vector<std::string>> rows = csv_rows(first);
  // The header, the warm-up, the defaults' two samples, the first sample of the next setting
  // (whose second one failed to agree), and the winner.
  ASSERT_EQ(rows.size(), 6u) << first;
  EXPECT_EQ(rows[4][1], "sample");
  EXPECT_NE(rows[4][2], "4194304") << "the fusion limit is the first setting varied";
  const std::vector<std::string>& winner = rows.back();
  ASSERT_EQ(winner.size(), 10u) << first;
  EXPECT_EQ(winner[1], "winner");
  EXPECT_EQ(winner[2] + "," + winner[3] + "," + winner[4], "4194304,auto,5")
      << "the defaults, the only setting scored: " << first;
  EXPECT_EQ(winner[9], "+0.0%");
}

}  // namespace
}  // namespace chorus::testing
