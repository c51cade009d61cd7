#include "parse_util.h"

#include <cctype>
#include <climits>
#include <cstdlib>

namespace chorus::launch {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  std::size_t start = 0;
  while (true) {
    std::size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines = split(text, '\n');
  for (std::string& l : lines) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
  }
  return lines;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::string word;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!word.empty()) out.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) out.push_back(std::move(word));
  return out;
}

std::string strip_comment(const std::string& line) { return line.substr(0, line.find('#')); }

StatusOr<int> parse_positive(const std::string& s, const std::string& what) {
  bool digits = !s.empty() && s.size() <= 9;
  for (char c : s) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits || std::atoi(s.c_str()) < 1) {
    return invalid_argument(what + ": '" + s + "' is not a positive integer");
  }
  return std::atoi(s.c_str());
}

StatusOr<std::vector<std::string>> split_arguments(const std::string& s, const std::string& what) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : s) {
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) out.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote) return invalid_argument(what + ": unterminated " + quote + " quote in '" + s + "'");
  if (in_word) out.push_back(word);
  return out;
}

}  // namespace chorus::launch
