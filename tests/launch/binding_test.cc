// Unit tests of apply_binding (src/topology/binding.h) and the hwloc seam on this host,
// without MPI: CHORUS_BIND=none reads nothing unless the log wants it, one loaded topology
// serves reading and binding, bad input is a Status naming what was wrong, and the GPUs of
// an hwloc XML topology are found on the PCI bus with the cores near each.
#include "topology/binding.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/logging.h"
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

// tests/unit/data/two_packages_three_gpus.xml (its comment describes it): two packages, three
// NVIDIA GPUs among other PCI devices, out of bus order in the tree.
std::string read_topology_xml() {
  const std::string path = std::string(CHORUS_TEST_DATA_DIR) + "/two_packages_three_gpus.xml";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(HwlocTopologyTest, XmlGpusComeInPciOrderWithTheirCores) {
  StatusOr<HwlocTopology> topo = HwlocTopology::load_xml(read_topology_xml());
  ASSERT_TRUE(topo.ok()) << topo.status().to_string();
  StatusOr<CpuLayout> layout = topo->cpu_layout();
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  ASSERT_EQ(layout->cores.size(), 4u);
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(layout->cores[c].pus, (std::vector<int>{c}));
    EXPECT_EQ(layout->cores[c].numa, c / 2);
  }
  // Only the NVIDIA display and 3D controllers, sorted by bus: not the NIC, not the AMD GPU.
  ASSERT_EQ(layout->gpus.size(), 3u);
  const GpuLocality& first = layout->gpus[0];
  EXPECT_EQ(first.index, 0);
  EXPECT_EQ(first.pci_bus_id, "0000:07:00.0");
  EXPECT_EQ(first.numa, (std::vector<int>{1}));
  EXPECT_EQ(first.cores, (std::vector<int>{2, 3}));
  const GpuLocality& second = layout->gpus[1];
  EXPECT_EQ(second.index, 1);
  EXPECT_EQ(second.pci_bus_id, "0000:86:00.0");
  EXPECT_EQ(second.numa, (std::vector<int>{0}));
  EXPECT_EQ(second.cores, (std::vector<int>{0, 1}));
  const GpuLocality& machine = layout->gpus[2];
  EXPECT_EQ(machine.pci_bus_id, "0000:c1:00.0");
  EXPECT_EQ(machine.numa, (std::vector<int>{0, 1}));
  EXPECT_EQ(machine.cores, (std::vector<int>{0, 1, 2, 3}));

  // Planned on it with CUDA_VISIBLE_DEVICES=0,1: rank 0 runs on package 1, next to cuda:0.
  const CpuLayout seen = select_gpus(*layout, visible_gpus(std::string("0,1"), 3).order);
  StatusOr<CpuPlan> rank0 = plan_cpus(seen, BindMode::kCore, 0, 2);
  ASSERT_TRUE(rank0.ok()) << rank0.status().to_string();
  EXPECT_EQ(rank0->pus, (std::vector<int>{2, 3}));
  EXPECT_EQ(describe_gpu(seen, rank0->gpu), "cuda:0 (PCI 0000:07:00.0, NUMA 1)");
  StatusOr<CpuPlan> rank1 = plan_cpus(seen, BindMode::kCore, 1, 2);
  ASSERT_TRUE(rank1.ok()) << rank1.status().to_string();
  EXPECT_EQ(rank1->pus, (std::vector<int>{0, 1}));
}

TEST(HwlocTopologyTest, XmlWithoutPciDevicesHasNoGpus) {
  std::string xml = read_topology_xml();
  // Drop every Bridge element (each spans from "<object type=\"Bridge\"" to its "</object>").
  for (std::size_t at; (at = xml.find("<object type=\"Bridge\"")) != std::string::npos;) {
    const std::string close = "</object>";
    xml.erase(at, xml.find(close, at) + close.size() - at);
  }
  StatusOr<HwlocTopology> topo = HwlocTopology::load_xml(xml);
  ASSERT_TRUE(topo.ok()) << topo.status().to_string();
  StatusOr<CpuLayout> layout = topo->cpu_layout();
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(layout->cores.size(), 4u);
  EXPECT_TRUE(layout->gpus.empty());
}

TEST(HwlocTopologyTest, BadXmlIsAStatus) {
  StatusOr<HwlocTopology> topo = HwlocTopology::load_xml("<topology>not hwloc</nope>");
  EXPECT_FALSE(topo.ok());
}

}  // namespace
}  // namespace chorus
