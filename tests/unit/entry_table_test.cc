// Unit tests of the table of entries in flight (src/core/entry_table.h): insertion under
// the request's name, refused duplicates that leave the entry intact, and reuse of the
// nodes of finished entries.

#include "core/entry_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace chorus {
namespace {

Entry entry(const std::string& name, int64_t n = 4) {
  Entry e;
  e.request.name = name;
  e.request.shape = {n};
  e.handle = std::make_shared<detail::HandleState>(1);
  return e;
}

TEST(EntryTableTest, InsertMovesTheEntryInUnderItsName) {
  EntryTable t;
  Entry e = entry("grad.layer1.weight", 7);
  auto handle = e.handle;
  Entry* placed = t.insert(e);
  ASSERT_NE(placed, nullptr);
  EXPECT_EQ(t.find("grad.layer1.weight"), placed);
  EXPECT_EQ(placed->request.shape, std::vector<int64_t>{7});
  EXPECT_EQ(placed->handle, handle);
  EXPECT_TRUE(t.contains("grad.layer1.weight"));
  EXPECT_EQ(t.find("grad.layer2.weight"), nullptr);
  EXPECT_EQ(t.size(), 1u);
}

TEST(EntryTableTest, DuplicateIsRefusedAndLeftIntact) {
  EntryTable t;
  Entry first = entry("dup");
  ASSERT_NE(t.insert(first), nullptr);
  Entry second = entry("dup", 9);
  auto handle = second.handle;
  EXPECT_EQ(t.insert(second), nullptr);
  EXPECT_EQ(second.request.name, "dup");
  EXPECT_EQ(second.request.shape, std::vector<int64_t>{9});
  EXPECT_EQ(second.handle, handle);
  EXPECT_EQ(t.find("dup")->request.shape, std::vector<int64_t>{4});
  EXPECT_EQ(t.size(), 1u);
}

TEST(EntryTableTest, ErasedNodesAreReusedAndHoldNothing) {
  EntryTable t;
  Entry a = entry("a.long.name.beyond.the.inline.buffer");
  Entry* placed = t.insert(a);
  std::weak_ptr<detail::HandleState> handle = placed->handle;
  t.erase(*placed);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.spare(), 1u);
  EXPECT_TRUE(handle.expired()) << "an erased entry must release its handle at once";

  Entry b = entry("b");
  Entry* reused = t.insert(b);
  ASSERT_NE(reused, nullptr);
  EXPECT_EQ(t.spare(), 0u);
  EXPECT_EQ(t.find("b"), reused);
  EXPECT_FALSE(t.contains("a.long.name.beyond.the.inline.buffer"));
}

TEST(EntryTableTest, DuplicateThroughASpareNodeKeepsTheNode) {
  EntryTable t;
  Entry gone = entry("gone");
  t.erase(*t.insert(gone));
  Entry first = entry("x");
  // "x" took the spare node; erasing "y" leaves one for the duplicate below.
  ASSERT_NE(t.insert(first), nullptr);
  Entry other = entry("y");
  t.erase(*t.insert(other));
  ASSERT_EQ(t.spare(), 1u);
  Entry dup = entry("x", 5);
  EXPECT_EQ(t.insert(dup), nullptr);
  EXPECT_EQ(dup.request.name, "x");
  EXPECT_EQ(dup.request.shape, std::vector<int64_t>{5});
  EXPECT_NE(dup.handle, nullptr);
  EXPECT_EQ(t.spare(), 1u);
  EXPECT_EQ(t.find("x")->request.shape, std::vector<int64_t>{4});
}

TEST(EntryTableTest, KeepsAtMostItsSpareBound) {
  EntryTable t;
  const std::size_t n = EntryTable::kSpareNodes + 10;
  std::vector<Entry*> placed;
  for (std::size_t i = 0; i < n; ++i) {
    Entry e = entry("t." + std::to_string(i));
    placed.push_back(t.insert(e));
  }
  for (Entry* e : placed) t.erase(*e);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.spare(), EntryTable::kSpareNodes);
}

}  // namespace
}  // namespace chorus
