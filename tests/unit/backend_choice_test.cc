// Unit tests of BackendChoice (src/collectives/backend_choice.h): each collective runs on the
// first backend offered that serves it, the set's own backend takes the rest, the choice
// owns what its providers made, and a collective a backend does not serve fails by name if it
// is called anyway.
#include "collectives/backend_choice.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/recording_backend.h"

namespace chorus::testing {
namespace {

// Serves one collective on one dtype, like a transport with a narrow kernel.
class NarrowBackend final : public Backend {
 public:
  NarrowBackend(Collective c, DataType dtype) : c_(c), dtype_(dtype) {}
  const char* name() const override { return "narrow"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  bool serves(Collective c, DataType dtype) const override { return c == c_ && dtype == dtype_; }
  Status allreduce(const void*, void*, int64_t, DataType, ReduceOp, kernels::Scale) override {
    return {};
  }

 private:
  Collective c_;
  DataType dtype_;
};

TEST(BackendChoiceTest, TheOwnBackendRunsEverythingAlone) {
  RecordingBackend own(0, 2);
  BackendChoice choice("set", &own, "the set's own");
  for (int c = 0; c < kNumCollectives; ++c) {
    EXPECT_EQ(&choice.pick(static_cast<Collective>(c), DataType::kFloat32), &own);
  }
  EXPECT_EQ(&choice.own(), &own);
}

// `first` before `own`, as the registry offers them (collectives/providers.h).
BackendChoice two(Backend* first, Backend* own) {
  std::vector<BackendChoice::Offer> offers;
  offers.push_back({first, "a test", {}, "narrow"});
  offers.push_back({own, "the set's own", {}, "own"});
  return BackendChoice("set", std::move(offers));
}

TEST(BackendChoiceTest, AnEarlierBackendRunsWhatItServesOnly) {
  RecordingBackend own(0, 2);
  NarrowBackend narrow(Collective::kAllreduce, DataType::kFloat32);
  BackendChoice choice = two(&narrow, &own);
  EXPECT_EQ(&choice.pick(Collective::kAllreduce, DataType::kFloat32), &narrow);
  EXPECT_EQ(&choice.pick(Collective::kAllreduce, DataType::kFloat64), &own);
  EXPECT_EQ(&choice.pick(Collective::kAllgather, DataType::kFloat32), &own);
  EXPECT_EQ(&choice.own(), &own);
  EXPECT_TRUE(choice.offered_by("narrow"));
  EXPECT_FALSE(choice.offered_by("shared memory"));
}

TEST(BackendChoiceTest, TheFirstThatServesIsPicked) {
  RecordingBackend own(0, 2);
  NarrowBackend first(Collective::kAllreduce, DataType::kFloat32);
  NarrowBackend second(Collective::kAllreduce, DataType::kFloat32);
  std::vector<BackendChoice::Offer> offers;
  offers.push_back({&first, "offered first", {}, "first"});
  offers.push_back({&second, "offered second", {}, "second"});
  offers.push_back({&own, "the set's own", {}, "own"});
  BackendChoice choice("set", std::move(offers));
  EXPECT_EQ(&choice.pick(Collective::kAllreduce, DataType::kFloat32), &first);
}

// Whatever a provider made, the choice keeps alive, and destroys users before what they use.
TEST(BackendChoiceTest, ItOwnsWhatItsProvidersMadeAndDestroysUsersFirst) {
  std::vector<std::string> destroyed;
  class Noting final : public Backend {
   public:
    Noting(std::string name, std::vector<std::string>* log) : name_(std::move(name)), log_(log) {}
    ~Noting() override { log_->push_back(name_); }
    const char* name() const override { return name_.c_str(); }
    int rank() const override { return 0; }
    int size() const override { return 1; }

   private:
    std::string name_;
    std::vector<std::string>* log_;
  };
  {
    std::vector<BackendChoice::Offer> offers(2);
    offers[0].owned.push_back(std::make_unique<Noting>("user", &destroyed));
    offers[0].owned.push_back(std::make_unique<Noting>("level", &destroyed));
    offers[0].backend = offers[0].owned.front().get();
    offers[1].owned.push_back(std::make_unique<Noting>("own", &destroyed));
    offers[1].backend = offers[1].owned.front().get();
    BackendChoice choice("set", std::move(offers));
    BackendChoice moved = std::move(choice);  // a set's executor takes it by value
    EXPECT_STREQ(moved.pick(Collective::kBarrier, DataType::kUInt8).name(), "user");
    EXPECT_TRUE(destroyed.empty());
  }
  EXPECT_EQ(destroyed, (std::vector<std::string>{"user", "level", "own"}));
}

// What is built over the set's host backends (the staged GPU path) calls the choice itself.
TEST(BackendChoiceTest, AsABackendItSendsEachCallToItsPick) {
  RecordingBackend own(0, 2);
  NarrowBackend narrow(Collective::kAllreduce, DataType::kFloat64);
  BackendChoice choice = two(&narrow, &own);
  float x[2] = {1, 2};
  ASSERT_TRUE(choice.allreduce(x, x, 2, DataType::kFloat32, ReduceOp::kSum, {}).ok());
  char byte = 0;
  ASSERT_TRUE(choice.broadcast(&byte, 1, 0).ok());
  ASSERT_EQ(own.calls().size(), 2u);  // float32 is not the narrow backend's
  EXPECT_EQ(own.calls()[0].op, "allreduce");
  EXPECT_EQ(own.calls()[1].op, "broadcast");
  double y[2] = {1, 2};
  ASSERT_TRUE(choice.allreduce(y, y, 2, DataType::kFloat64, ReduceOp::kSum, {}).ok());
  EXPECT_EQ(own.calls().size(), 2u) << "the float64 allreduce is the narrow backend's";
  EXPECT_EQ(choice.size(), 2);
}

TEST(BackendChoiceTest, ACollectiveNotServedFailsNamingTheBackend) {
  NarrowBackend narrow(Collective::kAllreduce, DataType::kFloat32);
  char byte = 0;
  const Status s = narrow.broadcast(&byte, 1, 0);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("the narrow backend does not serve broadcast"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace chorus::testing
