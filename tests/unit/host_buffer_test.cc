// HostBuffer: alignment, growth, and the huge-page alignment of large buffers.
#include "kernels/host_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "fusion/fusion_buffer.h"

namespace chorus {
namespace {

std::uintptr_t address(const char* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(HostBufferTest, SmallBuffersAreLineAligned) {
  HostBuffer b;
  char* p = b.get(100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(address(p) % 64, 0u);
  EXPECT_GE(b.size(), 100u);
  EXPECT_LT(b.size(), HostBuffer::kHugeFrom);
  std::memset(p, 7, 100);  // the whole request is writable
}

TEST(HostBufferTest, LargeBuffersStartOnAHugePage) {
  HostBuffer b;
  char* p = b.get(HostBuffer::kHugeFrom);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(address(p) % (std::size_t{2} << 20), 0u);
  EXPECT_EQ(b.size() % (std::size_t{2} << 20), 0u);
  std::memset(p, 1, HostBuffer::kHugeFrom);
}

TEST(HostBufferTest, KeepsItsMemoryForSmallerRequestsAndGrowsForLarger) {
  HostBuffer b;
  char* first = b.get(4096);
  EXPECT_EQ(b.get(64), first);
  EXPECT_EQ(b.get(4096), first);
  const std::size_t big = 3 * HostBuffer::kHugeFrom + 5;
  char* grown = b.get(big);
  ASSERT_NE(grown, nullptr);
  EXPECT_GE(b.size(), big);
  std::memset(grown, 2, big);
  EXPECT_EQ(b.get(10), grown);
}

TEST(HostBufferTest, ZeroBytesStillGivesAPointer) {
  HostBuffer b;
  EXPECT_NE(b.get(0), nullptr);
}

TEST(FusionBufferTest, HandsOutItsCapacityAndRefusesMore) {
  FusionBuffer f(1000);
  char* p = f.get(10);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(f.get(1000), p);
  EXPECT_EQ(f.get(1001), nullptr);
}

}  // namespace
}  // namespace chorus
