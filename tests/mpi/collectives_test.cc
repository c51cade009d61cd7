// Every collective against independently computed results, on every dtype, under mpirun
// with 1 to 4 ranks. Data are small integers, exact in every dtype, so the expected values
// do not depend on the order of the reduction.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "chorus/chorus.h"
#include "test_data.h"

namespace chorus::testing {
namespace {

TEST(Ranks, MatchTheLauncher) {
  EXPECT_GE(size(), 1);
  EXPECT_GE(rank(), 0);
  EXPECT_LT(rank(), size());
  EXPECT_EQ(local_size() * cross_size(), size());  // one host here, or uniform hosts
  EXPECT_LT(local_rank(), local_size());
}

TEST(Allreduce, EveryDtypeOpAndSizeInPlace) {
  const std::vector<int64_t> counts = {0, 1, 7, 4099, 70001};
  const std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                     ReduceOp::kMax, ReduceOp::kProduct};
  std::vector<Buffer> buffers;
  std::vector<std::tuple<DataType, ReduceOp, int64_t>> cases;
  for (DataType t : all_dtypes())
    for (ReduceOp op : ops)
      for (int64_t c : counts) {
        buffers.emplace_back(t, std::vector<int64_t>{c});
        for (int64_t i = 0; i < c; ++i) buffers.back().set(i, value(t, rank(), i));
        cases.emplace_back(t, op, c);
      }
  // All submitted before any wait: the runtime fuses what it can.
  std::vector<Handle> handles;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    auto [t, op, c] = cases[k];
    AllreduceOptions o;
    o.op = op;
    handles.push_back(allreduce("ar." + label(t, op, c), buffers[k].ref(), buffers[k].ref(), o));
  }
  for (std::size_t k = 0; k < cases.size(); ++k) {
    auto [t, op, c] = cases[k];
    ASSERT_TRUE(handles[k].wait().ok())
        << label(t, op, c) << ": " << handles[k].status().to_string();
    for (int64_t i = 0; i < c; ++i) {
      ASSERT_EQ(buffers[k].at(i), expected(t, op, size(), i)) << label(t, op, c) << " at " << i;
    }
  }
}

TEST(Allreduce, OutOfPlaceWithScalingAndLargerThanFusionBuffer) {
  const int64_t count = (5 << 20) / 4 + 3;  // past the 4 MiB fusion threshold, odd length
  for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat64}) {
    Buffer in(t, {count}), out(t, {count});
    for (int64_t i = 0; i < count; ++i) in.set(i, value(t, rank(), i));
    AllreduceOptions o;
    o.op = ReduceOp::kSum;
    o.prescale = 0.5;
    o.postscale = 4.0;
    Status s = allreduce("big." + std::string(dtype_name(t)), in.ref(), out.ref(), o).wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (int64_t i = 0; i < count; i += 997) {
      // (sum of v/2) * 4 == 2 * sum v, exact for these small integers.
      ASSERT_EQ(out.at(i), 2 * expected(t, ReduceOp::kSum, size(), i)) << dtype_name(t) << " " << i;
      ASSERT_EQ(in.at(i), value(t, rank(), i)) << "input must be left alone";
    }
  }
}

TEST(Allreduce, GroupedCompletesTogether) {
  std::vector<Buffer> bufs;
  std::vector<TensorRef> refs;
  for (int k = 0; k < 5; ++k) {
    bufs.emplace_back(DataType::kFloat32, std::vector<int64_t>{k * 100 + 3, 2});
  }
  for (auto& b : bufs) {
    for (int64_t i = 0; i < b.count(); ++i) b.set(i, value(b.dtype, rank(), i));
    refs.push_back(b.ref());
  }
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  std::vector<std::string> names;
  for (int k = 0; k < 5; ++k) names.push_back("group.t" + std::to_string(k));
  Handle h = grouped_allreduce(names, refs, refs, o);
  ASSERT_TRUE(h.wait().ok()) << h.status().to_string();
  for (auto& b : bufs) {
    for (int64_t i = 0; i < b.count(); ++i) {
      ASSERT_EQ(b.at(i), expected(b.dtype, ReduceOp::kSum, size(), i));
    }
  }
}

TEST(Allreduce, RepeatedNamesUseTheCacheAndShapeChangesRenegotiate) {
  for (int step = 0; step < 6; ++step) {
    const int64_t c = step < 3 ? 10 : 17;  // the shape changes under the same name
    Buffer b(DataType::kInt32, {c});
    for (int64_t i = 0; i < c; ++i) b.set(i, value(b.dtype, rank(), i) + step);
    AllreduceOptions o;
    o.op = ReduceOp::kSum;
    ASSERT_TRUE(allreduce("cached", b.ref(), b.ref(), o).wait().ok());
    for (int64_t i = 0; i < c; ++i) {
      ASSERT_EQ(b.at(i), expected(b.dtype, ReduceOp::kSum, size(), i) + size() * step);
    }
  }
}

TEST(Allreduce, FusedAndAloneGiveTheSameBits) {
  // Random floats, so the order of the reduction matters to the bits.
  const int kTensors = 24;
  std::vector<Buffer> fused, alone;
  uint64_t seed = 1234567 + 1000003ULL * rank();
  auto next = [&] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0;
  };
  for (int k = 0; k < kTensors; ++k) {
    fused.emplace_back(DataType::kFloat32, std::vector<int64_t>{1000 + 37 * k});
    for (int64_t i = 0; i < fused.back().count(); ++i) fused.back().set(i, next() * (k + 1));
    alone.push_back(fused.back());
  }
  AllreduceOptions o;
  o.op = ReduceOp::kAverage;
  std::vector<Handle> hs;
  for (int k = 0; k < kTensors; ++k) {
    hs.push_back(allreduce("fused." + std::to_string(k), fused[k].ref(), fused[k].ref(), o));
  }
  for (auto& h : hs) ASSERT_TRUE(h.wait().ok());
  for (int k = 0; k < kTensors; ++k) {
    ASSERT_TRUE(
        allreduce("alone." + std::to_string(k), alone[k].ref(), alone[k].ref(), o).wait().ok());
  }
  for (int k = 0; k < kTensors; ++k) {
    ASSERT_EQ(0, std::memcmp(fused[k].bytes.data(), alone[k].bytes.data(), fused[k].bytes.size()))
        << "tensor " << k;
  }
}

TEST(Allgather, UnevenFirstDimensions) {
  for (DataType t : all_dtypes()) {
    const int64_t rows = rank() % 3;  // some ranks send nothing
    Buffer in(t, {rows, 3});
    for (int64_t i = 0; i < in.count(); ++i) in.set(i, value(t, rank(), i));
    Handle h = allgather(std::string("ag.") + dtype_name(t), in.ref());
    ASSERT_TRUE(h.wait().ok()) << h.status().to_string();
    const TensorRef& out = h.output();
    int64_t total = 0;
    for (int r = 0; r < size(); ++r) total += r % 3;
    ASSERT_EQ(out.shape, (std::vector<int64_t>{total, 3}));
    int64_t at = 0;
    for (int r = 0; r < size(); ++r) {
      for (int64_t i = 0; i < (r % 3) * 3; ++i, ++at) {
        ASSERT_EQ(load(t, out.data, at), value(t, r, i)) << dtype_name(t) << " from rank " << r;
      }
    }
  }
}

TEST(Allgather, IntoCallerAllocatedOutput) {
  Buffer in(DataType::kInt64, {2});
  in.set(0, rank());
  in.set(1, -rank());
  Buffer out(DataType::kInt64, {2LL * size()});
  AllgatherOptions o;
  o.allocate = [&](const std::vector<int64_t>& shape) -> StatusOr<TensorRef> {
    if (shape != out.shape) return invalid_argument("unexpected shape");
    return out.ref();
  };
  ASSERT_TRUE(allgather("ag.alloc", in.ref(), o).wait().ok());
  for (int r = 0; r < size(); ++r) {
    EXPECT_EQ(out.at(2 * r), r);
    EXPECT_EQ(out.at(2 * r + 1), -r);
  }
}

// An allocator on the last rank hands out memory on another device: the collective never
// writes it, and every rank fails the allgather with one verdict naming that rank; the job
// goes on.
TEST(Allgather, AllocatorOnAnotherDeviceFailsEveryRank) {
  const int last = size() - 1;
  Buffer in(DataType::kInt64, {2});
  Buffer out(DataType::kInt64, {2LL * size()});
  AllgatherOptions o;
  o.allocate = [&](const std::vector<int64_t>&) -> StatusOr<TensorRef> {
    TensorRef t = out.ref();
    if (rank() == last) t.device = Device::cuda(0);
    return t;
  };
  Status s = allgather("ag.wrong_device", in.ref(), o).wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("allgather 'ag.wrong_device': failed on rank " + std::to_string(last) +
                             ": the output allocator returned"),
            std::string::npos)
      << s.to_string();
  EXPECT_NE(s.message().find("expected int64[" + std::to_string(2 * size()) + "] on cpu"),
            std::string::npos)
      << s.to_string();
  Buffer again(DataType::kInt64, {2});
  EXPECT_TRUE(allgather("ag.after_wrong_device", again.ref()).wait().ok());
}

TEST(Broadcast, FromEveryRoot) {
  for (int root = 0; root < size(); ++root) {
    for (DataType t : all_dtypes()) {
      Buffer b(t, {33});
      for (int64_t i = 0; i < 33; ++i) b.set(i, value(t, rank(), i));
      Status s = broadcast("bc." + std::to_string(root) + dtype_name(t), b.ref(), root).wait();
      ASSERT_TRUE(s.ok()) << s.to_string();
      for (int64_t i = 0; i < 33; ++i) ASSERT_EQ(b.at(i), value(t, root, i));
    }
  }
}

TEST(Alltoall, UnevenSplits) {
  const int n = size();
  // Rank r sends (r + j) % 3 rows to rank j; rows carry (sender, receiver, row) tags.
  std::vector<int64_t> splits(n);
  for (int j = 0; j < n; ++j) splits[j] = (rank() + j) % 3;
  const int64_t rows = std::accumulate(splits.begin(), splits.end(), int64_t{0});
  Buffer in(DataType::kInt32, {rows, 2});
  int64_t row = 0;
  for (int j = 0; j < n; ++j) {
    for (int64_t k = 0; k < splits[j]; ++k, ++row) {
      in.set(2 * row, rank() * 100 + j);
      in.set(2 * row + 1, k);
    }
  }
  Handle h = alltoall("a2a", in.ref(), splits);
  ASSERT_TRUE(h.wait().ok()) << h.status().to_string();
  const TensorRef& out = h.output();
  int64_t at = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(h.received_splits()[i], (i + rank()) % 3);
    for (int64_t k = 0; k < (i + rank()) % 3; ++k, ++at) {
      ASSERT_EQ(load(DataType::kInt32, out.data, 2 * at), i * 100 + rank());
      ASSERT_EQ(load(DataType::kInt32, out.data, 2 * at + 1), k);
    }
  }
  ASSERT_EQ(out.shape[0], at);
}

TEST(Reducescatter, UnevenRowsEveryDtype) {
  const int n = size();
  const int64_t rows = 2 * n + 1;
  for (DataType t : all_dtypes()) {
    Buffer in(t, {rows, 3});
    for (int64_t i = 0; i < in.count(); ++i) in.set(i, value(t, rank(), i));
    ReducescatterOptions o;
    o.op = ReduceOp::kSum;
    Handle h = reducescatter(std::string("rs.") + dtype_name(t), in.ref(), o);
    ASSERT_TRUE(h.wait().ok()) << h.status().to_string();
    const int64_t mine = rows / n + (rank() < rows % n ? 1 : 0);
    int64_t first = 0;
    for (int r = 0; r < rank(); ++r) first += rows / n + (r < rows % n ? 1 : 0);
    ASSERT_EQ(h.output().shape, (std::vector<int64_t>{mine, 3}));
    for (int64_t i = 0; i < mine * 3; ++i) {
      ASSERT_EQ(load(t, h.output().data, i), expected(t, ReduceOp::kSum, n, first * 3 + i))
          << dtype_name(t);
    }
  }
}

// Rows of rank r's member k: r + k (0 for rank 0's first), with value(t, r, i) data.
Buffer grouped_input(DataType t, int r, int k) {
  Buffer in(t, {r + k, 2});
  for (int64_t i = 0; i < in.count(); ++i) in.set(i, value(t, r, i + k));
  return in;
}

void expect_gathered(const TensorRef& out, DataType t, int k) {
  int64_t total = 0;
  for (int r = 0; r < size(); ++r) total += r + k;
  ASSERT_EQ(out.dtype, t);
  ASSERT_EQ(out.shape, (std::vector<int64_t>{total, 2}));
  int64_t at = 0;
  for (int r = 0; r < size(); ++r) {
    for (int64_t i = 0; i < (r + k) * 2; ++i, ++at) {
      ASSERT_EQ(load(t, out.data, at), value(t, r, i + k)) << dtype_name(t) << " rank " << r;
    }
  }
}

TEST(Grouped, AllgatherMembersKeepTheirPlacesDtypesAndAllocators) {
  const std::vector<DataType> types = {DataType::kInt16, DataType::kFloat64, DataType::kUInt8};
  std::vector<Buffer> in;
  std::vector<TensorRef> refs;
  for (int k = 0; k < 3; ++k) in.push_back(grouped_input(types[k], rank(), k));
  for (Buffer& b : in) refs.push_back(b.ref());
  const std::vector<std::string> names = {"gag.a", "gag.b", "gag.c"};
  // Twice: negotiated, then from the response cache; the second time into caller memory.
  for (int round = 0; round < 2; ++round) {
    GroupedAllgatherOptions o;
    std::vector<Buffer> out;
    std::vector<int> calls(3, 0);
    if (round == 1) {
      out.reserve(3);
      for (int k = 0; k < 3; ++k) {
        int64_t total = 0;
        for (int r = 0; r < size(); ++r) total += r + k;
        out.emplace_back(types[k], std::vector<int64_t>{total, 2});
        o.allocate.push_back([&, k](const std::vector<int64_t>& shape) -> StatusOr<TensorRef> {
          ++calls[k];
          if (shape != out[k].shape) return invalid_argument("unexpected shape");
          return out[k].ref();
        });
      }
    }
    Handle h = grouped_allgather(names, refs, o);
    ASSERT_TRUE(h.wait().ok()) << h.status().to_string();
    for (int k = 0; k < 3; ++k) {
      expect_gathered(h.output(k), types[k], k);
      if (round == 1) {
        EXPECT_EQ(calls[k], 1);
        EXPECT_EQ(h.output(k).data, out[k].ref().data);
      }
    }
  }
}

TEST(Grouped, ReducescatterWithScalingInOneHandle) {
  const int n = size();
  const std::vector<DataType> types = {DataType::kInt16, DataType::kFloat32};
  std::vector<Buffer> in;
  std::vector<TensorRef> refs;
  for (DataType t : types) {
    in.emplace_back(t, std::vector<int64_t>{2 * n + 1, 3});
    for (int64_t i = 0; i < in.back().count(); ++i) in.back().set(i, value(t, rank(), i));
    refs.push_back(in.back().ref());
  }
  GroupedReducescatterOptions o;
  o.op = ReduceOp::kAverage;
  o.postscale = 2.0;
  Handle h = grouped_reducescatter({}, refs, o);
  ASSERT_TRUE(h.wait().ok()) << h.status().to_string();
  const int64_t rows = 2 * n + 1;
  const int64_t mine = rows / n + (rank() < rows % n ? 1 : 0);
  int64_t first = 0;
  for (int r = 0; r < rank(); ++r) first += rows / n + (r < rows % n ? 1 : 0);
  for (std::size_t k = 0; k < types.size(); ++k) {
    ASSERT_EQ(h.output(k).shape, (std::vector<int64_t>{mine, 3}));
    for (int64_t i = 0; i < mine * 3; ++i) {
      ASSERT_EQ(load(types[k], h.output(k).data, i),
                expected(types[k], ReduceOp::kAverage, n, first * 3 + i, 2.0))
          << dtype_name(types[k]) << " element " << i;
    }
  }
}

TEST(Grouped, FusedMembersGiveTheBitsOfMembersAlone) {
  // Fractions whose sums round differently in other orders; a fused group must combine
  // every element in the same set-rank order as the member alone.
  const int n = size();
  std::vector<Buffer> in;
  for (int k = 0; k < 3; ++k) {
    in.emplace_back(DataType::kFloat32, std::vector<int64_t>{2 * n + k, 5});
    for (int64_t i = 0; i < in.back().count(); ++i) {
      in.back().set(i, 0.1 * (i + 1) * (rank() + 1) + 1e-3 * k + 1.0 / (3 + rank()));
    }
  }
  std::vector<TensorRef> refs;
  for (Buffer& b : in) refs.push_back(b.ref());
  GroupedReducescatterOptions o;
  o.op = ReduceOp::kAverage;
  o.prescale = 0.3;
  Handle fused = grouped_reducescatter({}, refs, o);
  Handle gathered = grouped_allgather({}, refs);
  ASSERT_TRUE(fused.wait().ok()) << fused.status().to_string();
  ASSERT_TRUE(gathered.wait().ok()) << gathered.status().to_string();
  for (int k = 0; k < 3; ++k) {
    ReducescatterOptions one;
    one.op = o.op;
    one.prescale = o.prescale;
    Handle alone = reducescatter("", refs[k], one);
    Handle gathered_alone = allgather("", refs[k]);
    ASSERT_TRUE(alone.wait().ok() && gathered_alone.wait().ok());
    for (auto [a, b] : {std::pair{&fused.output(k), &alone.output()},
                        std::pair{&gathered.output(k), &gathered_alone.output()}}) {
      ASSERT_EQ(a->shape, b->shape) << "member " << k;
      EXPECT_EQ(0, std::memcmp(a->data, b->data, a->num_bytes())) << "member " << k;
    }
  }
}

TEST(Grouped, BadArgumentsAreRefusedAtTheCall) {
  Buffer scalar(DataType::kFloat32, {});
  Buffer rows(DataType::kFloat32, {size()});
  Handle h = grouped_allgather({}, {rows.ref(), scalar.ref()});
  EXPECT_TRUE(h.refused());
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  GroupedReducescatterOptions o;
  o.allocate.resize(3);
  h = grouped_reducescatter({}, {rows.ref()}, o);
  EXPECT_TRUE(h.refused());
  EXPECT_NE(h.status().message().find("1 tensors"), std::string::npos) << h.status().message();
  h = grouped_allgather({"only.one.name"}, {rows.ref(), rows.ref()});
  EXPECT_TRUE(h.refused());
  h = grouped_allgather({}, {});
  EXPECT_TRUE(h.refused());
}

TEST(Barrier, Completes) {
  for (int k = 0; k < 3; ++k) ASSERT_TRUE(barrier().wait().ok());
}

TEST(Names, DuplicateInFlightFailsTheSecond) {
  // "dup.<r>" cannot complete before the barrier: only rank r has submitted it. So the
  // second submission on rank r is certainly a duplicate in flight. On one rank every
  // collective may complete at once, so nothing is certainly in flight.
  if (size() < 2) GTEST_SKIP() << "needs two ranks to hold a collective in flight";
  const int n = size();
  std::vector<Buffer> mine;
  for (int k = 0; k < 2; ++k) mine.emplace_back(DataType::kFloat32, std::vector<int64_t>{4});
  const std::string name = "dup." + std::to_string(rank());
  Handle first = allreduce(name, mine[0].ref(), mine[0].ref());
  Handle second = allreduce(name, mine[1].ref(), mine[1].ref());
  EXPECT_TRUE(second.refused());  // at the call, so adapters can raise there
  EXPECT_FALSE(first.refused());
  Status s = second.wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("already in flight"), std::string::npos) << s.message();
  EXPECT_FALSE(first.poll() && n > 1);
  ASSERT_TRUE(barrier().wait().ok());
  std::vector<Buffer> others;
  std::vector<Handle> hs;
  for (int q = 0; q < n; ++q) others.emplace_back(DataType::kFloat32, std::vector<int64_t>{4});
  for (int q = 0; q < n; ++q) {
    if (q != rank())
      hs.push_back(allreduce("dup." + std::to_string(q), others[q].ref(), others[q].ref()));
  }
  EXPECT_TRUE(first.wait().ok());
  for (Handle& h : hs) EXPECT_TRUE(h.wait().ok());
}

TEST(Names, GeneratedNamesMatchAcrossRanks) {
  Buffer b(DataType::kFloat64, {3});
  for (int64_t i = 0; i < 3; ++i) b.set(i, value(b.dtype, rank(), i));
  AllreduceOptions o;
  o.op = ReduceOp::kSum;
  ASSERT_TRUE(allreduce("", b.ref(), b.ref(), o).wait().ok());
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(b.at(i), expected(b.dtype, ReduceOp::kSum, size(), i));
}

TEST(Join, RanksRunOutOfDataAtDifferentSteps) {
  // Rank r has r + 1 batches; the joined ranks contribute zeros to the rest.
  const int steps = size();
  for (int step = 0; step <= rank(); ++step) {
    Buffer b(DataType::kFloat32, {6});
    for (int64_t i = 0; i < 6; ++i) b.set(i, 1.0);
    AllreduceOptions o;
    o.op = ReduceOp::kSum;
    Status s = allreduce("join.step" + std::to_string(step), b.ref(), b.ref(), o).wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
    // Ranks step..size-1 still have data at this step.
    for (int64_t i = 0; i < 6; ++i) ASSERT_EQ(b.at(i), static_cast<double>(size() - step));
  }
  Handle j = join();
  ASSERT_TRUE(j.wait().ok()) << j.status().to_string();
  EXPECT_EQ(j.last_joined_rank(), steps - 1);
}

}  // namespace
}  // namespace chorus::testing
