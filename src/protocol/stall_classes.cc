#include "protocol/stall_classes.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>

namespace chorus {
namespace {

// The first example of a class, described once, and every tensor of the class.
struct Example {
  std::string text;
  std::vector<std::string> tensors;
};

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string quoted_list(const std::vector<std::string>& names, std::size_t most) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < most; ++i) {
    out += (i ? ", " : "") + quoted(names[i]);
  }
  if (names.size() > most) out += " and " + std::to_string(names.size() - most) + " more";
  return out;
}

std::string fixed1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

bool holds(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool tail_of(const std::string& tail, const std::string& whole) {
  if (tail.size() >= whole.size()) return false;
  const char sep = whole[whole.size() - tail.size() - 1];
  return (sep == '.' || sep == '/' || sep == ':') &&
         whole.compare(whole.size() - tail.size(), tail.size(), tail) == 0;
}

std::string lower(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const char* stall_class_name(StallClass c) {
  switch (c) {
    case StallClass::kNameMismatch: return "names differ across ranks";
    case StallClass::kOrderDeadlock: return "ranks submit in different orders";
    case StallClass::kNeverSubmitted: return "a tensor some ranks never submitted";
    case StallClass::kRankStopped: return "ranks stopped taking part";
  }
  return "?";
}

int stall_exit_status(StallClass c) { return 80 + static_cast<int>(c); }

bool names_look_alike(const std::string& a, const std::string& b) {
  if (a == b) return false;
  return tail_of(a, b) || tail_of(b, a) || lower(a) == lower(b);
}

std::vector<StallFinding> classify_stalls(const StallView& view) {
  auto outstanding = [&](int r) -> const std::vector<std::string>& {
    static const std::vector<std::string> kNone;
    return r < static_cast<int>(view.outstanding.size()) ? view.outstanding[r] : kNone;
  };
  std::map<StallClass, Example> found;
  auto note = [&](StallClass c, const std::string& tensor, const std::string& text) {
    Example& e = found[c];
    if (e.tensors.empty()) e.text = text;
    e.tensors.push_back(tensor);
  };
  for (const StallView::Stuck& s : view.stuck) {
    std::vector<int> holders, missing;
    for (int r = 0; r < view.size; ++r) {
      (r < static_cast<int>(s.submitted.size()) && s.submitted[r] ? holders : missing).push_back(r);
    }
    if (missing.empty()) continue;
    const std::string held_by = "ranks " + ranks_string(holders);
    std::optional<std::string> alike, order, never, stopped;
    for (int m : missing) {
      const std::vector<std::string>& mine = outstanding(m);
      const std::string rank = "rank " + std::to_string(m);
      for (const std::string& y : mine) {
        if (!alike && names_look_alike(s.name, y)) {
          alike = rank + " submitted " + quoted(y) + " where " + held_by + " submitted " +
                  quoted(s.name);
        }
        if (order || y == s.name) continue;
        for (int q : holders) {
          if (holds(outstanding(q), y)) continue;
          order = "rank " + std::to_string(q) + " submitted " + quoted(s.name) + " and not " +
                  quoted(y) + ", " + rank + " submitted " + quoted(y) + " and not " +
                  quoted(s.name) + ", and each waits for its own";
          break;
        }
      }
      if (!never && !mine.empty()) {
        never = quoted(s.name) + " waits for " + rank + ", which meanwhile submitted " +
                quoted_list(mine, 3);
      }
      if (!stopped && mine.empty()) {
        const double idle =
            m < static_cast<int>(view.idle_seconds.size()) ? view.idle_seconds[m] : -1;
        stopped = rank + " has nothing outstanding" +
                  (idle >= 0 ? " and submitted nothing for " + fixed1(idle) + " s" : "") +
                  " while " + held_by + " wait for " + quoted(s.name) + " (" +
                  fixed1(s.waited_seconds) + " s)";
      }
    }
    if (alike) {
      note(StallClass::kNameMismatch, s.name, *alike);
    } else if (order) {
      note(StallClass::kOrderDeadlock, s.name, *order);
    } else if (never) {
      note(StallClass::kNeverSubmitted, s.name, *never);
    } else if (stopped) {
      note(StallClass::kRankStopped, s.name, *stopped);
    }
  }
  const std::map<StallClass, const char*> fixes = {
      {StallClass::kNameMismatch,
       "give each tensor the same name on every rank (a model wrapped or prefixed on some ranks "
       "only, or names built from rank-local state)"},
      {StallClass::kOrderDeadlock,
       "submit collectives in the same order on every rank, or submit all of them before "
       "waiting on any"},
      {StallClass::kNeverSubmitted,
       "make every rank submit the tensor (a branch that only some ranks take?)"},
      {StallClass::kRankStopped,
       "see what that rank does outside Chorus (data loading, a hang, a loop that ended "
       "early); a rank that died is named by the liveness check (CHORUS_LIVENESS_SECONDS)"},
  };
  std::vector<StallFinding> out;
  for (auto& [cls, e] : found) {
    std::sort(e.tensors.begin(), e.tensors.end());
    StallFinding f;
    f.cls = cls;
    f.tensors = e.tensors;
    const std::string count =
        std::to_string(e.tensors.size()) + (e.tensors.size() == 1 ? " tensor" : " tensors");
    f.line = std::string(stall_class_name(cls)) + " (" + count + ": " + quoted_list(e.tensors, 3) +
             "): " + e.text + "; fix: " + fixes.at(cls);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace chorus
