#pragma once
// Assertion helpers shared by the unit and in-process tests: checks on status messages that
// print both the text and what was missing from it.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/message.h"

namespace chorus::testing {

/// Whether `text` contains `part`, with both in the failure message.
inline ::testing::AssertionResult has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << part << "\" not found in: " << text;
}

/// Expects every one of `parts` in the message of `r`'s status.
inline void expect_message_has(const Response& r, const std::vector<std::string>& parts) {
  for (const std::string& p : parts) {
    EXPECT_TRUE(has(r.status.message(), p)) << "status: " << r.status.to_string();
  }
}

}  // namespace chorus::testing
