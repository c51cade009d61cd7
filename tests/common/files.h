#pragma once
// What the whole-job test programs (mpi/scenarios, faults/faults) read back: a file's whole
// text, and the path of this rank's flight record under CHORUS_DEBUG_DIR
// (core/flight_recorder.h).

#include <cstdio>
#include <cstdlib>
#include <string>

#include "chorus/chorus.h"

namespace chorus::testing {

/// The whole text of `path`; empty when it cannot be read.
inline std::string read_file(const std::string& path) {
  std::string out;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

/// This rank's flight record: CHORUS_DEBUG_DIR (default: the working directory), then
/// chorus-flight.rank<R>.json. Call it while Chorus runs (it asks for the rank).
inline std::string flight_record_path() {
  const char* dir = std::getenv("CHORUS_DEBUG_DIR");
  return std::string(dir ? dir : ".") + "/chorus-flight.rank" + std::to_string(rank()) + ".json";
}

}  // namespace chorus::testing
