// Collectives on CUDA tensors through the public API, under mpirun. One rank: NCCL. Two to
// four ranks on one GPU: NCCL refuses a shared GPU, so Chorus takes the MPI path, staged
// through host memory — the MPS pattern. Data are small integers, exact in
// every dtype. Skips on machines without a GPU (run_gpu.sh, and GTEST_SKIP here).

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>

#include "../mpi/test_data.h"
#include "chorus/chorus.h"
#include "gpu_test_util.h"

namespace chorus::testing {
namespace {

Buffer make_buffer(DataType t, std::vector<int64_t> shape, int rank) {
  Buffer b(t, std::move(shape));
  for (int64_t i = 0; i < b.count(); ++i) b.set(i, value(t, rank, i));
  return b;
}

// `v` stored into the dtype and read back (wraps integers, rounds floats).
double as_stored(DataType t, double v) {
  Buffer one(t, {1});
  one.set(0, v);
  return one.at(0);
}

int my_device() {
  int n = 0;
  cudaGetDeviceCount(&n);
  return n == 0 ? 0 : local_rank() % n;
}

// A Buffer's bytes on this rank's GPU, produced on a stream of its own: Chorus must order
// its reads after that stream's work (ready_stream). The upload reads `host`, which lives
// as long as the tensor: a driver may read pageable memory after cudaMemcpyAsync returns,
// so the caller's Buffer (often a temporary) is no source for it.
struct GpuTensor {
  explicit GpuTensor(const Buffer& b) : host(b), dev(b.bytes.size()) {
    cudaSetDevice(my_device());
    cudaStreamCreate(&stream);
    cudaMemcpyAsync(dev.data(), host.bytes.data(), host.bytes.size(), cudaMemcpyHostToDevice,
                    stream);
  }
  ~GpuTensor() { cudaStreamDestroy(stream); }
  TensorRef ref() {
    TensorRef t{dev.data(), host.dtype, host.shape, Device::cuda(my_device())};
    t.ready_stream = stream;
    return t;
  }
  Buffer back() {
    Buffer b = host;
    const cudaError_t rc =
        cudaMemcpy(b.bytes.data(), dev.data(), b.bytes.size(), cudaMemcpyDeviceToHost);
    EXPECT_EQ(rc, cudaSuccess) << cudaGetErrorString(rc);
    return b;
  }
  Buffer host;
  DeviceBuffer dev;
  cudaStream_t stream = nullptr;
};

// Outputs agreed later (allgather, alltoall, reducescatter) in device memory.
struct DeviceAllocator {
  std::shared_ptr<std::vector<std::unique_ptr<DeviceBuffer>>> kept =
      std::make_shared<std::vector<std::unique_ptr<DeviceBuffer>>>();
  OutputAllocator make(DataType t) {
    return [kept = kept, t](const std::vector<int64_t>& shape) -> StatusOr<TensorRef> {
      TensorRef r{nullptr, t, shape, Device::cuda(my_device())};
      kept->push_back(std::make_unique<DeviceBuffer>(r.num_bytes()));
      r.data = kept->back()->data();
      return r;
    };
  }
};

constexpr DataType kAll[] = {DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
                             DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                             DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};

TEST(GpuCollectives, AllreduceSumEveryDtype) {
  CHORUS_REQUIRE_GPU();
  const int n = size();
  for (DataType t : kAll) {
    Buffer in = make_buffer(t, {37, 3}, rank());
    GpuTensor g(in);
    ASSERT_TRUE(
        allreduce("gpu.sum." + std::string(dtype_name(t)), g.ref(), g.ref(), {ReduceOp::kSum})
            .wait()
            .ok());
    Buffer out = g.back();
    for (int64_t i = 0; i < out.count(); ++i) {
      double want = 0;
      for (int r = 0; r < n; ++r) want += value(t, r, i);
      ASSERT_EQ(out.at(i), as_stored(t, want)) << dtype_name(t) << " element " << i;
    }
  }
}

TEST(GpuCollectives, FusedAverageOfManyTensors) {
  CHORUS_REQUIRE_GPU();
  std::vector<std::unique_ptr<GpuTensor>> ts;
  std::vector<TensorRef> refs;
  std::vector<std::string> names;
  for (int i = 0; i < 120; ++i) {
    ts.push_back(
        std::make_unique<GpuTensor>(make_buffer(DataType::kFloat32, {1 + i % 17}, rank())));
    refs.push_back(ts.back()->ref());
    names.push_back("gpu.fused." + std::to_string(i));
  }
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  o.postscale = 0.5;
  ASSERT_TRUE(grouped_allreduce(names, refs, refs, o).wait().ok());
  for (auto& t : ts) {
    Buffer out = t->back();
    for (int64_t i = 0; i < out.count(); ++i) {
      double want = 0;
      for (int r = 0; r < size(); ++r) want += value(DataType::kFloat32, r, i);
      ASSERT_EQ(out.at(i), static_cast<double>(static_cast<float>(want) * 0.5f));
    }
  }
}

// The elements of a device output, read back (a Buffer holds one byte more than them).
Buffer read_back(const TensorRef& t) {
  Buffer b(t.dtype, t.shape);
  const cudaError_t rc = cudaMemcpy(b.bytes.data(), t.data, t.num_bytes(), cudaMemcpyDeviceToHost);
  if (rc != cudaSuccess) {
    cudaPointerAttributes a{};
    const cudaError_t q = cudaPointerGetAttributes(&a, t.data);
    ADD_FAILURE() << "reading " << t.num_bytes() << " bytes at " << t.data << ": "
                  << cudaGetErrorString(rc) << "; CUDA sees memory of type " << a.type
                  << " on device " << a.device << " (" << cudaGetErrorString(q) << ")";
  }
  return b;
}

TEST(GpuCollectives, BroadcastAllgatherAlltoallReducescatter) {
  CHORUS_REQUIRE_GPU();
  const int n = size(), me = rank();
  const DataType t = DataType::kInt32;
  GpuTensor b(make_buffer(t, {10}, me));
  ASSERT_TRUE(broadcast("gpu.bcast", b.ref(), n - 1).wait().ok());
  EXPECT_EQ(b.back().bytes, make_buffer(t, {10}, n - 1).bytes);

  // Allgather, uneven first dimension: rank r gives r + 1 rows of make_buffer(t, ., r).
  DeviceAllocator alloc;
  GpuTensor ag(make_buffer(t, {me + 1, 2}, me));
  AllgatherOptions go;
  go.allocate = alloc.make(t);
  Handle h = allgather("gpu.allgather", ag.ref(), go);
  ASSERT_TRUE(h.wait().ok()) << h.status().to_string();
  ASSERT_EQ(h.output().shape, (std::vector<int64_t>{n * (n + 1) / 2, 2}));
  ASSERT_EQ(h.output().data, static_cast<void*>(alloc.kept->back()->data()))
      << "the output is not the memory the allocator gave";
  Buffer gathered = read_back(h.output());
  int64_t at = 0;
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < 2 * (r + 1); ++i, ++at) {
      ASSERT_EQ(gathered.at(at), value(t, r, i)) << "from rank " << r << " element " << i;
    }
  }

  // Alltoall, equal splits: rank q's row me comes to this rank as row q.
  GpuTensor a2a(make_buffer(t, {n, 3}, me));
  AlltoallOptions ao;
  ao.allocate = alloc.make(t);
  Handle ah = alltoall("gpu.alltoall", a2a.ref(), {}, ao);
  ASSERT_TRUE(ah.wait().ok()) << ah.status().to_string();
  ASSERT_EQ(ah.output().shape, (std::vector<int64_t>{n, 3}));
  Buffer swapped = read_back(ah.output());
  for (int q = 0; q < n; ++q) {
    for (int64_t j = 0; j < 3; ++j) {
      ASSERT_EQ(swapped.at(q * 3 + j), value(t, q, me * 3 + j)) << "from rank " << q;
    }
  }

  // Reducescatter of 2n + 1 rows: rank 0 gets 3 rows, the others 2; each the sum.
  GpuTensor rs(make_buffer(t, {2 * n + 1, 2}, me));
  ReducescatterOptions ro;
  ro.op = ReduceOp::kSum;
  ro.allocate = alloc.make(t);
  Handle rh = reducescatter("gpu.reducescatter", rs.ref(), ro);
  ASSERT_TRUE(rh.wait().ok()) << rh.status().to_string();
  const int64_t rows = 2 + (me < 1 ? 1 : 0);
  ASSERT_EQ(rh.output().shape, (std::vector<int64_t>{rows, 2}));
  const int64_t first_row = me == 0 ? 0 : 3 + 2 * (me - 1);
  Buffer mine = read_back(rh.output());
  for (int64_t i = 0; i < rows * 2; ++i) {
    double want = 0;
    for (int q = 0; q < n; ++q) want += value(t, q, first_row * 2 + i);
    ASSERT_EQ(mine.at(i), want) << "element " << i;
  }
}

// Average with a prescale, fused (many tensors) and alone, on float32 and int32: the
// scaling folded into the kernels must match the CPU semantics (float: times
// postscale / size in float; integers: truncating division).
// reduce on CUDA tensors: every root; the root's output against the sum, the others' output
// and every input left as they were; in place with scaling, the root's bits are those of
// the allreduce of the same tensor on this path.
TEST(GpuCollectives, ReduceToEveryRoot) {
  CHORUS_REQUIRE_GPU();
  const int n = size(), me = rank();
  for (DataType t : {DataType::kInt32, DataType::kFloat32, DataType::kBFloat16}) {
    for (int root = 0; root < n; ++root) {
      const std::string what = std::string(dtype_name(t)) + " root " + std::to_string(root);
      GpuTensor in(make_buffer(t, {41}, me));
      Buffer sentinel(t, {41});
      for (int64_t i = 0; i < 41; ++i) sentinel.set(i, 7);
      GpuTensor out(sentinel);
      ReduceOptions o;
      o.op = ReduceOp::kSum;
      Status st = reduce("gpu.reduce." + what, in.ref(), out.ref(), root, o).wait();
      ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
      EXPECT_EQ(in.back().bytes, make_buffer(t, {41}, me).bytes) << what << ": input written";
      Buffer got = out.back();
      for (int64_t i = 0; i < 41; ++i) {
        double want = 7;
        if (me == root) {
          want = 0;
          for (int r = 0; r < n; ++r) want += value(t, r, i);
        }
        ASSERT_EQ(got.at(i), as_stored(t, want)) << what << " element " << i;
      }
    }
  }
  Buffer rounding(DataType::kFloat32, {1001});
  for (int64_t i = 0; i < 1001; ++i) rounding.set(i, 1.0 / (3 + me + (i % 89)));
  GpuTensor mine(rounding), all(rounding);
  ReduceOptions o;
  o.op = ReduceOp::kAverage;
  o.prescale = 0.7;
  o.postscale = 3.0;
  ASSERT_TRUE(reduce("gpu.reduce.bits", mine.ref(), mine.ref(), n - 1, o).wait().ok());
  ASSERT_TRUE(allreduce("gpu.allreduce.bits", all.ref(), all.ref(), o).wait().ok());
  if (me == n - 1) {
    EXPECT_EQ(mine.back().bytes, all.back().bytes) << "reduce and allreduce differ on the root";
  } else {
    EXPECT_EQ(mine.back().bytes, rounding.bytes) << "a rank other than the root was written";
  }
}

TEST(GpuCollectives, AveragePrescaleFusedAndAlone) {
  CHORUS_REQUIRE_GPU();
  const int n = size();
  for (DataType t : {DataType::kFloat32, DataType::kInt32}) {
    for (int tensors : {1, 9}) {
      std::vector<std::unique_ptr<GpuTensor>> ts;
      std::vector<TensorRef> refs;
      std::vector<std::string> names;
      for (int i = 0; i < tensors; ++i) {
        ts.push_back(std::make_unique<GpuTensor>(make_buffer(t, {3 + i}, rank())));
        refs.push_back(ts.back()->ref());
        names.push_back("gpu.avg." + std::string(dtype_name(t)) + "." + std::to_string(tensors) +
                        "." + std::to_string(i));
      }
      AllreduceOptions o;
      o.op = ReduceOp::kAverage;
      o.prescale = 2.0;
      Status st = tensors == 1 ? allreduce(names[0], refs[0], refs[0], o).wait()
                               : grouped_allreduce(names, refs, refs, o).wait();
      ASSERT_TRUE(st.ok()) << st.to_string();
      for (auto& g : ts) {
        Buffer out = g->back();
        for (int64_t i = 0; i < out.count(); ++i) {
          double sum = 0;
          for (int r = 0; r < n; ++r) sum += 2.0 * value(t, r, i);
          const double want =
              t == DataType::kInt32
                  ? static_cast<double>(static_cast<int64_t>(sum) / n)
                  : static_cast<double>(static_cast<float>(sum) * static_cast<float>(1.0 / n));
          ASSERT_EQ(out.at(i), want) << dtype_name(t) << " tensors " << tensors << " i " << i;
        }
      }
    }
  }
}

// The last rank joins at once; the others allreduce a CUDA tensor (alone, then fused) to
// which the joined rank contributes zeros from its own GPU.
TEST(GpuCollectives, JoinedRankContributesZeros) {
  CHORUS_REQUIRE_GPU();
  const int n = size();
  if (n < 2) GTEST_SKIP() << "needs two ranks";
  const bool joined = rank() == n - 1;
  Handle j;
  if (joined) j = join();
  if (!joined) {
    for (int tensors : {1, 4}) {
      std::vector<std::unique_ptr<GpuTensor>> ts;
      std::vector<TensorRef> refs;
      std::vector<std::string> names;
      for (int i = 0; i < tensors; ++i) {
        ts.push_back(std::make_unique<GpuTensor>(make_buffer(DataType::kFloat32, {5}, rank())));
        refs.push_back(ts.back()->ref());
        names.push_back("gpu.join." + std::to_string(tensors) + "." + std::to_string(i));
      }
      AllreduceOptions o;
      o.op = ReduceOp::kSum;
      Status st = tensors == 1 ? allreduce(names[0], refs[0], refs[0], o).wait()
                               : grouped_allreduce(names, refs, refs, o).wait();
      ASSERT_TRUE(st.ok()) << st.to_string();
      for (auto& g : ts) {
        Buffer out = g->back();
        for (int64_t i = 0; i < out.count(); ++i) {
          double want = 0;
          for (int r = 0; r < n - 1; ++r) want += value(DataType::kFloat32, r, i);
          ASSERT_EQ(out.at(i), want);
        }
      }
    }
    j = join();
  }
  ASSERT_TRUE(j.wait().ok()) << j.status().to_string();
}

TEST(GpuCollectives, CallerEventIsHonoured) {
  CHORUS_REQUIRE_GPU();
  GpuTensor g(make_buffer(DataType::kFloat32, {4096}, rank()));
  cudaEvent_t ev;
  CHORUS_CUDA_OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  CHORUS_CUDA_OK(cudaEventRecord(ev, g.stream));
  TensorRef r = g.ref();
  r.ready_stream = nullptr;
  r.ready_event = ev;
  ASSERT_TRUE(allreduce("gpu.event", r, r, {ReduceOp::kMax}).wait().ok());
  Buffer out = g.back();
  for (int64_t i = 0; i < out.count(); ++i) {
    double want = value(DataType::kFloat32, 0, i);
    for (int q = 1; q < size(); ++q) want = std::max(want, value(DataType::kFloat32, q, i));
    ASSERT_EQ(out.at(i), want);
  }
  cudaEventDestroy(ev);
}

}  // namespace
}  // namespace chorus::testing
