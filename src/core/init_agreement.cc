#include "core/init_agreement.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "protocol/message.h"

namespace chorus {
namespace {

struct Report {
  Status status;
  Settings settings;
};

// Layout: the status code, the number of settings and one "variable=value" per line, then
// the status message (any bytes) to the end.
std::optional<Report> decode(const std::string& bytes) {
  std::istringstream in(bytes);
  int code = 0;
  std::size_t count = 0;
  if (!(in >> code >> count) || code < 0 || code >= kNumStatusCodes) return std::nullopt;
  in.ignore(1);
  Report r;
  for (std::size_t i = 0; i < count; ++i) {
    std::string line;
    if (!std::getline(in, line)) return std::nullopt;
    const std::size_t eq = line.find('=');
    if (eq == std::string::npos) return std::nullopt;
    r.settings.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  std::string message((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  r.status = Status(static_cast<StatusCode>(code), std::move(message));
  return r;
}

// "CHORUS_X differs across ranks: '0' on ranks [0]; '524288' on ranks [1, 2]", or empty.
std::string differences(const std::string& var, const std::vector<Report>& reports) {
  std::vector<std::optional<std::string>> values(reports.size(), "(not reported)");
  for (std::size_t r = 0; r < reports.size(); ++r) {
    for (const auto& [name, v] : reports[r].settings) {
      if (name == var) values[r] = v;
    }
  }
  const std::string d = disagreement(values, /*quote=*/true);
  return d.empty() ? d : var + " differs across ranks: " + d;
}

}  // namespace

std::string encode_init_report(const Status& local, const Settings& settings) {
  std::ostringstream out;
  out << static_cast<int>(local.code()) << " " << settings.size() << "\n";
  for (const auto& [var, value] : settings) out << var << "=" << value << "\n";
  out << local.message();
  return out.str();
}

Status decide_init(const std::string& step, const Status& local,
                   const std::vector<std::string>& reports) {
  std::vector<Report> decoded;
  std::vector<int> failed;
  for (int r = 0; r < static_cast<int>(reports.size()); ++r) {
    std::optional<Report> got = decode(reports[r]);
    if (!got) {
      got = Report{Status(StatusCode::kDataLoss, "its report did not decode"), {}};
    }
    if (!got->status.ok()) failed.push_back(r);
    decoded.push_back(std::move(*got));
  }
  if (!local.ok()) return local;
  if (!failed.empty()) {
    const Status& first = decoded[failed.front()].status;
    return Status(first.code(), "init: " + step + " failed on ranks " + ranks_string(failed) +
                                    "; rank " + std::to_string(failed.front()) +
                                    " says: " + first.message());
  }
  std::vector<std::string> all;
  for (const Report& r : decoded) {
    for (const auto& [var, value] : r.settings) {
      if (std::find(all.begin(), all.end(), var) == all.end()) all.push_back(var);
    }
  }
  std::string message;
  for (const std::string& var : all) {
    std::string d = differences(var, decoded);
    if (!d.empty()) message += (message.empty() ? "" : "; ") + d;
  }
  if (message.empty()) return {};
  return invalid_argument("init: " + message +
                          ". These settings shape what the ranks do together and must be the "
                          "same on every rank: export the same value to every rank");
}

}  // namespace chorus
