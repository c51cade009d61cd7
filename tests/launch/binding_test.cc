// Unit tests of apply_binding (src/topology/binding.h) and the hwloc seam on this host,
// without MPI: CHORUS_BIND=none reads nothing unless the log wants it, one loaded topology
// serves reading and binding, bad input is a Status naming what was wrong, and the GPUs of
// an hwloc XML topology are found on the PCI bus with the cores near each.
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

// Two packages of two single-PU cores, a NUMA node each. PCI devices, not in bus order in the
// tree: package 0 holds an NVIDIA 3D controller at 0000:86:00.0 and a Mellanox NIC; package 1
// an NVIDIA VGA GPU at 0000:07:00.0 and an AMD display controller (not NVIDIA); a third
// NVIDIA GPU at 0000:c1:00.0 hangs off the machine itself (no locality).
constexpr char kTwoPackagesThreeGpus[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3" local_memory="1073741824"/>
      <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="7"/>
      </object>
      <object type="Bridge" gp_index="8" bridge_type="0-1" depth="0" bridge_pci="0000:[80-8f]">
        <object type="PCIDev" gp_index="9" pci_busid="0000:86:00.0" pci_type="0302 [10de:20b0] [10de:134f] a1" pci_link_speed="0.000000"/>
        <object type="PCIDev" gp_index="10" pci_busid="0000:87:00.0" pci_type="0207 [15b3:101b] [15b3:0007] 00" pci_link_speed="0.000000"/>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="11">
      <object type="NUMANode" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="12" local_memory="1073741824"/>
      <object type="Core" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="13">
        <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="14"/>
      </object>
      <object type="Core" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="15">
        <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="16"/>
      </object>
      <object type="Bridge" gp_index="17" bridge_type="0-1" depth="0" bridge_pci="0000:[00-0f]">
        <object type="PCIDev" gp_index="18" pci_busid="0000:07:00.0" pci_type="0300 [10de:1db6] [10de:12a2] a1" pci_link_speed="0.000000"/>
        <object type="PCIDev" gp_index="19" pci_busid="0000:08:00.0" pci_type="0300 [1002:740f] [1002:0c34] 00" pci_link_speed="0.000000"/>
      </object>
    </object>
    <object type="Bridge" gp_index="20" bridge_type="0-1" depth="0" bridge_pci="0000:[c0-cf]">
      <object type="PCIDev" gp_index="21" pci_busid="0000:c1:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="0.000000"/>
    </object>
  </object>
</topology>
)";

TEST(HwlocTopologyTest, XmlGpusComeInPciOrderWithTheirCores) {
  StatusOr<HwlocTopology> topo = HwlocTopology::load_xml(kTwoPackagesThreeGpus);
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
  std::string xml = kTwoPackagesThreeGpus;
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
