// Each case runs an op on CUDA tensors and the same op on host tensors (the MPI path,
// Chorus's reference), and requires the same bytes: every value is a small integer, so every
// op here is exact in every dtype, and the two paths must agree bit for bit. Part of
// gpu_collectives_test: on the GPU path of ranks sharing one GPU (MPI), of one rank (NCCL),
// and of 2-4 ranks sharing it over NCCL (run_multirank.sh, CHORUS_TEST_SHARED_GPU=1), where
// NCCL moves data between ranks. Skips without a GPU.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../mpi/test_data.h"
#include "chorus/chorus.h"
#include "gpu_test_util.h"

namespace chorus::testing {
namespace {

int my_device() {
  int n = 0;
  cudaGetDeviceCount(&n);
  return n == 0 ? 0 : local_rank() % n;
}

Buffer make_buffer(DataType t, std::vector<int64_t> shape, int rank, int salt = 0) {
  Buffer b(t, std::move(shape));
  for (int64_t i = 0; i < b.count(); ++i) b.set(i, value(t, rank + salt, i));
  return b;
}

// A host tensor's copy in device memory (uploaded before the call: ready on stream 0).
struct OnGpu {
  explicit OnGpu(const Buffer& b) : dtype(b.dtype), shape(b.shape), dev(b.bytes.size()) {
    cudaSetDevice(my_device());
    dev.upload(b.bytes.data(), b.bytes.size());
  }
  TensorRef ref() const { return {dev.data(), dtype, shape, Device::cuda(my_device())}; }
  DataType dtype;
  std::vector<int64_t> shape;
  DeviceBuffer dev;
};

// The bytes of a tensor in device or host memory.
std::vector<unsigned char> bytes_of(const TensorRef& t) {
  std::vector<unsigned char> out(t.num_bytes());
  if (t.device.is_cpu()) {
    std::memcpy(out.data(), t.data, out.size());
  } else {
    EXPECT_EQ(cudaMemcpy(out.data(), t.data, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return out;
}

// Outputs agreed later, in device or host memory as the input is.
struct Allocator {
  std::vector<std::unique_ptr<DeviceBuffer>> device;
  std::vector<std::unique_ptr<Buffer>> host;
  OutputAllocator make(DataType t, bool on_gpu) {
    return [this, t, on_gpu](const std::vector<int64_t>& shape) -> StatusOr<TensorRef> {
      if (!on_gpu) {
        host.push_back(std::make_unique<Buffer>(t, shape));
        return host.back()->ref();
      }
      TensorRef r{nullptr, t, shape, Device::cuda(my_device())};
      device.push_back(std::make_unique<DeviceBuffer>(r.num_bytes()));
      r.data = device.back()->data();
      return r;
    };
  }
};

std::string tag(const char* what, DataType t, bool on_gpu) {
  return std::string("multirank.") + what + "." + dtype_name(t) + (on_gpu ? ".gpu" : ".host");
}

TEST(GpuReference, AllreduceEveryOpAndDtypeMatchesTheHost) {
  CHORUS_REQUIRE_GPU();
  for (DataType t : all_dtypes()) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + reduce_op_name(op));
      Buffer host = make_buffer(t, {41, 3}, rank());
      OnGpu gpu(host);
      const std::string name = std::string(reduce_op_name(op)) + ".";
      ASSERT_TRUE(
          allreduce(tag("allreduce", t, true) + name, gpu.ref(), gpu.ref(), {op}).wait().ok());
      ASSERT_TRUE(
          allreduce(tag("allreduce", t, false) + name, host.ref(), host.ref(), {op}).wait().ok());
      EXPECT_EQ(bytes_of(gpu.ref()), bytes_of(host.ref()));
    }
  }
}

// Average and scale factors: the float results are rounded, but by the same rule on both
// paths (the scale in the unpack kernel and in the host's reduction), and integers truncate.
TEST(GpuReference, AverageWithScaleFactorsMatchesTheHost) {
  CHORUS_REQUIRE_GPU();
  for (DataType t : {DataType::kInt32, DataType::kFloat32, DataType::kFloat64}) {
    AllreduceOptions o{ReduceOp::kAverage, 2.0, 0.5};
    Buffer host = make_buffer(t, {1000}, rank());
    OnGpu gpu(host);
    ASSERT_TRUE(allreduce(tag("average", t, true), gpu.ref(), gpu.ref(), o).wait().ok());
    ASSERT_TRUE(allreduce(tag("average", t, false), host.ref(), host.ref(), o).wait().ok());
    EXPECT_EQ(bytes_of(gpu.ref()), bytes_of(host.ref())) << dtype_name(t);
  }
}

// Adasum stages CUDA tensors through the host (collectives/adasum.h): the device path gives
// the host path's bits, fused (one group) and alone, with a postscale the unpack applies.
TEST(GpuReference, AdasumMatchesTheHostFusedAndAlone) {
  CHORUS_REQUIRE_GPU();
  for (DataType t :
       {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64}) {
    SCOPED_TRACE(dtype_name(t));
    AllreduceOptions o{ReduceOp::kAdasum, 1.0, 0.5};
    std::vector<Buffer> host;
    std::vector<std::unique_ptr<OnGpu>> gpu;
    std::vector<TensorRef> host_refs, gpu_refs;
    std::vector<std::string> host_names, gpu_names;
    for (int k = 0; k < 3; ++k) {
      host.push_back(make_buffer(t, {7 + 50 * k}, rank(), k));
      gpu.push_back(std::make_unique<OnGpu>(host.back()));
      gpu_refs.push_back(gpu.back()->ref());
      gpu_names.push_back(tag("adasum.fused", t, true) + std::to_string(k));
      host_names.push_back(tag("adasum.fused", t, false) + std::to_string(k));
    }
    for (Buffer& b : host) host_refs.push_back(b.ref());
    ASSERT_TRUE(grouped_allreduce(gpu_names, gpu_refs, gpu_refs, o).wait().ok());
    ASSERT_TRUE(grouped_allreduce(host_names, host_refs, host_refs, o).wait().ok());
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(bytes_of(gpu_refs[k]), bytes_of(host_refs[k])) << "fused tensor " << k;
      Buffer alone = make_buffer(t, {7 + 50 * k}, rank(), k);
      OnGpu alone_gpu(alone);
      const std::string name = tag("adasum.alone", t, true) + std::to_string(k);
      ASSERT_TRUE(allreduce(name, alone_gpu.ref(), alone_gpu.ref(), o).wait().ok());
      EXPECT_EQ(bytes_of(alone_gpu.ref()), bytes_of(host_refs[k])) << "tensor " << k << " alone";
    }
  }
}

TEST(GpuReference, BroadcastFromEveryRoot) {
  CHORUS_REQUIRE_GPU();
  for (int root = 0; root < size(); ++root) {
    OnGpu gpu(make_buffer(DataType::kFloat16, {33}, rank()));
    ASSERT_TRUE(broadcast("multirank.bcast." + std::to_string(root), gpu.ref(), root).wait().ok());
    Buffer want = make_buffer(DataType::kFloat16, {33}, root);
    EXPECT_EQ(bytes_of(gpu.ref()), bytes_of(want.ref())) << "root " << root;
  }
}

// Uneven first dimensions in one group, so NCCL's per-block path runs (equal blocks take
// ncclAllGather / ncclReduceScatter, which the single ops below cover).
TEST(GpuReference, GroupedUnevenAllgatherAndReducescatterMatchTheHost) {
  CHORUS_REQUIRE_GPU();
  const int n = size(), me = rank();
  std::vector<std::vector<unsigned char>> results[2];
  for (int path = 0; path < 2; ++path) {
    const bool on_gpu = path == 0;
    Allocator alloc;
    std::vector<Buffer> hosts;
    std::vector<std::unique_ptr<OnGpu>> gpus;
    std::vector<TensorRef> refs;
    std::vector<std::string> names;
    GroupedAllgatherOptions go;
    const DataType types[] = {DataType::kInt16, DataType::kBFloat16, DataType::kInt64};
    for (int k = 0; k < 3; ++k) {
      hosts.push_back(make_buffer(types[k], {me + 1 + k, 2 + k}, me, k));
      gpus.push_back(std::make_unique<OnGpu>(hosts.back()));
      refs.push_back(on_gpu ? gpus.back()->ref() : hosts.back().ref());
      names.push_back(tag("gathered", types[k], on_gpu) + std::to_string(k));
      go.allocate.push_back(alloc.make(types[k], on_gpu));
    }
    Handle g = grouped_allgather(names, refs, go);
    ASSERT_TRUE(g.wait().ok()) << g.status().to_string();
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(g.output(k).shape[0], n * (n + 1) / 2 + n * k);
      results[path].push_back(bytes_of(g.output(k)));
    }
    // Reducescatter of 2n + 1 + k rows: the first ranks get one row more.
    refs.clear();
    names.clear();
    std::vector<Buffer> inputs;
    std::vector<std::unique_ptr<OnGpu>> device_inputs;
    GroupedReducescatterOptions ro;
    ro.op = ReduceOp::kSum;
    for (int k = 0; k < 3; ++k) {
      inputs.push_back(make_buffer(types[k], {2 * n + 1 + k, 3}, me, k));
      device_inputs.push_back(std::make_unique<OnGpu>(inputs.back()));
      refs.push_back(on_gpu ? device_inputs.back()->ref() : inputs.back().ref());
      names.push_back(tag("scattered", types[k], on_gpu) + std::to_string(k));
      ro.allocate.push_back(alloc.make(types[k], on_gpu));
    }
    Handle r = grouped_reducescatter(names, refs, ro);
    ASSERT_TRUE(r.wait().ok()) << r.status().to_string();
    for (int k = 0; k < 3; ++k) results[path].push_back(bytes_of(r.output(k)));
  }
  EXPECT_EQ(results[0], results[1]);
}

// Rank q sends (q + p) % 3 rows to rank p: uneven, some empty.
TEST(GpuReference, AlltoallWithSplitsMatchesTheHost) {
  CHORUS_REQUIRE_GPU();
  const int n = size(), me = rank();
  std::vector<int64_t> splits;
  int64_t rows = 0;
  for (int p = 0; p < n; ++p) {
    splits.push_back((me + p) % 3);
    rows += splits.back();
  }
  std::vector<unsigned char> got[2];
  std::vector<int64_t> received[2];
  for (int path = 0; path < 2; ++path) {
    const bool on_gpu = path == 0;
    Allocator alloc;
    Buffer host = make_buffer(DataType::kUInt8, {rows, 5}, me);
    OnGpu gpu(host);
    AlltoallOptions o;
    o.allocate = alloc.make(DataType::kUInt8, on_gpu);
    Handle h = alltoall(tag("alltoall", DataType::kUInt8, on_gpu), on_gpu ? gpu.ref() : host.ref(),
                        splits, o);
    ASSERT_TRUE(h.wait().ok()) << h.status().to_string();
    got[path] = bytes_of(h.output());
    received[path] = h.received_splits();
  }
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(received[0], received[1]);
}

// Two process sets, each with its own NCCL communicator, used in turn and interleaved with
// the global set's.
TEST(GpuReference, ProcessSetsHaveTheirOwnCommunicators) {
  CHORUS_REQUIRE_GPU();
  const int n = size(), me = rank();
  if (n < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<int> evens, odds;
  for (int r = 0; r < n; ++r) (r % 2 ? odds : evens).push_back(r);
  StatusOr<ProcessSet> even = add_process_set(evens);
  StatusOr<ProcessSet> odd = add_process_set(odds);
  ASSERT_TRUE(even.ok() && odd.ok());
  const ProcessSet mine = me % 2 ? *odd : *even;
  for (int round = 0; round < 3; ++round) {
    Buffer host = make_buffer(DataType::kFloat32, {257}, me, round);
    OnGpu gpu(host);
    AllreduceOptions o{ReduceOp::kSum};
    o.process_set = mine;
    const std::string r = std::to_string(round);
    ASSERT_TRUE(allreduce("multirank.set.gpu." + r, gpu.ref(), gpu.ref(), o).wait().ok());
    ASSERT_TRUE(allreduce("multirank.set.host." + r, host.ref(), host.ref(), o).wait().ok());
    EXPECT_EQ(bytes_of(gpu.ref()), bytes_of(host.ref())) << "round " << round;
    OnGpu everyone(make_buffer(DataType::kInt32, {9}, me, round));
    ASSERT_TRUE(allreduce("multirank.global." + r, everyone.ref(), everyone.ref(), {ReduceOp::kMax})
                    .wait()
                    .ok());
  }
  ASSERT_TRUE(remove_process_set(*odd).ok());
  ASSERT_TRUE(remove_process_set(*even).ok());
}

}  // namespace
}  // namespace chorus::testing
