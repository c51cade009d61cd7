#include "host_list.h"

#include <cctype>
#include <sstream>

#include "parse_util.h"

namespace chorus::launch {
namespace {

// Adds `slots` to `name`, keeping the order of first appearance.
void add_slots(std::vector<Host>& hosts, const std::string& name, int slots) {
  for (Host& h : hosts) {
    if (h.name == name) {
      h.slots += slots;
      return;
    }
  }
  hosts.push_back({name, slots});
}

Status empty_error(const std::string& source) {
  return invalid_argument(source + " lists no hosts");
}

}  // namespace

Status check_host_name(const std::string& name, const std::string& where) {
  if (name.empty()) return invalid_argument(where + ": empty host name");
  for (char c : name) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == ',' || c == ':' || c == '[' ||
        c == ']' || c == '=' || !std::isprint(static_cast<unsigned char>(c))) {
      return invalid_argument(where + ": bad host name '" + name + "'");
    }
  }
  return {};
}

StatusOr<std::vector<Host>> parse_host_list(const std::string& list) {
  std::vector<Host> hosts;
  for (const std::string& item : split(list, ',')) {
    const std::string where = "-H '" + list + "'";
    std::string name = item;
    int slots = 1;
    if (auto colon = item.find(':'); colon != std::string::npos) {
      name = item.substr(0, colon);
      StatusOr<int> n = parse_positive(item.substr(colon + 1), where + ", host '" + name + "'");
      if (!n.ok()) return n.status();
      slots = *n;
    }
    if (Status s = check_host_name(name, where); !s.ok()) return s;
    for (const Host& h : hosts) {
      if (h.name == name) return invalid_argument(where + ": host '" + name + "' is listed twice");
    }
    hosts.push_back({name, slots});
  }
  if (hosts.empty()) return empty_error("-H ''");
  return hosts;
}

StatusOr<std::vector<Host>> parse_hostfile(const std::string& text, const std::string& source) {
  std::vector<Host> hosts;
  int line_no = 0;
  for (const std::string& raw : split_lines(text)) {
    ++line_no;
    const std::vector<std::string> words = split_words(strip_comment(raw));
    if (words.empty()) continue;
    const std::string where = source + " line " + std::to_string(line_no);
    std::string name = words[0];
    int slots = 1;
    if (auto colon = name.find(':'); colon != std::string::npos) {
      StatusOr<int> n = parse_positive(name.substr(colon + 1), where);
      if (!n.ok()) return n.status();
      slots = *n;
      name = name.substr(0, colon);
    }
    for (std::size_t i = 1; i < words.size(); ++i) {
      const std::string& w = words[i];
      if (w.rfind("slots=", 0) == 0) {
        StatusOr<int> n = parse_positive(w.substr(6), where + " (slots=)");
        if (!n.ok()) return n.status();
        slots = *n;
      } else if (w.rfind("max_slots=", 0) != 0) {
        return invalid_argument(where + ": unknown field '" + w + "' (expected slots=N)");
      }
    }
    if (Status s = check_host_name(name, where); !s.ok()) return s;
    add_slots(hosts, name, slots);
  }
  if (hosts.empty()) return empty_error(source);
  return hosts;
}

StatusOr<std::vector<Host>> parse_pe_hostfile(const std::string& text, const std::string& source) {
  std::vector<Host> hosts;
  int line_no = 0;
  for (const std::string& raw : split_lines(text)) {
    ++line_no;
    const std::vector<std::string> words = split_words(raw);
    if (words.empty()) continue;
    const std::string where = source + " line " + std::to_string(line_no);
    if (words.size() < 2) {
      return invalid_argument(where + ": expected 'host slots queue processors', got '" + raw +
                              "'");
    }
    StatusOr<int> n = parse_positive(words[1], where + " (slots)");
    if (!n.ok()) return n.status();
    if (Status s = check_host_name(words[0], where); !s.ok()) return s;
    add_slots(hosts, words[0], *n);
  }
  if (hosts.empty()) return empty_error(source);
  return hosts;
}

StatusOr<std::vector<Host>> parse_pbs_nodefile(const std::string& text, const std::string& source) {
  std::vector<Host> hosts;
  int line_no = 0;
  for (const std::string& raw : split_lines(text)) {
    ++line_no;
    const std::vector<std::string> words = split_words(raw);
    if (words.empty()) continue;
    const std::string where = source + " line " + std::to_string(line_no);
    if (words.size() != 1) return invalid_argument(where + ": expected one host name per line");
    if (Status s = check_host_name(words[0], where); !s.ok()) return s;
    add_slots(hosts, words[0], 1);
  }
  if (hosts.empty()) return empty_error(source);
  return hosts;
}

std::string format_host_list(const std::vector<Host>& hosts) {
  std::ostringstream out;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    out << (i ? "," : "") << hosts[i].name << ":" << hosts[i].slots;
  }
  return out.str();
}

}  // namespace chorus::launch
