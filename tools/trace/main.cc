// chorus-trace: reads what Chorus writes to explain a job (docs/observability.md).
//
//   chorus-trace merge -o OUT.json TIMELINE...     every rank's timeline in one trace
//   chorus-trace summary [--json OUT] TIMELINE...  where each step's time went, rank by rank
//   chorus-trace stall DIR                         why collectives were stuck (flight records)
//   chorus-trace plot -o OUT.png [--title T] TIMELINE...
//   chorus-trace autotune LOG.csv                  the autotuner's samples (CHORUS_AUTOTUNE_LOG)
//
// TIMELINE: files written with CHORUS_TIMELINE=path.{rank}.json (one per rank), or a merged
// trace. Exit status: 0, 1 when the input cannot be read, 2 for a bad command line.
#include <cstdio>
#include <string>
#include <vector>

#include "autotune.h"
#include "merge.h"
#include "plot.h"
#include "stall.h"
#include "summary.h"
#include "trace_events.h"

namespace {

using chorus::Status;
using chorus::StatusOr;

int usage(const char* problem) {
  if (problem != nullptr) std::fprintf(stderr, "chorus-trace: %s\n", problem);
  std::fprintf(problem != nullptr ? stderr : stdout,
               "usage: chorus-trace merge -o OUT.json TIMELINE...\n"
               "       chorus-trace summary [--json OUT.json] TIMELINE...\n"
               "       chorus-trace stall DIR\n"
               "       chorus-trace plot -o OUT.png [--title TEXT] TIMELINE...\n"
               "       chorus-trace autotune LOG.csv\n"
               "TIMELINE: each rank's file of CHORUS_TIMELINE=path.{rank}.json, or a merged "
               "trace; DIR: CHORUS_DEBUG_DIR, with chorus-flight.rank<R>.json files\n");
  return problem != nullptr ? 2 : 0;
}

int failed(const Status& s) {
  std::fprintf(stderr, "chorus-trace: %s\n", s.message().c_str());
  return 1;
}

// Options of the form "--name VALUE" (or "-o VALUE"), then the inputs.
struct Args {
  std::string output, json, title;
  std::vector<std::string> inputs;
};

bool parse(int argc, char** argv, Args& a, std::string& problem) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string* target = arg == "-o"        ? &a.output
                          : arg == "--json"  ? &a.json
                          : arg == "--title" ? &a.title
                                             : nullptr;
    if (target != nullptr) {
      if (i + 1 >= argc) {
        problem = arg + " needs a value";
        return false;
      }
      *target = argv[++i];
    } else if (arg.starts_with("-") && arg != "-") {
      problem = "unknown option " + arg;
      return false;
    } else {
      a.inputs.push_back(arg);
    }
  }
  if (a.inputs.empty()) problem = "no input given";
  return !a.inputs.empty();
}

StatusOr<chorus::trace::Summary> summary_of(const std::vector<std::string>& inputs) {
  StatusOr<std::vector<chorus::JsonValue>> events = chorus::trace::load_events(inputs);
  if (!events.ok()) return events.status();
  return chorus::trace::summarize(chorus::trace::spans_of(*events));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage("no command given");
  const std::string command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") return usage(nullptr);
  if (command != "merge" && command != "summary" && command != "plot" && command != "stall" &&
      command != "autotune") {
    return usage(("unknown command " + command).c_str());
  }
  Args a;
  std::string problem;
  if (!parse(argc, argv, a, problem)) return usage(problem.c_str());
  if (command == "merge") {
    if (a.output.empty()) return usage("merge needs -o OUT.json");
    if (Status s = chorus::trace::merge(a.inputs, a.output); !s.ok()) return failed(s);
    std::printf("chorus-trace: merged %zu file(s) into %s\n", a.inputs.size(), a.output.c_str());
    return 0;
  }
  if (command == "summary") {
    StatusOr<chorus::trace::Summary> s = summary_of(a.inputs);
    if (!s.ok()) return failed(s.status());
    std::fputs(chorus::trace::summary_text(*s).c_str(), stdout);
    if (!a.json.empty()) {
      if (Status w = chorus::trace::write_text(a.json, chorus::trace::summary_json(*s)); !w.ok()) {
        return failed(w);
      }
    }
    return 0;
  }
  if (command == "plot") {
    if (a.output.empty()) return usage("plot needs -o OUT.png");
    StatusOr<chorus::trace::Summary> s = summary_of(a.inputs);
    if (!s.ok()) return failed(s.status());
    if (Status p = chorus::trace::plot(*s, a.output, a.title); !p.ok()) return failed(p);
    std::printf("chorus-trace: wrote %s\n", a.output.c_str());
    return 0;
  }
  if (command == "autotune") {
    if (a.inputs.size() != 1) return usage("autotune takes one log");
    StatusOr<std::string> chart = chorus::trace::autotune_chart_of(a.inputs.front());
    if (!chart.ok()) return failed(chart.status());
    std::fputs(chart->c_str(), stdout);
    return 0;
  }
  // stall, the command left
  if (a.inputs.size() != 1) return usage("stall takes one directory");
  StatusOr<chorus::trace::StallReport> r = chorus::trace::stall_report(a.inputs.front());
  if (!r.ok()) return failed(r.status());
  std::fputs(chorus::trace::stall_text(*r).c_str(), stdout);
  return 0;
}
