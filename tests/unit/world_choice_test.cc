// Unit tests of the world's choice (src/collectives/world_choice.h) and of torchrun's variables
// (topology/launcher_view.h): which world each launcher's environment gets, and the message of
// each environment that cannot start a job. Nothing is started: the factories are not run.
#include "collectives/world_choice.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/env_map.h"

namespace chorus {
namespace {

using Env = testing::EnvMap;
using testing::lookup;

const Env kTorchrun = {{"RANK", "1"},
                       {"WORLD_SIZE", "3"},
                       {"LOCAL_RANK", "1"},
                       {"MASTER_ADDR", "node7"},
                       {"MASTER_PORT", "29500"}};

// A store that is never used: the choice only looks at whether one was given.
class UnusedRendezvous final : public Rendezvous {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status set(const std::string&, const std::string&) override { return {}; }
  StatusOr<std::string> get(const std::string&, std::chrono::milliseconds) override {
    return std::string();
  }
  StatusOr<bool> check(const std::string&) override { return false; }
};

StatusOr<ChosenWorld> choose(const Env& env, Controller controller = Controller::kAuto,
                             std::shared_ptr<Rendezvous> rendezvous = nullptr) {
  return choose_world({controller, std::move(rendezvous), "", 0}, lookup(env));
}

void expect_controller(const StatusOr<ChosenWorld>& chosen, Controller want) {
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_EQ(chosen->controller, want);
  EXPECT_TRUE(static_cast<bool>(chosen->make));
}

TEST(TorchrunStore, ReadsTheFourVariables) {
  StatusOr<std::optional<StoreAddress>> at = torchrun_store(lookup(kTorchrun));
  ASSERT_TRUE(at.ok()) << at.status().to_string();
  ASSERT_TRUE(at->has_value());
  EXPECT_EQ((*at)->rank, 1);
  EXPECT_EQ((*at)->size, 3);
  EXPECT_EQ((*at)->host, "node7");
  EXPECT_EQ((*at)->port, 29500);
  StatusOr<std::optional<StoreAddress>> none = torchrun_store(lookup({}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  none = torchrun_store(lookup({{"RANK", "3"}}));  // some other program's RANK
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_FALSE(none->has_value());
}

TEST(TorchrunStore, EachMissingOrBadVariableIsNamed) {
  const std::map<std::string, std::pair<std::string, std::string>> cases = {
      {"RANK", {"x", "RANK='x' is not an integer >= 0"}},
      {"WORLD_SIZE", {"0", "WORLD_SIZE='0' is not an integer >= 1"}},
      {"MASTER_PORT", {"", "MASTER_PORT='' is not an integer >= 1"}},
      {"MASTER_ADDR", {"", "MASTER_ADDR is unset"}},
  };
  for (const auto& [name, bad] : cases) {
    Env env = kTorchrun;
    env[name] = bad.first;
    StatusOr<std::optional<StoreAddress>> at = torchrun_store(lookup(env));
    ASSERT_FALSE(at.ok()) << name;
    EXPECT_NE(at.status().message().find(bad.second), std::string::npos) << at.status().to_string();
  }
  Env past = kTorchrun;
  past["RANK"] = "3";
  StatusOr<std::optional<StoreAddress>> at = torchrun_store(lookup(past));
  ASSERT_FALSE(at.ok());
  EXPECT_NE(at.status().message().find("RANK=3 is not below WORLD_SIZE=3"), std::string::npos);
  Env no_port = kTorchrun;
  no_port.erase("MASTER_PORT");
  at = torchrun_store(lookup(no_port));
  ASSERT_FALSE(at.ok());
  EXPECT_NE(at.status().message().find("MASTER_PORT is unset"), std::string::npos);
}

TEST(WorldChoice, AnMpiLauncherGetsMpiWhateverElseIsSet) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"}) {
    Env env = kTorchrun;
    env[var] = "3";
    expect_controller(choose(env), Controller::kMpi);
    expect_controller(choose(env, Controller::kAuto, std::make_shared<UnusedRendezvous>()),
                      Controller::kMpi);
  }
  expect_controller(choose({}), Controller::kMpi);  // nothing launched it: a job of one rank
}

TEST(WorldChoice, TorchrunUnderAnMpiLauncherIsTorchruns) {
  if (!gloo_world_built()) GTEST_SKIP() << "built without Gloo (CHORUS_WITH_GLOO=OFF)";
  Env env = kTorchrun;
  env["PMIX_RANK"] = "0";  // srun --mpi=pmix torchrun ...
  env["TORCHELASTIC_RUN_ID"] = "job7";
  expect_controller(choose(env), Controller::kGloo);
}

TEST(WorldChoice, TorchrunsVariablesOrAStoreGetGloo) {
  if (!gloo_world_built()) GTEST_SKIP() << "built without Gloo (CHORUS_WITH_GLOO=OFF)";
  expect_controller(choose(kTorchrun), Controller::kGloo);
  expect_controller(choose({}, Controller::kAuto, std::make_shared<UnusedRendezvous>()),
                    Controller::kGloo);
  Env mpi = kTorchrun;
  mpi["OMPI_COMM_WORLD_SIZE"] = "3";
  expect_controller(choose(mpi, Controller::kGloo), Controller::kGloo);  // asked for
}

TEST(WorldChoice, WhatCannotStartSaysWhy) {
  Env broken = kTorchrun;
  broken.erase("MASTER_ADDR");
  StatusOr<ChosenWorld> chosen = choose(broken);
  ASSERT_FALSE(chosen.ok());
  if (!gloo_world_built()) {
    EXPECT_NE(chosen.status().message().find("has no Gloo"), std::string::npos);
    return;
  }
  EXPECT_NE(chosen.status().message().find("MASTER_ADDR is unset"), std::string::npos)
      << chosen.status().to_string();
  chosen = choose({}, Controller::kGloo);
  ASSERT_FALSE(chosen.ok());
  EXPECT_NE(chosen.status().message().find("no store to meet in"), std::string::npos)
      << chosen.status().to_string();
  Env top = kTorchrun;
  top["MASTER_PORT"] = "65535";
  chosen = choose(top);
  ASSERT_FALSE(chosen.ok());
  EXPECT_NE(chosen.status().message().find("CHORUS_STORE_PORT"), std::string::npos)
      << chosen.status().to_string();
}

}  // namespace
}  // namespace chorus
