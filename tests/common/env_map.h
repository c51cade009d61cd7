#pragma once
// An environment for the code that reads one through a lookup function (topology/
// launcher_view.h's EnvLookup): a map of the variables a test sets, nothing else.
#include <map>
#include <optional>
#include <string>

#include "topology/launcher_view.h"

namespace chorus::testing {

using EnvMap = std::map<std::string, std::string>;

inline EnvLookup lookup(const EnvMap& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace chorus::testing
