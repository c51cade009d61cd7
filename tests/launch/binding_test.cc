// Unit tests of apply_binding (src/topology/binding.h) and the hwloc seam on this host,
// without MPI: CHORUS_BIND=none reads nothing unless the log wants it, one loaded topology
// serves reading and binding, and bad input is a Status naming what was wrong.
#include "topology/binding.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/logging.h"
#include "topology/hwloc_binding.h"

namespace chorus {
namespace {

TEST(BindingTest, NoneReportsTheLauncherBindingOnlyAtDebugLevel) {
  const RankMap map = compute_rank_map({"h", "h"}, 1);
  configure_logging(0, "info");
  StatusOr<BindingResult> quiet = apply_binding(BindMode::kNone, map);
  ASSERT_TRUE(quiet.ok()) << quiet.status().to_string();
  EXPECT_FALSE(quiet->bound);
  EXPECT_FALSE(quiet->warning);
  EXPECT_EQ(quiet->message, "");

  configure_logging(0, "debug");
  StatusOr<BindingResult> loud = apply_binding(BindMode::kNone, map);
  configure_logging(0, "warn");
  ASSERT_TRUE(loud.ok()) << loud.status().to_string();
  EXPECT_FALSE(loud->bound);
  const std::string prefix = "binding: none (CHORUS_BIND=none), local rank 1/2 runs on PUs ";
  EXPECT_EQ(loud->message.substr(0, prefix.size()), prefix) << loud->message;
  EXPECT_EQ(loud->message.find("?"), std::string::npos) << loud->message;
}

TEST(HwlocTopologyTest, OneLoadReadsCoresAndBindings) {
  StatusOr<HwlocTopology> topo = HwlocTopology::load();
  ASSERT_TRUE(topo.ok()) << topo.status().to_string();
  StatusOr<CpuLayout> layout = topo->cpu_layout();
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_FALSE(layout->cores.empty());
  for (const CpuCore& c : layout->cores) EXPECT_FALSE(c.pus.empty());
  StatusOr<std::vector<int>> now = topo->this_thread_binding();
  ASSERT_TRUE(now.ok()) << now.status().to_string();
  ASSERT_FALSE(now->empty());
  // Binding this thread to where it already runs changes nothing and must succeed.
  EXPECT_TRUE(topo->bind_this_thread(*now).ok());
  StatusOr<std::vector<int>> again = topo->this_thread_binding();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *now);
}

TEST(HwlocTopologyTest, BadProcessingUnitsAreStatuses) {
  StatusOr<HwlocTopology> topo = HwlocTopology::load();
  ASSERT_TRUE(topo.ok()) << topo.status().to_string();
  Status none = topo->bind_this_thread({});
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none.message(), "thread: no processing units given");
  Status negative = topo->bind_process({-1});
  EXPECT_EQ(negative.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.message(), "hwloc: negative PU index -1");
}

}  // namespace
}  // namespace chorus
