#include "slurm_lists.h"

#include <cctype>

#include "parse_util.h"

namespace chorus::launch {
namespace {

// More names than any real allocation: a typo such as n[1-99999999] must not eat memory.
constexpr std::size_t kMaxNames = 1 << 20;

bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string padded(long v, std::size_t width) {
  std::string s = std::to_string(v);
  return s.size() < width ? std::string(width - s.size(), '0') + s : s;
}

// The values of one bracket body, "01-03,7", as strings with the padding of their bound.
StatusOr<std::vector<std::string>> expand_ranges(const std::string& body,
                                                 const std::string& where) {
  std::vector<std::string> out;
  for (const std::string& part : split(body, ',')) {
    const std::size_t dash = part.find('-');
    const std::string lo = part.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : part.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi)) {
      return invalid_argument(where + ": bad range '" + part + "' in [" + body + "]");
    }
    const long a = std::stol(lo), b = std::stol(hi);
    if (b < a) return invalid_argument(where + ": range '" + part + "' runs backwards");
    if (static_cast<std::size_t>(b - a) > kMaxNames) {
      return invalid_argument(where + ": range '" + part + "' is too large");
    }
    for (long v = a; v <= b; ++v) out.push_back(padded(v, lo.size()));
  }
  if (out.empty()) return invalid_argument(where + ": empty brackets");
  return out;
}

Status expand_name(const std::string& name, const std::string& where,
                   std::vector<std::string>& out) {
  const std::size_t open = name.find('[');
  const std::size_t stray = name.find(']');
  if (open == std::string::npos) {
    if (stray != std::string::npos)
      return invalid_argument(where + ": unmatched ']' in '" + name + "'");
    if (name.empty()) return invalid_argument(where + ": empty host name");
    out.push_back(name);
    return out.size() > kMaxNames ? invalid_argument(where + ": too many hosts") : Status();
  }
  const std::size_t close = name.find(']', open);
  if (close == std::string::npos || stray < open) {
    return invalid_argument(where + ": unmatched '[' or ']' in '" + name + "'");
  }
  StatusOr<std::vector<std::string>> values =
      expand_ranges(name.substr(open + 1, close - open - 1), where);
  if (!values.ok()) return values.status();
  for (const std::string& v : *values) {
    Status s = expand_name(name.substr(0, open) + v + name.substr(close + 1), where, out);
    if (!s.ok()) return s;
  }
  return {};
}

}  // namespace

StatusOr<std::vector<std::string>> expand_nodelist(const std::string& list,
                                                   const std::string& variable) {
  const std::string where = variable + "='" + list + "'";
  std::vector<std::string> names;
  // Split on the commas outside brackets.
  int depth = 0;
  std::string item;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) return invalid_argument(where + ": unbalanced brackets");
    if (c == ',' && depth == 0) {
      if (Status s = expand_name(item, where, names); !s.ok()) return s;
      item.clear();
    } else {
      item += c;
    }
  }
  if (depth != 0) return invalid_argument(where + ": unbalanced brackets");
  return names;
}

StatusOr<std::vector<int>> expand_counts(const std::string& list, const std::string& variable) {
  const std::string where = variable + "='" + list + "'";
  std::vector<int> counts;
  for (const std::string& item : split(list, ',')) {
    std::string count = item;
    int repeat = 1;
    if (const std::size_t paren = item.find('('); paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') {
        return invalid_argument(where + ": bad item '" + item + "' (expected N or N(xM))");
      }
      StatusOr<int> r = parse_positive(item.substr(paren + 2, item.size() - paren - 3), where);
      if (!r.ok()) return r.status();
      repeat = *r;
      count = item.substr(0, paren);
    }
    StatusOr<int> n = parse_positive(count, where);
    if (!n.ok()) return n.status();
    if (counts.size() + repeat > kMaxNames) return invalid_argument(where + ": too many nodes");
    counts.insert(counts.end(), repeat, *n);
  }
  if (counts.empty()) return invalid_argument(where + ": empty");
  return counts;
}

}  // namespace chorus::launch
