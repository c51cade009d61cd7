// reduce to one root under mpirun with 1 to 4 ranks: every root, dtype and op against
// independently computed sums, the other ranks' output and every input left alone, the
// allreduce's bits on the root, and a process set.
#include <gtest/gtest.h>

#include "chorus/chorus.h"
#include "test_data.h"

namespace chorus::testing {
namespace {

TEST(Reduce, EveryRootDtypeAndOpOutOfPlace) {
  const std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                     ReduceOp::kMax, ReduceOp::kProduct};
  for (int root = 0; root < size(); ++root) {
    for (DataType t : all_dtypes()) {
      for (ReduceOp op : ops) {
        for (int64_t c : {int64_t{1}, int64_t{4099}}) {
          Buffer in(t, {c}), out(t, {c});
          for (int64_t i = 0; i < c; ++i) {
            in.set(i, value(t, rank(), i));
            out.set(i, 3);  // what a rank other than the root must still hold
          }
          ReduceOptions o;
          o.op = op;
          const std::string what = "root " + std::to_string(root) + " " + label(t, op, c);
          Status s = reduce("rd." + what, in.ref(), out.ref(), root, o).wait();
          ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
          for (int64_t i = 0; i < c; ++i) {
            ASSERT_EQ(in.at(i), value(t, rank(), i)) << what << ": input must be left alone";
            ASSERT_EQ(out.at(i), rank() == root ? expected(t, op, size(), i) : 3)
                << what << " at " << i;
          }
        }
      }
    }
  }
}

// Values whose sums round, so that only the same combination order gives the same bits.
TEST(Reduce, InPlaceWithScalingGivesTheAllreduceBits) {
  const int64_t count = 70001;
  const int root = size() - 1;
  for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat64}) {
    Buffer mine(t, {count}), all(t, {count});
    for (int64_t i = 0; i < count; ++i) {
      const double v = 1.0 / (3 + rank() + (i % 97)) + 1e-3 * static_cast<double>(i % 13);
      mine.set(i, v);
      all.set(i, v);
    }
    const Buffer before = mine;
    ReduceOptions o;
    o.op = ReduceOp::kAverage;
    o.prescale = 0.7;
    o.postscale = 3.0;
    const std::string what = dtype_name(t);
    ASSERT_TRUE(reduce("rd.bits." + what, mine.ref(), mine.ref(), root, o).wait().ok()) << what;
    ASSERT_TRUE(allreduce("ar.bits." + what, all.ref(), all.ref(), o).wait().ok()) << what;
    if (rank() == root) {
      EXPECT_EQ(mine.bytes, all.bytes) << what << ": reduce and allreduce differ on the root";
    } else {
      EXPECT_EQ(mine.bytes, before.bytes) << what << ": a rank other than the root was written";
    }
  }
}

TEST(Reduce, WithinAProcessSetRepeatedUnderOneName) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks for a set smaller than the world";
  std::vector<int> evens;
  for (int r = 0; r < size(); r += 2) evens.push_back(r);
  StatusOr<ProcessSet> set = add_process_set(evens);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  if (rank() % 2 == 0) {
    const int n = static_cast<int>(evens.size());
    for (int step = 0; step < 3; ++step) {
      Buffer b(DataType::kInt32, {5});
      for (int64_t i = 0; i < 5; ++i) b.set(i, rank() + step);
      ReduceOptions o;
      o.op = ReduceOp::kSum;
      o.process_set = *set;
      // Set rank n - 1 is the set's last even global rank.
      ASSERT_TRUE(reduce("rd.set", b.ref(), b.ref(), n - 1, o).wait().ok());
      int sum = 0;
      for (int r : evens) sum += r + step;
      EXPECT_EQ(b.at(4), rank() == evens.back() ? sum : rank() + step) << "step " << step;
    }
  }
  ASSERT_TRUE(remove_process_set(*set).ok());
}

}  // namespace
}  // namespace chorus::testing
