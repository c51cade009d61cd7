#pragma once
// Small text helpers shared by the launcher's parsers.

#include <string>
#include <vector>

#include "chorus/status.h"

namespace chorus::launch {

/// Splits on `sep`; "a,,b" gives an empty middle item (which callers report).
std::vector<std::string> split(const std::string& s, char sep);
std::vector<std::string> split_lines(const std::string& text);
/// Splits on runs of whitespace, dropping empty words.
std::vector<std::string> split_words(const std::string& s);
/// The line up to its first '#'.
std::string strip_comment(const std::string& line);
/// A decimal integer >= 1; the error names `what` and the value.
StatusOr<int> parse_positive(const std::string& s, const std::string& what);
/// Words of a command-line fragment such as "-mca pml ob1 --tag-output": whitespace
/// separates, '...' and "..." group (no variables, no escapes: nothing runs a shell).
StatusOr<std::vector<std::string>> split_arguments(const std::string& s, const std::string& what);

}  // namespace chorus::launch
