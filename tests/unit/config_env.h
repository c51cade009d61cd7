#pragma once
// What the configuration tests share: Config::load over an injected environment, and the
// check of the error for a bad value.

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <utility>

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

}  // namespace chorus
