#include "autotune.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "trace_events.h"

namespace chorus::trace {
namespace {

constexpr char kHeader[] =
    "sample,kind,fusion_bytes,host_algorithm,cycle_ms,mb_per_s,spread_mb_per_s,ranks,round,"
    "gain_over_defaults";
constexpr int kColumns = 10;
constexpr int kBarWidth = 40;

struct Row {
  std::vector<std::string> cells;
  double score = 0;
  std::string setting() const { return cells[2] + " B, " + cells[3] + ", " + cells[4] + " ms"; }
};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::stringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.push_back("");
  return cells;
}

}  // namespace

StatusOr<std::string> autotune_chart(const std::string& csv) {
  std::stringstream lines(csv);
  std::string line;
  if (!std::getline(lines, line) || line != kHeader) {
    return invalid_argument("not an autotuner log: its first line is not '" + std::string(kHeader) +
                            "'");
  }
  std::vector<Row> samples;
  Row winner;
  for (int number = 2; std::getline(lines, line); ++number) {
    Row r{split(line)};
    if (r.cells.size() != kColumns) {
      return invalid_argument("line " + std::to_string(number) + " has " +
                              std::to_string(r.cells.size()) + " fields, not " +
                              std::to_string(kColumns) + ": '" + line + "'");
    }
    if (!r.cells[5].empty()) {
      try {
        r.score = std::stod(r.cells[5]);
      } catch (const std::exception&) {
        return invalid_argument("line " + std::to_string(number) + ": score '" + r.cells[5] +
                                "' is not a number");
      }
    }
    if (r.cells[1] == "winner") {
      winner = r;
    } else {
      samples.push_back(r);
    }
  }
  double best = 0;
  for (const Row& r : samples) best = std::max(best, r.score);
  std::string out;
  char text[256];
  for (const Row& r : samples) {
    const int width = best > 0 ? static_cast<int>(kBarWidth * r.score / best + 0.5) : 0;
    const bool won =
        !winner.cells.empty() && r.cells[1] != "warmup" && r.setting() == winner.setting();
    std::snprintf(text, sizeof(text), "%3s %-6s %-34s %9s MB/s +-%-7s %-7s %c |%s\n",
                  r.cells[0].c_str(), r.cells[1].c_str(), r.setting().c_str(), r.cells[5].c_str(),
                  r.cells[6].c_str(), r.cells[9].c_str(), won ? '*' : ' ',
                  std::string(static_cast<std::size_t>(width), '#').c_str());
    out += text;
  }
  if (winner.cells.empty()) {
    out += "no winner yet: the search had not ended when the log was last written\n";
  } else {
    out += "winner (*): " + winner.setting() + ", " + winner.cells[5] + " MB/s (spread " +
           winner.cells[6] + "), " + winner.cells[9] + " over the defaults, after " +
           winner.cells[0] + " samples\n";
  }
  return out;
}

StatusOr<std::string> autotune_chart_of(const std::string& path) {
  StatusOr<std::string> text = read_text(path);
  if (!text.ok()) return text.status();
  StatusOr<std::string> chart = autotune_chart(*text);
  if (!chart.ok()) return invalid_argument(path + ": " + chart.status().message());
  return chart;
}

}  // namespace chorus::trace
