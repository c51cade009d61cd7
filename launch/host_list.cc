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

// Checks `name` and adds its slots (see add_slots).
Status add_host(std::vector<Host>& hosts, const std::string& name, int slots,
                const std::string& where) {
  if (Status s = check_host_name(name, where); !s.ok()) return s;
  add_slots(hosts, name, slots);
  return {};
}

// One non-blank line of a host file: its words, the line as written, and "SOURCE line N"
// for errors. Adds what the line lists to `hosts`.
using LineParser = Status (*)(const std::vector<std::string>& words, const std::string& raw,
                              const std::string& where, std::vector<Host>& hosts);

// The line loop the host files share: cuts '#' comments when `comments`, skips blank lines,
// stops at the first error, and calls a file without hosts an error.
StatusOr<std::vector<Host>> parse_lines(const std::string& text, const std::string& source,
                                        bool comments, LineParser parse_line) {
  std::vector<Host> hosts;
  int line_no = 0;
  for (const std::string& raw : split_lines(text)) {
    ++line_no;
    const std::vector<std::string> words = split_words(comments ? strip_comment(raw) : raw);
    if (words.empty()) continue;
    const std::string where = source + " line " + std::to_string(line_no);
    if (Status s = parse_line(words, raw, where, hosts); !s.ok()) return s;
  }
  if (hosts.empty()) return empty_error(source);
  return hosts;
}

// "name slots=N", "name:N" or "name" (max_slots= is accepted and ignored).
Status hostfile_line(const std::vector<std::string>& words, const std::string&,
                     const std::string& where, std::vector<Host>& hosts) {
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
  return add_host(hosts, name, slots, where);
}

// "name slots queue processors" (SGE, ABCI).
Status pe_hostfile_line(const std::vector<std::string>& words, const std::string& raw,
                        const std::string& where, std::vector<Host>& hosts) {
  if (words.size() < 2) {
    return invalid_argument(where + ": expected 'host slots queue processors', got '" + raw + "'");
  }
  StatusOr<int> n = parse_positive(words[1], where + " (slots)");
  if (!n.ok()) return n.status();
  return add_host(hosts, words[0], *n, where);
}

// One name per line, once per slot (PBS).
Status pbs_nodefile_line(const std::vector<std::string>& words, const std::string&,
                         const std::string& where, std::vector<Host>& hosts) {
  if (words.size() != 1) return invalid_argument(where + ": expected one host name per line");
  return add_host(hosts, words[0], 1, where);
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
  return parse_lines(text, source, true, hostfile_line);
}

StatusOr<std::vector<Host>> parse_pe_hostfile(const std::string& text, const std::string& source) {
  return parse_lines(text, source, false, pe_hostfile_line);
}

StatusOr<std::vector<Host>> parse_pbs_nodefile(const std::string& text, const std::string& source) {
  return parse_lines(text, source, false, pbs_nodefile_line);
}

std::string format_host_list(const std::vector<Host>& hosts) {
  std::ostringstream out;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    out << (i ? "," : "") << hosts[i].name << ":" << hosts[i].slots;
  }
  return out.str();
}

}  // namespace chorus::launch
