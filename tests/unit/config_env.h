#pragma once
// What the configuration tests share: Config::load over an injected environment, the check
// of the error for a bad value, and the reader of the docs' settings tables.

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"

namespace chorus {

// A fake environment: getenv() over a map, nullptr for an unset variable.
class FakeEnv {
 public:
  FakeEnv(std::map<std::string, std::string> vars = {}) : vars_(std::move(vars)) {}  // NOLINT
  std::function<const char*(const char*)> fn() const {
    return [this](const char* name) -> const char* {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> vars_;
};

inline StatusOr<Config> load_env(std::map<std::string, std::string> vars, const Options& o = {}) {
  FakeEnv env(std::move(vars));
  return Config::load(o, env.fn());
}

// Fails the calling test unless `got` is kInvalidArgument whose message names `var` and
// `value`.
inline void expect_invalid(const StatusOr<Config>& got, const std::string& var,
                           const std::string& value) {
  ASSERT_FALSE(got.ok()) << var << "=" << value << " was accepted";
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status().to_string();
  EXPECT_NE(got.status().message().find(var), std::string::npos)
      << "message does not name " << var << ": " << got.status().message();
  EXPECT_NE(got.status().message().find(value), std::string::npos)
      << "message does not quote the value '" << value << "': " << got.status().message();
}

// The cells, trimmed, of every row of a Markdown table in `path` whose line starts with
// `prefix` ("| `CHORUS_"), in the file's order; fails the calling test when it cannot read it.
inline std::vector<std::vector<std::string>> table_rows(const std::string& path,
                                                        const std::string& prefix) {
  std::ifstream file(path);
  EXPECT_TRUE(file) << "cannot read " << path;
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(file, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream in(line.substr(1));
    for (std::string cell; std::getline(in, cell, '|');) {
      const auto b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace chorus
