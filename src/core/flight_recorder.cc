#include "core/flight_recorder.h"

#include <cstdio>
#include <cstring>

#include "base/file_io.h"
#include "base/json.h"

namespace chorus {
namespace {

int64_t wall_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void append_record(std::string& out, const FlightRecord& r) {
  out += "{\"set\":" + std::to_string(r.set_id) + ",\"name\":";
  append_json_string(out, r.name);
  out += std::string(",\"op\":\"") + op_type_name(r.op) + "\",\"dtype\":\"" + dtype_name(r.dtype) +
         "\",\"bytes\":" + std::to_string(r.bytes) +
         ",\"submitted_us\":" + std::to_string(r.submitted_us) +
         ",\"agreed_us\":" + std::to_string(r.agreed_us) +
         ",\"done_us\":" + std::to_string(r.done_us) + ",\"status\":\"" +
         status_code_name(r.status) + "\"}";
}

void append_records(std::string& out, const char* key, const std::vector<FlightRecord>& records) {
  out += ",\n\"";
  out += key;
  out += "\":[";
  for (std::size_t i = 0; i < records.size(); ++i) {
    out += i ? ",\n  " : "\n  ";
    append_record(out, records[i]);
  }
  out += "]";
}

Status os_error(const std::string& what, const std::string& path, int err) {
  return Status(StatusCode::kInternal,
                "flight record: " + what + " " + path + ": " + std::strerror(err));
}

}  // namespace

FlightRecorder::FlightRecorder(int rank, std::size_t capacity)
    : rank_(rank),
      ring_(capacity > 0 ? capacity : 1),
      steady_origin_(Clock::now()),
      wall_origin_us_(wall_now_us()) {}

int64_t FlightRecorder::wall_us(Clock::time_point t) const {
  if (t == Clock::time_point{}) return 0;
  return wall_origin_us_ +
         std::chrono::duration_cast<std::chrono::microseconds>(t - steady_origin_).count();
}

void FlightRecorder::record(int32_t set_id, const Request& request, Clock::time_point submitted,
                            Clock::time_point agreed, Clock::time_point done, StatusCode status) {
  FlightRecord& r = ring_[next_];
  r.set_id = set_id;
  r.name.assign(request.name);
  r.op = request.op;
  r.dtype = request.dtype;
  r.bytes = num_elements(request.shape) * static_cast<int64_t>(dtype_size(request.dtype));
  r.submitted_us = wall_us(submitted);
  r.agreed_us = wall_us(agreed);
  r.done_us = wall_us(done);
  r.status = status;
  next_ = (next_ + 1) % ring_.size();
  if (count_ < ring_.size()) ++count_;
}

std::vector<FlightRecord> FlightRecorder::records() const {
  std::vector<FlightRecord> out;
  out.reserve(count_);
  const std::size_t first = (next_ + ring_.size() - count_) % ring_.size();
  for (std::size_t i = 0; i < count_; ++i) out.push_back(ring_[(first + i) % ring_.size()]);
  return out;
}

std::string flight_json(int rank, const std::string& reason, int64_t now_us, const SetMembers& sets,
                        const std::vector<FlightRecord>& records,
                        const std::vector<FlightRecord>& outstanding,
                        const std::vector<std::string>& stall_lines) {
  std::string out = "{\"rank\":" + std::to_string(rank) + ",\"reason\":";
  append_json_string(out, reason);
  out += ",\"time_us\":" + std::to_string(now_us);
  out += ",\n\"sets\":[";
  for (auto it = sets.begin(); it != sets.end(); ++it) {
    out += it == sets.begin() ? "\n  " : ",\n  ";
    out += "{\"id\":" + std::to_string(it->first) + ",\"ranks\":[";
    for (std::size_t i = 0; i < it->second.size(); ++i) {
      out += (i ? "," : "") + std::to_string(it->second[i]);
    }
    out += "]}";
  }
  out += "]";
  append_records(out, "records", records);
  append_records(out, "outstanding", outstanding);
  out += ",\n\"stall_lines\":[";
  for (std::size_t i = 0; i < stall_lines.size(); ++i) {
    if (i) out += ",";
    out += "\n  ";
    append_json_string(out, stall_lines[i]);
  }
  out += "]}\n";
  return out;
}

Status FlightRecorder::write(const std::string& dir, const std::string& reason,
                             const SetMembers& sets, const std::vector<FlightRecord>& outstanding,
                             const std::vector<std::string>& stall_lines) const {
  const std::string path = dir + "/chorus-flight.rank" + std::to_string(rank_) + ".json";
  const std::string text =
      flight_json(rank_, reason, wall_now_us(), sets, records(), outstanding, stall_lines);
  if (int err = replace_file(path, text); err != 0) return os_error("cannot write", path, err);
  return {};
}

}  // namespace chorus
