// The torch::Tensor collectives and DistributedOptimizer on CUDA tensors, under mpirun with
// 1 and 2 ranks (rank r on cuda:(local rank mod devices); ranks sharing a GPU take the MPI
// path). Integer-valued data are checked exactly; training on shards on the GPU is checked
// against one process training on the whole batch on the CPU.
//
// Skips with exit code 77 where no CUDA device is, and where one is but this LibTorch was
// built without CUDA (Debian's LibTorch): nothing here could run.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdio>

#if CHORUS_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "../mpi/mpi_gtest.h"
#include "chorus/torch.h"

namespace {

// Defined outside namespace chorus::torch, where `torch::` would name Chorus's adapter.
struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(5, 8));
    fc2 = register_module("fc2", torch::nn::Linear(8, 3));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Net);

}  // namespace

namespace chorus::torch {
namespace {

using ::torch::Tensor;

int n() { return size(); }
int me() { return rank(); }
double total() { return n() * (n() + 1) / 2.0; }  // sum of (r + 1) over the ranks

::torch::Device gpu() {
  return {::torch::kCUDA, static_cast<c10::DeviceIndex>(
                              local_rank() % static_cast<int>(::torch::cuda::device_count()))};
}

// A CPU tensor's copy on this rank's GPU.
Tensor on_gpu(const Tensor& t) { return t.to(gpu()); }

// 0..count-1 times (rank + 1) on this rank's GPU.
Tensor ramp(int64_t count, ::torch::ScalarType type, int r) {
  return on_gpu((::torch::arange(count, ::torch::kFloat64) * (r + 1)).to(type));
}

// `got` is on this rank's GPU and equals the CPU tensor `want` exactly.
::testing::AssertionResult same(const Tensor& got, const Tensor& want) {
  if (got.device() != gpu()) return ::testing::AssertionFailure() << "on " << got.device();
  if (got.scalar_type() != want.scalar_type() || got.sizes() != want.sizes()) {
    return ::testing::AssertionFailure()
           << got.scalar_type() << got.sizes() << " vs " << want.scalar_type() << want.sizes();
  }
  Tensor host = got.cpu();
  if (!::torch::equal(host.to(::torch::kFloat64), want.cpu().to(::torch::kFloat64))) {
    return ::testing::AssertionFailure() << "values\n" << host << "\nvs\n" << want;
  }
  return ::testing::AssertionSuccess();
}

TEST(TorchCudaAllreduce, SumAverageAndScaleFactors) {
  for (auto type : {::torch::kFloat32, ::torch::kInt32, ::torch::kFloat16}) {
    SCOPED_TRACE(c10::toString(type));
    Tensor got = allreduce(ramp(6, type, me()), std::string("cu.sum.") + c10::toString(type),
                           {ReduceOp::kSum});
    EXPECT_TRUE(same(got, (::torch::arange(6, ::torch::kFloat64) * total()).to(type)));
  }
  Tensor x = ramp(5, ::torch::kFloat32, me());
  // Average of (r + 1) * i: i * (n + 1) / 2; times prescale 2 and postscale 3.
  Tensor avg = allreduce(x, "cu.avg", {ReduceOp::kAverage, 2.0, 3.0});
  EXPECT_TRUE(same(avg, ::torch::arange(5, ::torch::kFloat32) * (3.0 * (n() + 1))));
  EXPECT_TRUE(same(x, ::torch::arange(5, ::torch::kFloat32) * (me() + 1)));  // untouched
  allreduce_(x, "cu.inplace", {ReduceOp::kSum, 1.0, 0.5});
  EXPECT_TRUE(same(x, ::torch::arange(5, ::torch::kFloat32) * (total() / 2)));
}

#if CHORUS_TORCH_CUDA
// A tensor produced on a side stream, not the default one: Chorus must read it after the
// work queued there (the adapter passes torch's current stream as ready_stream). 20 adds of
// 64 MiB are still running when allreduce_ is called.
TEST(TorchCudaAllreduce, OrderedAfterTheCurrentStream) {
  c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool(false, gpu().index()));
  Tensor x = ::torch::zeros({1 << 24}, ::torch::TensorOptions().device(gpu()));
  for (int i = 0; i < 20; ++i) x.add_(me() + 1);
  allreduce_(x, "cu.side.stream", {ReduceOp::kSum});
  EXPECT_TRUE(same(x, ::torch::full({1 << 24}, 20 * total(), ::torch::kFloat32)));
}
#else
TEST(TorchCudaAllreduce, AdapterKnowsThisLibTorchHasCuda) {
  FAIL() << "this LibTorch runs CUDA tensors, but CMake did not find CUDA in it "
            "(CHORUS_TORCH_CUDA): Chorus::torch orders CUDA tensors after the legacy default "
            "stream only";
}
#endif

TEST(TorchCudaAllgather, DifferentFirstDimensionsInRankOrder) {
  Tensor mine = on_gpu(::torch::full({me() + 1, 3}, me(), ::torch::kInt64));
  Tensor got = allgather(mine, "cu.gather");
  std::vector<Tensor> blocks;
  for (int r = 0; r < n(); ++r) blocks.push_back(::torch::full({r + 1, 3}, r, ::torch::kInt64));
  EXPECT_TRUE(same(got, ::torch::cat(blocks)));
}

TEST(TorchCudaBroadcast, FromTheLastRank) {
  const int root = n() - 1;
  Tensor t = ramp(7, ::torch::kFloat32, me());
  Tensor want = ::torch::arange(7, ::torch::kFloat32) * (root + 1);
  EXPECT_TRUE(same(broadcast(t, root, "cu.bcast.copy"), want));
  EXPECT_TRUE(same(t, ::torch::arange(7, ::torch::kFloat32) * (me() + 1)));
  broadcast_(t, root, "cu.bcast.inplace");
  EXPECT_TRUE(same(t, want));
}

TEST(TorchCudaAlltoall, SplitsAndReceivedSplits) {
  // Rank r sends i + 1 rows of value 100 r + i to rank i.
  std::vector<Tensor> blocks, want;
  std::vector<int64_t> splits;
  for (int i = 0; i < n(); ++i) {
    blocks.push_back(::torch::full({i + 1, 2}, 100 * me() + i, ::torch::kInt32));
    splits.push_back(i + 1);
    want.push_back(::torch::full({me() + 1, 2}, 100 * i + me(), ::torch::kInt32));
  }
  AlltoallResult got = alltoall(on_gpu(::torch::cat(blocks)), splits, "cu.a2a");
  EXPECT_TRUE(same(got.output, ::torch::cat(want)));
  EXPECT_EQ(got.received_splits, std::vector<int64_t>(n(), me() + 1));
}

TEST(TorchCudaReducescatter, BlocksOfTheSumAndTheAverage) {
  const int64_t rows = 2 * n() + 1;  // the first rank gets one row more
  const int64_t mine = me() == 0 ? 3 : 2;
  Tensor x = on_gpu(::torch::ones({rows, 3}, ::torch::kFloat32) * (me() + 1));
  EXPECT_TRUE(same(reducescatter(x, "cu.rs.sum", {ReduceOp::kSum}),
                   ::torch::full({mine, 3}, total(), ::torch::kFloat32)));
  EXPECT_TRUE(same(reducescatter(x * 2, "cu.rs.avg", {ReduceOp::kAverage}),
                   ::torch::full({mine, 3}, n() + 1, ::torch::kFloat32)));
}

// Sparse gradients on the GPU: the layouts, indices and values gathered on the device (the
// grouped allgather's outputs, allocated by the adapter), combined into one sparse tensor.
TEST(TorchCudaSparse, SumOverRanksWithDifferentNonZeros) {
  Tensor dense = ::torch::zeros({4, 2}, ::torch::kFloat32);
  Tensor sparse = on_gpu(::torch::zeros({4, 2}, ::torch::kFloat32)).to_sparse();
  if (me() > 0) {
    dense[me() % 4] = me() + 1;
    sparse = on_gpu(dense).to_sparse(1);
  }
  Tensor got = sparse_allreduce_async(sparse, "cu.sparse", {ReduceOp::kSum}).wait();
  ASSERT_TRUE(got.is_sparse());
  Tensor want = ::torch::zeros({4, 2}, ::torch::kFloat32);
  for (int r = 1; r < n(); ++r) want[r % 4] += r + 1;
  EXPECT_TRUE(same(got.to_dense(), want));
}

TEST(TorchCudaGroupedAllreduce, MixedShapesInPlaceAndNot) {
  std::vector<Tensor> ts = {ramp(3, ::torch::kFloat32, me()),
                            ramp(8, ::torch::kFloat32, me()).reshape({2, 4}).t()};
  ASSERT_FALSE(ts[1].is_contiguous());
  const Tensor want0 = ::torch::arange(3, ::torch::kFloat32) * total();
  const Tensor want1 = (::torch::arange(8, ::torch::kFloat32) * total()).reshape({2, 4}).t();
  std::vector<Tensor> out = grouped_allreduce(ts, {"cu.g.a", "cu.g.b"}, {ReduceOp::kSum});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(same(out[0], want0));
  EXPECT_TRUE(same(out[1], want1));
  grouped_allreduce_(ts, {}, {ReduceOp::kSum});
  EXPECT_TRUE(same(ts[0], want0));
  EXPECT_TRUE(same(ts[1], want1));
}

// Four SGD steps on this rank's shard of a 12-row batch, on the GPU, against one process
// on the whole batch on the CPU: averaged gradients make them the same training, up to the
// rounding of the GPU's kernels.
TEST(TorchCudaDistributedOptimizer, MatchesOneProcessOnTheCpu) {
  ::torch::manual_seed(42);
  Net dist;
  ::torch::manual_seed(42);
  Net alone;
  dist->to(gpu());
  ::torch::optim::SGD inner(dist->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
  ::torch::optim::SGD reference(alone->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
  DistributedOptimizerOptions options;
  options.name_prefix = "cu.grad.";
  DistributedOptimizer opt(inner, named_parameters(*dist), options);
  for (int step = 0; step < 4; ++step) {
    ::torch::manual_seed(100 + step);
    const Tensor x = ::torch::randn({12, 5});
    const Tensor y = ::torch::randint(0, 3, {12}, ::torch::kInt64);
    const int64_t rows = 12 / n();
    opt.zero_grad();
    ::torch::nn::functional::cross_entropy(dist->forward(on_gpu(x.narrow(0, rows * me(), rows))),
                                           on_gpu(y.narrow(0, rows * me(), rows)))
        .backward();
    opt.step();
    reference.zero_grad();
    ::torch::nn::functional::cross_entropy(alone->forward(x), y).backward();
    reference.step();
  }
  auto got = dist->named_parameters();
  for (const auto& item : alone->named_parameters()) {
    const Tensor& p = got[item.key()];
    ASSERT_EQ(p.device(), gpu()) << item.key();
    EXPECT_TRUE(::torch::allclose(p.cpu(), item.value(), 1e-4, 1e-5))
        << item.key() << " differs by " << (p.cpu() - item.value()).abs().max().item<double>();
  }
}

}  // namespace
}  // namespace chorus::torch

// As tests/mpi/mpi_main.cc, after the checks that decide whether anything here can run.
int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  if (!torch::cuda::is_available()) {
    std::printf(
        "SKIPPED: %d CUDA device(s), but this LibTorch was built without CUDA "
        "(torch::cuda::is_available() is false)\n",
        devices);
    return 77;
  }
  return run_gtest_on_every_rank(argc, argv);
}
