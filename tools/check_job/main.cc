// chorus-check-job: what `chorusrun --check-job` starts on every rank of a job. Each rank says
// where it runs (host, local rank, the CPUs it may use and their NUMA nodes, its GPU); rank 0
// prints one table with the MPI library and NCCL versions; then the ranks time a 1 MiB
// allreduce on each path the job will use: host memory always, CUDA memory when every rank has
// a GPU and Chorus was built with CUDA. Exits non-zero when a collective fails.
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "topology/hwloc_binding.h"

#ifdef CHORUS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace {

constexpr int kRowBytes = 512;
constexpr int kWarmups = 5;
constexpr int kTimed = 20;
constexpr int64_t kFloats = (1 << 20) / sizeof(float);

int fail(const std::string& what, const chorus::Status& s) {
  std::fprintf(stderr, "chorus-check-job: rank %d: %s: %s\n", chorus::rank(), what.c_str(),
               s.to_string().c_str());
  return 1;
}

std::string host_name() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// This rank's row: host, rank, local rank, CPUs, their NUMA nodes, GPU; '|' between cells.
std::string my_row(const chorus::StatusOr<chorus::CpuLayout>& layout) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  std::string numa = "?";
  std::string gpu = "-";
  if (layout.ok()) {
    std::set<int> nodes;
    for (const chorus::CpuCore& core : layout->cores) {
      for (int pu : core.pus) {
        if (std::find(cpus.begin(), cpus.end(), pu) != cpus.end()) nodes.insert(core.numa);
      }
    }
    numa = chorus::format_cpu_list({nodes.begin(), nodes.end()});
    const char* visible_env = std::getenv("CUDA_VISIBLE_DEVICES");
    std::optional<std::string> visible;
    if (visible_env) visible = visible_env;
    chorus::CpuLayout seen = chorus::select_gpus(
        *layout, chorus::visible_gpus(visible, static_cast<int>(layout->gpus.size())).order);
    int g = chorus::gpu_of(seen, chorus::local_rank());
    if (g >= 0) gpu = chorus::describe_gpu(seen, g);
  }
  return host_name() + "|" + std::to_string(chorus::rank()) + "|" +
         std::to_string(chorus::local_rank()) + "|" + chorus::format_cpu_list(cpus) + "|" + numa +
         "|" + gpu;
}

// Every rank's row, in rank order (rank 0 uses them).
chorus::StatusOr<std::vector<std::string>> gather_rows(const std::string& row) {
  std::vector<char> mine(kRowBytes, '\0');
  std::memcpy(mine.data(), row.data(), std::min<std::size_t>(row.size(), kRowBytes - 1));
  chorus::TensorRef in{
      mine.data(), chorus::DataType::kUInt8, {1, kRowBytes}, chorus::Device::cpu()};
  chorus::Handle h = chorus::allgather("check_job.rows", in);
  if (chorus::Status s = h.wait(); !s.ok()) return s;
  const char* all = static_cast<const char*>(h.output().data);
  std::vector<std::string> rows;
  for (int r = 0; r < chorus::size(); ++r)
    rows.emplace_back(all + static_cast<std::size_t>(r) * kRowBytes);
  return rows;
}

void print_table(const std::vector<std::string>& rows) {
  std::vector<std::vector<std::string>> cells;
  std::vector<std::size_t> width = {4, 4, 10, 4, 4, 3};
  for (const std::string& row : rows) {
    std::vector<std::string> c;
    std::size_t start = 0;
    for (std::size_t bar; (bar = row.find('|', start)) != std::string::npos; start = bar + 1) {
      c.push_back(row.substr(start, bar - start));
    }
    c.push_back(row.substr(start));
    c.resize(width.size());
    for (std::size_t i = 0; i < c.size(); ++i) width[i] = std::max(width[i], c[i].size());
    cells.push_back(c);
  }
  auto line = [&](const std::vector<std::string>& c) {
    std::string out;
    for (std::size_t i = 0; i < c.size(); ++i) {
      out += c[i] + (i + 1 < c.size() ? std::string(width[i] - c[i].size() + 2, ' ') : "");
    }
    std::printf("%s\n", out.c_str());
  };
  line({"host", "rank", "local_rank", "cpus", "numa", "gpu"});
  for (const auto& c : cells) line(c);
}

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string s(text, static_cast<std::size_t>(length));
  return s.substr(0, s.find_first_of(",\n"));
}

std::string nccl_version() {
  const int code = chorus::build_info().nccl_version_code;
  if (code == 0) return "not built in";
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100) + " built in";
}

// Times `times` allreduces of `t` after kWarmups; this rank's median in ms, or the failure.
chorus::StatusOr<double> time_allreduce(const std::string& name, const chorus::TensorRef& t) {
  chorus::AllreduceOptions sum;
  sum.op = chorus::ReduceOp::kSum;
  std::vector<double> ms;
  for (int i = 0; i < kWarmups + kTimed; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (chorus::Status s = chorus::allreduce(name, t, t, sum).wait(); !s.ok()) return s;
    std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    if (i >= kWarmups) ms.push_back(took.count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The slowest rank's value of `mine` (an allreduce with max).
chorus::StatusOr<double> slowest(const std::string& name, double mine) {
  chorus::AllreduceOptions max;
  max.op = chorus::ReduceOp::kMax;
  chorus::TensorRef t{&mine, chorus::DataType::kFloat64, {1}, chorus::Device::cpu()};
  if (chorus::Status s = chorus::allreduce(name, t, t, max).wait(); !s.ok()) return s;
  return mine;
}

// One line of the timing table; false when a collective failed.
bool report(const std::string& path, const std::string& name, const chorus::TensorRef& t) {
  chorus::StatusOr<double> median = time_allreduce(name, t);
  if (!median.ok()) {
    fail(path + " allreduce", median.status());
    return false;
  }
  chorus::StatusOr<double> worst = slowest(name + ".slowest", *median);
  if (!worst.ok()) {
    fail(path + " timing", worst.status());
    return false;
  }
  if (chorus::rank() == 0) {
    std::printf("  %-14s median %.3f ms on rank 0, %.3f ms on the slowest rank\n", path.c_str(),
                *median, *worst);
  }
  return true;
}

// Whether every rank has a CUDA device (and this build has CUDA): the GPU path is timed only
// then, so that all ranks take the same paths. `device` is this rank's.
chorus::StatusOr<bool> every_rank_has_gpu(int* device) {
  int mine = 0;
#ifdef CHORUS_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
    *device = chorus::local_rank() % count;
    mine = 1;
  }
#endif
  chorus::AllreduceOptions min;
  min.op = chorus::ReduceOp::kMin;
  chorus::TensorRef t{&mine, chorus::DataType::kInt32, {1}, chorus::Device::cpu()};
  if (chorus::Status s = chorus::allreduce("check_job.gpus", t, t, min).wait(); !s.ok()) return s;
  return mine == 1;
}

}  // namespace

int main() {
  if (chorus::Status s = chorus::init(); !s.ok()) return fail("init", s);
  chorus::StatusOr<std::vector<std::string>> rows = gather_rows(my_row(chorus::load_cpu_layout()));
  if (!rows.ok()) return fail("gathering the rows", rows.status());
  if (chorus::rank() == 0) {
    std::set<std::string> hosts;
    for (const std::string& r : *rows) hosts.insert(r.substr(0, r.find('|')));
    std::printf("Chorus %s job check: %d ranks on %zu host(s); MPI: %s; NCCL: %s\n",
                CHORUS_VERSION_STRING, chorus::size(), hosts.size(), mpi_library().c_str(),
                nccl_version().c_str());
    print_table(*rows);
    std::printf("1 MiB float32 allreduce (sum), %d times after %d warm-ups:\n", kTimed, kWarmups);
  }
  std::vector<float> host(kFloats, 1.0f);
  bool ok = report("host memory", "check_job.host",
                   {host.data(), chorus::DataType::kFloat32, {kFloats}, chorus::Device::cpu()});
  int device = -1;
  chorus::StatusOr<bool> gpus = ok ? every_rank_has_gpu(&device) : false;
  if (!gpus.ok()) {
    fail("agreeing on the GPU path", gpus.status());
    ok = false;
  } else if (*gpus) {
#ifdef CHORUS_WITH_CUDA
    void* data = nullptr;
    cudaSetDevice(device);
    if (cudaMalloc(&data, kFloats * sizeof(float)) != cudaSuccess ||
        cudaMemset(data, 0, kFloats * sizeof(float)) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
      std::fprintf(stderr, "chorus-check-job: rank %d: no 1 MiB on cuda:%d\n", chorus::rank(),
                   device);
      ok = false;
    } else {
      ok = report("CUDA memory", "check_job.cuda",
                  {data, chorus::DataType::kFloat32, {kFloats}, chorus::Device::cuda(device)});
      cudaFree(data);
    }
#endif
  } else if (ok && chorus::rank() == 0) {
    std::printf("  %-14s not timed: not every rank has a GPU, or Chorus was built without CUDA\n",
                "CUDA memory");
  }
  chorus::shutdown();
  return ok ? 0 : 1;
}
