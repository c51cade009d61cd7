// What the always-on flight recorder (core/flight_recorder.h) adds to each collective: one
// record() per finished collective, against the allreduce it rides on (allreduce_bench's
// latency case: milliseconds across fake hosts, tens of microseconds on one host), and what
// writing the whole ring to a file costs when something goes wrong.
#include <benchmark/benchmark.h>

#include <string>

#include "core/flight_recorder.h"

namespace chorus {
namespace {

// A gradient's name, as a trainer names them.
Request gradient() {
  Request q;
  q.name = "module.encoder.layers.11.attention.output.dense.weight";
  q.shape = {1024, 1024};
  return q;
}

// The runtime's ring, wrapped once: the steady state of a long job.
void fill(FlightRecorder& f, const Request& q) {
  const auto t = FlightRecorder::Clock::now();
  for (std::size_t i = 0; i < FlightRecorder::kCapacity; ++i) {
    f.record(0, q, t, t, t, StatusCode::kOk);
  }
}

void BM_Record(benchmark::State& state) {
  FlightRecorder f(0, FlightRecorder::kCapacity);
  const Request q = gradient();
  fill(f, q);
  const auto t = FlightRecorder::Clock::now();
  for (auto _ : state) {
    f.record(0, q, t, t, t, StatusCode::kOk);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Record);

void BM_WriteFullRing(benchmark::State& state) {
  FlightRecorder f(0, FlightRecorder::kCapacity);
  fill(f, gradient());
  for (auto _ : state) {
    Status s = f.write("/tmp", "bench", {}, {}, {});
    if (!s.ok()) state.SkipWithError(s.message().c_str());
  }
}
BENCHMARK(BM_WriteFullRing)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace chorus
