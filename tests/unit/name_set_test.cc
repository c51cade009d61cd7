// Unit tests of NameSet (src/core/name_set.h): the runtime's names in flight.
#include "core/name_set.h"

#include <gtest/gtest.h>

#include <string>

namespace chorus {
namespace {

TEST(NameSetTest, RefusesANameItHolds) {
  NameSet s;
  EXPECT_TRUE(s.insert("grad.w"));
  EXPECT_FALSE(s.insert("grad.w"));
  EXPECT_TRUE(s.contains("grad.w"));
  EXPECT_EQ(s.size(), 1u);
  s.erase("grad.w");
  EXPECT_FALSE(s.contains("grad.w"));
  EXPECT_TRUE(s.insert("grad.w"));
}

TEST(NameSetTest, ReusesNodesOfRemovedNames) {
  NameSet s;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(s.insert("layer." + std::to_string(i)));
  for (int i = 0; i < 100; ++i) s.erase("layer." + std::to_string(i));
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.spare(), 100u);
  // A refused duplicate keeps the node it took.
  ASSERT_TRUE(s.insert("a"));
  EXPECT_FALSE(s.insert("a"));
  EXPECT_EQ(s.spare(), 99u);
  EXPECT_TRUE(s.contains("a"));
  EXPECT_FALSE(s.contains("layer.0"));
  s.erase("not there");
  EXPECT_EQ(s.size(), 1u);
}

TEST(NameSetTest, KeepsAtMostItsSpareBound) {
  NameSet s;
  const int n = static_cast<int>(NameSet::kSpareNodes) + 10;
  for (int i = 0; i < n; ++i) ASSERT_TRUE(s.insert(std::to_string(i)));
  for (int i = 0; i < n; ++i) s.erase(std::to_string(i));
  EXPECT_EQ(s.spare(), NameSet::kSpareNodes);
}

}  // namespace
}  // namespace chorus
