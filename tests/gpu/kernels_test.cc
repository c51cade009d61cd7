// The batched pack/unpack/scale kernels against the CPU kernels, bit for bit: every dtype,
// odd sizes, misaligned offsets, in place, many tensors in one launch. Skips without a GPU.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gpu_test_util.h"
#include "kernels/cuda_fusion.h"
#include "kernels/reduce_kernels.h"

namespace chorus::testing {
namespace {

constexpr DataType kAll[] = {DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
                             DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                             DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};

// Random bytes, with every floating value made finite: the GPU and the CPU may produce
// different NaN payloads, so NaNs (and infinities, which can turn into them) are not
// compared bytewise. A value whose exponent field is all ones gets its top exponent bit
// cleared. Denormals and overflow to infinity by the scale stay in.
template <class Bits>
void make_finite(char* p, std::size_t n, Bits exponent, Bits top) {
  for (std::size_t i = 0; i + sizeof(Bits) <= n; i += sizeof(Bits)) {
    Bits v;
    std::memcpy(&v, p + i, sizeof v);
    if ((v & exponent) == exponent) v = static_cast<Bits>(v & ~top);
    std::memcpy(p + i, &v, sizeof v);
  }
}

std::vector<char> random_values(std::size_t n, DataType t) {
  std::mt19937 gen(17u + static_cast<uint32_t>(t));
  std::vector<char> v(n);
  for (char& c : v) c = static_cast<char>(gen());
  switch (t) {
    case DataType::kFloat16: make_finite<uint16_t>(v.data(), n, 0x7C00, 0x4000); break;
    case DataType::kBFloat16: make_finite<uint16_t>(v.data(), n, 0x7F80, 0x4000); break;
    case DataType::kFloat32: make_finite<uint32_t>(v.data(), n, 0x7F800000u, 0x40000000u); break;
    case DataType::kFloat64:
      make_finite<uint64_t>(v.data(), n, 0x7FF0000000000000ull, 0x4000000000000000ull);
      break;
    default: break;
  }
  return v;
}

std::vector<char> cpu_reference(const std::vector<char>& src, int64_t count, DataType t,
                                kernels::Scale scale) {
  std::vector<char> out(src.size());
  const void* srcs[1] = {src.data()};
  if (count > 0) kernels::reduce_ordered(out.data(), srcs, 1, count, t, ReduceOp::kSum, scale);
  return out;
}

// Runs `items` (count, byte offset of src, byte offset of dst) through one launch and
// compares with the CPU, bytes compared (finite inputs: see random_values).
void check_batch(DataType t, kernels::Scale scale,
                 const std::vector<std::tuple<int64_t, std::size_t, std::size_t>>& items,
                 bool in_place) {
  const std::size_t esz = dtype_size(t);
  std::size_t src_bytes = 0, dst_bytes = 0;
  for (auto& [count, so, dof] : items) {
    src_bytes = std::max(src_bytes, so + count * esz);
    dst_bytes = std::max(dst_bytes, dof + count * esz);
  }
  DeviceBuffer src(src_bytes), dst(in_place ? 0 : dst_bytes);
  std::vector<char> host = random_values(src_bytes, t);
  src.upload(host.data(), host.size());
  std::vector<gpu::CopyItem> batch;
  for (auto& [count, so, dof] : items) {
    char* out = in_place ? src.data() + so : dst.data() + dof;
    batch.push_back({src.data() + so, out, count});
  }
  StatusOr<std::unique_ptr<gpu::BatchedCopy>> copy = gpu::BatchedCopy::create(0);
  ASSERT_TRUE(copy.ok()) << copy.status().to_string();
  ASSERT_TRUE((*copy)->launch(batch, t, scale, nullptr).ok());
  CHORUS_CUDA_OK(cudaDeviceSynchronize());
  for (auto& [count, so, dof] : items) {
    std::vector<char> in(host.begin() + so, host.begin() + so + count * esz);
    std::vector<char> want = cpu_reference(in, count, t, scale);
    std::vector<char> got =
        in_place ? src.download(count * esz, so) : dst.download(count * esz, dof);
    ASSERT_EQ(got, want) << dtype_name(t) << " count " << count << " src+" << so << " dst+" << dof
                         << " divisor " << scale.divisor << " factor " << scale.factor;
  }
}

TEST(BatchedCopy, EveryDtypeOddSizesMisalignedOffsets) {
  CHORUS_REQUIRE_GPU();
  for (DataType t : kAll) {
    const std::size_t e = dtype_size(t);
    // Offsets are multiples of the element size but not of 16 bytes.
    std::vector<std::tuple<int64_t, std::size_t, std::size_t>> items = {
        {1, 0, 0},
        {7, 8 * e, 3 * e},
        {1023, 2048 * e, 64 * e + e},
        {65537, 70000 * e, 2000 * e},
        {0, 0, 0},
        {33, 5 * e, 140000 * e},
        // Several chunks at 4- (or 8-, or 1-) byte alignment: the narrower copy's passes.
        {20001, 200001 * e, 150000 * e}};
    for (kernels::Scale s : {kernels::Scale{1, 1.0}, kernels::Scale{1, 0.5}, kernels::Scale{3, 2.5},
                             kernels::Scale{4, 1.0}}) {
      check_batch(t, s, items, false);
    }
  }
}

TEST(BatchedCopy, InPlaceScaling) {
  CHORUS_REQUIRE_GPU();
  for (DataType t : kAll) {
    const std::size_t e = dtype_size(t);
    check_batch(t, {2, 3.0}, {{4097, 0, 0}, {5, 5000 * e, 0}}, true);
  }
}

// Each way descriptors reach the kernel: the small and the large parameter blocks (64 and
// 1016 items, and one past each) and the uploaded slots.
TEST(BatchedCopy, ManyTensorsInOneLaunch) {
  CHORUS_REQUIRE_GPU();
  for (int tensors : {64, 65, 300, 1016, 1017, 2500}) {
    std::vector<std::tuple<int64_t, std::size_t, std::size_t>> items;
    std::size_t so = 0, dof = 4;
    for (int i = 0; i < tensors; ++i) {
      const int64_t count = 1 + (i * 7919) % 5000;
      items.emplace_back(count, so, dof);
      so += count * 4 + 4;
      dof += count * 4;
    }
    SCOPED_TRACE(std::to_string(tensors) + " tensors");
    check_batch(DataType::kFloat32, {1, 1.0}, items, false);
    check_batch(DataType::kFloat32, {8, 1.0}, items, false);
  }
}

// Large batches go through the ring of descriptor slots: more launches than slots, queued
// back to back before one synchronize, must each copy their own items (a slot rewritten
// before its upload ran would send a later batch's descriptors).
TEST(BatchedCopy, BackToBackLargeBatchesReuseSlots) {
  CHORUS_REQUIRE_GPU();
  constexpr int kLaunches = 9, kItems = 1100, kCount = 33;
  const std::size_t bytes = static_cast<std::size_t>(kLaunches) * kItems * kCount * 4;
  DeviceBuffer src(bytes), dst(bytes);
  std::vector<char> host = random_values(bytes, DataType::kFloat32);
  src.upload(host.data(), host.size());
  StatusOr<std::unique_ptr<gpu::BatchedCopy>> copy = gpu::BatchedCopy::create(0);
  ASSERT_TRUE(copy.ok()) << copy.status().to_string();
  for (int l = 0; l < kLaunches; ++l) {
    std::vector<gpu::CopyItem> batch;
    for (int i = 0; i < kItems; ++i) {
      const std::size_t at = (static_cast<std::size_t>(l) * kItems + i) * kCount * 4;
      batch.push_back({src.data() + at, dst.data() + at, kCount});
    }
    ASSERT_TRUE((*copy)->launch(batch, DataType::kFloat32, {1, 1.0}, nullptr).ok());
  }
  CHORUS_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(dst.download(bytes), host);
}

}  // namespace
}  // namespace chorus::testing
