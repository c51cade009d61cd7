#pragma once
// Whole runtimes as the ranks of one job, each a thread (in_memory_world.h), for the
// in-process tests: the job's runner and host tensors over the test's own vectors.

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "core/runtime.h"
#include "core/thread_runtime.h"
#include "in_memory_world.h"

namespace chorus::testing {

// One thread per rank, each starting its runtime over the job's world, running `body` with
// the public API bound to that runtime, and shutting it down. Returns each rank's runtime
// (stopped) for the checks after the run.
inline std::vector<std::shared_ptr<Runtime>> run_job(
    InMemoryJob& job, const std::function<void(int rank)>& body,
    const std::function<Options(int rank)>& options = [](int) { return Options(); }) {
  std::vector<std::shared_ptr<Runtime>> runtimes(static_cast<std::size_t>(job.size()));
  std::vector<std::thread> threads;
  for (int r = 0; r < job.size(); ++r) {
    threads.emplace_back([&, r] {
      StatusOr<std::shared_ptr<Runtime>> rt = Runtime::start(options(r), job.world(r));
      if (!rt.ok()) {
        ADD_FAILURE() << "rank " << r << ": start failed: " << rt.status().to_string();
        job.abort("rank " + std::to_string(r) + " did not start");
        return;
      }
      std::shared_ptr<Runtime> runtime = std::move(rt).value();
      {
        ThreadRuntime scope(runtime);
        body(r);
      }
      EXPECT_TRUE(runtime->shutdown().ok()) << "rank " << r;
      runtimes[r] = runtime;
    });
  }
  for (std::thread& t : threads) t.join();
  return runtimes;
}

inline TensorRef host_tensor(void* data, DataType dtype, std::vector<int64_t> shape) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.shape = std::move(shape);
  return t;
}

template <class T>
TensorRef tensor(std::vector<T>& v, DataType dtype, std::vector<int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  return host_tensor(v.data(), dtype, std::move(shape));
}

}  // namespace chorus::testing
