// The stall classes (protocol/stall_classes.h), each made on purpose from what three ranks
// submitted, and the priority between them when several hold.
#include "protocol/stall_classes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chorus {
namespace {

StallView::Stuck stuck(const std::string& name, std::vector<bool> submitted, double waited = 61) {
  StallView::Stuck s;
  s.name = name;
  s.submitted = std::move(submitted);
  s.waited_seconds = waited;
  return s;
}

bool contains(const std::string& line, const std::string& part) {
  return line.find(part) != std::string::npos;
}

TEST(StallClasses, NamesThatDifferByAPrefixOrCase) {
  EXPECT_TRUE(names_look_alike("layer1.weight", "module.layer1.weight"));
  EXPECT_TRUE(names_look_alike("model/dense/kernel", "dense/kernel"));
  EXPECT_TRUE(names_look_alike("Layer1.Weight", "layer1.weight"));
  EXPECT_FALSE(names_look_alike("layer1.weight", "layer1.weight"));
  EXPECT_FALSE(names_look_alike("layer1.weight", "layer2.weight"));
  EXPECT_FALSE(names_look_alike("weight", "layer1weight"));  // no separator before the tail
}

TEST(StallClasses, ARankThatSubmittedAPrefixedNameIsANamingBug) {
  StallView v;
  v.size = 3;
  v.stuck = {stuck("layer1.weight", {true, true, false}),
             stuck("module.layer1.weight", {false, false, true})};
  v.outstanding = {{"layer1.weight"}, {"layer1.weight"}, {"module.layer1.weight"}};
  const auto found = classify_stalls(v);
  ASSERT_EQ(1u, found.size());
  EXPECT_EQ(StallClass::kNameMismatch, found[0].cls);
  EXPECT_EQ((std::vector<std::string>{"layer1.weight", "module.layer1.weight"}), found[0].tensors);
  EXPECT_TRUE(contains(found[0].line, "names differ across ranks")) << found[0].line;
  EXPECT_TRUE(contains(found[0].line,
                       "rank 2 submitted 'module.layer1.weight' where ranks [0, 1] "
                       "submitted 'layer1.weight'"))
      << found[0].line;
  EXPECT_TRUE(contains(found[0].line, "fix: give each tensor the same name")) << found[0].line;
}

TEST(StallClasses, TwoOrdersWithAWaitBetweenAreADeadlockOfTheProgram) {
  // Ranks 0 and 1 submitted 'a' and wait for it; rank 2 submitted 'b' first and waits for it.
  StallView v;
  v.size = 3;
  v.stuck = {stuck("a", {true, true, false}), stuck("b", {false, false, true})};
  v.outstanding = {{"a"}, {"a"}, {"b"}};
  const auto found = classify_stalls(v);
  ASSERT_EQ(1u, found.size());
  EXPECT_EQ(StallClass::kOrderDeadlock, found[0].cls);
  EXPECT_EQ((std::vector<std::string>{"a", "b"}), found[0].tensors);
  EXPECT_TRUE(contains(found[0].line,
                       "rank 0 submitted 'a' and not 'b', rank 2 submitted 'b' "
                       "and not 'a'"))
      << found[0].line;
  EXPECT_TRUE(contains(found[0].line, "same order on every rank")) << found[0].line;
}

TEST(StallClasses, ARankThatSubmittedOthersMeanwhileNeverSubmittedThisOne) {
  // Rank 1 moved on to 'c' and 'd', which ranks 0 and 2 submitted too (they complete once
  // rank 1... never: 'x' blocks them first); 'x' is what it skipped.
  StallView v;
  v.size = 3;
  v.stuck = {stuck("x", {true, false, true})};
  v.outstanding = {{"x", "c", "d"}, {"c", "d"}, {"x", "c", "d"}};
  const auto found = classify_stalls(v);
  ASSERT_EQ(1u, found.size());
  EXPECT_EQ(StallClass::kNeverSubmitted, found[0].cls);
  EXPECT_TRUE(contains(found[0].line, "'x' waits for rank 1, which meanwhile submitted 'c', 'd'"))
      << found[0].line;
  EXPECT_TRUE(contains(found[0].line, "fix: make every rank submit the tensor")) << found[0].line;
}

TEST(StallClasses, ARankWithNothingOutstandingStopped) {
  StallView v;
  v.size = 3;
  v.stuck = {stuck("grad.7", {true, true, false}, 75.5)};
  v.outstanding = {{"grad.7"}, {"grad.7"}, {}};
  v.idle_seconds = {0.1, 0.1, 80.25};
  const auto found = classify_stalls(v);
  ASSERT_EQ(1u, found.size());
  EXPECT_EQ(StallClass::kRankStopped, found[0].cls);
  EXPECT_TRUE(contains(found[0].line,
                       "rank 2 has nothing outstanding and submitted nothing for "
                       "80.2 s while ranks [0, 1] wait for 'grad.7' (75.5 s)"))
      << found[0].line;
  // Without the idle time, the line still names the rank.
  v.idle_seconds.clear();
  EXPECT_TRUE(contains(classify_stalls(v)[0].line, "rank 2 has nothing outstanding while"));
}

TEST(StallClasses, OneLinePerClassInClassOrder) {
  // 'p' and 'q': a stopped rank 3; 'module.w' / 'w': names; every class but order.
  StallView v;
  v.size = 4;
  v.stuck = {stuck("p", {true, true, true, false}), stuck("w", {true, false, false, false}),
             stuck("module.w", {false, true, true, false}), stuck("q", {true, true, true, false})};
  v.outstanding = {{"p", "q", "w"}, {"p", "q", "module.w"}, {"p", "q", "module.w"}, {}};
  const auto found = classify_stalls(v);
  ASSERT_EQ(2u, found.size());
  EXPECT_EQ(StallClass::kNameMismatch, found[0].cls);
  EXPECT_EQ((std::vector<std::string>{"module.w", "w"}), found[0].tensors);
  EXPECT_EQ(StallClass::kRankStopped, found[1].cls);
  EXPECT_EQ((std::vector<std::string>{"p", "q"}), found[1].tensors);
  EXPECT_TRUE(contains(found[1].line, "(2 tensors: 'p', 'q')")) << found[1].line;
}

TEST(StallClasses, ExitStatusesAreDistinct) {
  EXPECT_EQ(81, stall_exit_status(StallClass::kNameMismatch));
  EXPECT_EQ(82, stall_exit_status(StallClass::kOrderDeadlock));
  EXPECT_EQ(83, stall_exit_status(StallClass::kNeverSubmitted));
  EXPECT_EQ(84, stall_exit_status(StallClass::kRankStopped));
}

TEST(StallClasses, NothingMissingNothingSaid) {
  StallView v;
  v.size = 2;
  v.stuck = {stuck("a", {true, true})};
  v.outstanding = {{"a"}, {"a"}};
  EXPECT_TRUE(classify_stalls(v).empty());
}

}  // namespace
}  // namespace chorus
