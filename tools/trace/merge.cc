#include "merge.h"

#include <algorithm>

#include "trace_events.h"

namespace chorus::trace {
namespace {

bool is_metadata(const JsonValue& e) { return string_member(e, "ph") == "M"; }

}  // namespace

void merge_events(std::vector<JsonValue>& events) {
  std::stable_sort(events.begin(), events.end(), [](const JsonValue& a, const JsonValue& b) {
    const bool ma = is_metadata(a), mb = is_metadata(b);
    if (ma != mb) return ma;
    return !ma && integer_member(a, "ts") < integer_member(b, "ts");
  });
  const std::vector<Span> spans = spans_of(events);
  // spans[i] is the i-th complete event of `events`.
  std::vector<JsonValue*> complete;
  for (JsonValue& e : events) {
    if (string_member(e, "ph") == "X") complete.push_back(&e);
  }
  for (const std::vector<std::size_t>& group : negotiations(spans)) {
    if (group.size() < 2) continue;
    const int last = spans[last_submitted(spans, group)].rank;
    for (std::size_t i : group) {
      JsonValue* args = complete[i]->find("args");
      if (args == nullptr) {
        complete[i]->set("args", JsonValue::object());
        args = complete[i]->find("args");
      }
      args->set("last_rank", JsonValue::integer(last));
    }
  }
}

std::string trace_text(const std::vector<JsonValue>& events) {
  std::string out = "[";
  for (std::size_t i = 0; i < events.size(); ++i) {
    out += i ? ",\n" : "\n";
    append_json(out, events[i]);
  }
  out += "\n]\n";
  return out;
}

Status merge(const std::vector<std::string>& inputs, const std::string& output) {
  StatusOr<std::vector<JsonValue>> events = load_events(inputs);
  if (!events.ok()) return events.status();
  merge_events(*events);
  return write_text(output, trace_text(*events));
}

}  // namespace chorus::trace
