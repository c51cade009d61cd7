// Unit tests of BackendChoice (src/collectives/backend_choice.h): each collective runs on the
// first backend offered that serves it, the set's own backend takes the rest, and a
// collective a backend does not serve fails by name if it is called anyway.
#include "collectives/backend_choice.h"

#include <gtest/gtest.h>

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

TEST(BackendChoiceTest, APreferredBackendRunsWhatItServesOnly) {
  RecordingBackend own(0, 2);
  NarrowBackend narrow(Collective::kAllreduce, DataType::kFloat32);
  BackendChoice choice("set", &own, "the set's own");
  choice.prefer(&narrow, "a test");
  EXPECT_EQ(&choice.pick(Collective::kAllreduce, DataType::kFloat32), &narrow);
  EXPECT_EQ(&choice.pick(Collective::kAllreduce, DataType::kFloat64), &own);
  EXPECT_EQ(&choice.pick(Collective::kAllgather, DataType::kFloat32), &own);
  EXPECT_EQ(&choice.own(), &own);
}

TEST(BackendChoiceTest, TheLatestPreferredIsTriedFirst) {
  RecordingBackend own(0, 2);
  NarrowBackend first(Collective::kAllreduce, DataType::kFloat32);
  NarrowBackend second(Collective::kAllreduce, DataType::kFloat32);
  BackendChoice choice("set", &own, "the set's own");
  choice.prefer(&first, "offered first");
  EXPECT_EQ(&choice.pick(Collective::kAllreduce, DataType::kFloat32), &first);
  choice.prefer(&second, "offered later");  // forgets the picks made so far
  EXPECT_EQ(&choice.pick(Collective::kAllreduce, DataType::kFloat32), &second);
}

// What is built over the set's host backends (the staged GPU path) calls the choice itself.
TEST(BackendChoiceTest, AsABackendItSendsEachCallToItsPick) {
  RecordingBackend own(0, 2);
  NarrowBackend narrow(Collective::kAllreduce, DataType::kFloat64);
  BackendChoice choice("set", &own, "the set's own");
  choice.prefer(&narrow, "a test");
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
