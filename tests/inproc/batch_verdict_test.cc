// The verdict on a round's batches (core/batch_verdict.h): the pure choice and reading, the
// wire form, and the agreement among ranks as threads over the in-memory transport, which
// counts the rounds, gathers and broadcasts it took.

#include "core/batch_verdict.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/doorbell.h"
#include "core/host_rounds.h"
#include "in_memory_transport.h"

namespace chorus {
namespace {

using testing::Hub;
using testing::InMemoryTransport;

const std::vector<std::string> kBatches = {
    "allreduce 'a'", "allreduce 'b' and 1 more fused tensors", "broadcast 'c'"};

std::string batch_name(std::size_t i) { return kBatches[i]; }

BatchFailure failure(uint32_t batch, int rank, StatusCode code, std::string why,
                     bool out_of_step = false) {
  return {batch, rank, Status(code, std::move(why)), out_of_step};
}

TEST(ChooseFailures, OwnCausesFirstThenByRankAndAtMostFourABatch) {
  // Batch 1: ranks 0 and 3 gave up waiting for rank 2, whose call failed.
  std::vector<BatchFailure> all = {
      failure(1, 3, StatusCode::kAborted, "stopped waiting"),
      failure(1, 0, StatusCode::kAborted, "stopped waiting"),
      failure(1, 2, StatusCode::kInternal, "MPI_Isend failed", true),
      failure(0, 3, StatusCode::kInvalidArgument, "bad output"),
      failure(0, 1, StatusCode::kInvalidArgument, "bad output too"),
  };
  std::vector<BatchFailure> chosen = choose_failures(all);
  std::vector<std::pair<uint32_t, int>> order;
  for (const BatchFailure& f : chosen) order.push_back({f.batch, f.rank});
  EXPECT_EQ(order, (std::vector<std::pair<uint32_t, int>>{{0, 1}, {0, 3}, {1, 2}, {1, 0}, {1, 3}}));
  for (const BatchFailure& f : chosen) {
    EXPECT_EQ(f.out_of_step, f.batch == 1 && f.rank == 2) << "the set stops with batch 1's first";
    EXPECT_EQ(f.left_out, 0);
  }
  // Six members fail one batch: four are named, the first counts the other two.
  all.clear();
  for (int r = 5; r >= 0; --r) all.push_back(failure(0, r, StatusCode::kAborted, "gave up"));
  chosen = choose_failures(all);
  ASSERT_EQ(chosen.size(), 4u);
  EXPECT_EQ(chosen[0].rank, 0);
  EXPECT_EQ(chosen[3].rank, 3);
  EXPECT_EQ(chosen[0].left_out, 2);
  const RoundVerdict v = decide_verdicts(chosen, kBatches);
  EXPECT_NE(v.batches[0].message().find("on rank 3: gave up; and on 2 more ranks"),
            std::string::npos)
      << v.batches[0].to_string();
  EXPECT_FALSE(v.stop);
}

TEST(DecideVerdicts, EveryMemberReadsTheSameStatuses) {
  const RoundVerdict v =
      decide_verdicts({failure(1, 2, StatusCode::kInternal, "MPI_Isend failed", true),
                       failure(1, 0, StatusCode::kAborted, "stopped waiting for rank 2")},
                      kBatches);
  ASSERT_EQ(v.batches.size(), 3u);
  EXPECT_TRUE(v.batches[0].ok());
  EXPECT_EQ(v.batches[1].to_string(),
            Status(StatusCode::kInternal,
                   "allreduce 'b' and 1 more fused tensors: failed on rank 2: MPI_Isend failed; "
                   "on rank 0: stopped waiting for rank 2")
                .to_string());
  EXPECT_TRUE(v.batches[2].ok());
  EXPECT_TRUE(v.stop);
  EXPECT_EQ(v.stop_status.to_string(), v.batches[1].to_string());
}

// A set of job ranks [4, 7, 9]: the verdict names job ranks, and a cause that already names
// the batch does not name it twice.
TEST(DecideVerdicts, NamesJobRanksAndTheBatchOnce) {
  const RoundVerdict v = decide_verdicts(
      {failure(0, 2, StatusCode::kAborted, "allreduce 'a': GPU work did not finish")}, kBatches,
      {4, 7, 9});
  EXPECT_EQ(v.batches[0].message(), "allreduce 'a': failed on rank 9: GPU work did not finish");
}

TEST(VerdictWire, RoundTripsAndRefusesMalformedRecords) {
  std::vector<BatchFailure> in = {failure(0, 1, StatusCode::kInternal, "two\nlines", true),
                                  failure(7, 0, StatusCode::kAborted, "")};
  in[1].left_out = 3;
  StatusOr<std::vector<BatchFailure>> out = decode_failures(encode_failures(in));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].status.message(), "two\nlines");
  EXPECT_TRUE((*out)[0].out_of_step);
  EXPECT_EQ((*out)[1].batch, 7u);
  EXPECT_EQ((*out)[1].status.code(), StatusCode::kAborted);
  EXPECT_EQ((*out)[1].left_out, 3);
  for (const std::string bad :
       {"0 1 7 0 0 99\nshort", "0 1 42 0 0 0\n", "x\n", "0 1 7 0 0 3", "0 1 7 0 -1 0\n",
        "4294967296 0 7 0 0 0\n", "0 1 7 2 0 0\n", "0 1 0 0 0 0\n"}) {
    EXPECT_EQ(decode_failures(bad).status().code(), StatusCode::kDataLoss) << bad;
  }
}

// `size` ranks as threads over the in-memory transport; rank r's batches fail as mine(r)
// says, and its call failed at batch stop_batch(r) (-1: none).
std::vector<StatusOr<RoundVerdict>> agree_among(int size, Hub& hub,
                                                const std::function<std::vector<Status>(int)>& mine,
                                                const std::function<int(int)>& stop_batch) {
  std::vector<StatusOr<RoundVerdict>> out(size, StatusOr<RoundVerdict>(RoundVerdict{}));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      InMemoryTransport control(&hub, r);
      BatchVerdicts verdicts(&control, nullptr, 10, 300, "global");
      out[r] = verdicts.agree(mine(r), stop_batch(r), batch_name, /*device=*/false);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(BatchVerdicts, AHealthyRoundCostsOneAndRound) {
  Hub hub(3);
  auto out = agree_among(
      3, hub, [](int) { return std::vector<Status>(3); }, [](int) { return -1; });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(out[r].ok()) << out[r].status().to_string();
    for (const Status& s : out[r]->batches) EXPECT_TRUE(s.ok());
    EXPECT_FALSE(out[r]->stop);
  }
  EXPECT_EQ(hub.and_rounds(), 1);
  EXPECT_EQ(hub.gathers(), 0);
  EXPECT_EQ(hub.broadcasts(), 0);
}

TEST(BatchVerdicts, OneRanksPartFailsTheBatchOnEveryRankAlone) {
  Hub hub(3);
  auto out = agree_among(
      3, hub,
      [](int r) {
        std::vector<Status> mine(3);
        if (r == 2) mine[1] = Status(StatusCode::kInternal, "staging copy timed out");
        return mine;
      },
      [](int) { return -1; });
  const std::string want =
      "allreduce 'b' and 1 more fused tensors: failed on rank 2: staging copy timed out";
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(out[r].ok()) << out[r].status().to_string();
    EXPECT_TRUE(out[r]->batches[0].ok());
    EXPECT_EQ(out[r]->batches[1].message(), want) << "rank " << r;
    EXPECT_TRUE(out[r]->batches[2].ok());
    EXPECT_FALSE(out[r]->stop) << "every member took part: the set goes on";
  }
  EXPECT_EQ(hub.gathers(), 1);
  EXPECT_EQ(hub.broadcasts(), 1);
}

// The set stops with the batch whose call failed, not with an earlier batch whose part failed.
TEST(BatchVerdicts, TheSetStopsWithTheBatchWhoseCallFailed) {
  Hub hub(2);
  auto out = agree_among(
      2, hub,
      [](int r) {
        std::vector<Status> mine(3);
        if (r == 1) {
          mine[0] = Status(StatusCode::kInternal, "late input");
          mine[2] = Status(StatusCode::kInternal, "MPI_Isend failed");
        }
        return mine;
      },
      [](int r) { return r == 1 ? 2 : -1; });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(out[r].ok()) << out[r].status().to_string();
    EXPECT_TRUE(out[r]->stop);
    EXPECT_EQ(out[r]->stop_status.message(), "broadcast 'c': failed on rank 1: MPI_Isend failed");
    EXPECT_NE(out[r]->batches[0].message().find("late input"), std::string::npos);
  }
}

// On the host's board (the global set of a job on one host) the records travel through the
// board in rounds of their own, as long as the longest needs, and no message is sent: a
// trainer thread running the round agrees the same way as the background thread.
TEST(BatchVerdicts, OnTheBoardNoMessageIsSentAndLongCausesArriveWhole) {
  constexpr int n = 3;
  testing::Hub hub(n);
  std::vector<std::unique_ptr<InMemoryTransport>> transports;
  std::vector<std::unique_ptr<Doorbells>> bells;
  for (int r = 0; r < n; ++r) {
    transports.push_back(std::make_unique<InMemoryTransport>(&hub, r));
    bells.push_back(std::make_unique<Doorbells>());
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { ASSERT_TRUE(bells[r]->join_host(*transports[r]).ok()); });
  }
  for (std::thread& t : threads) t.join();
  threads.clear();
  ASSERT_TRUE(bells[0]->shared());
  const int64_t gathers = hub.gathers(), broadcasts = hub.broadcasts();
  const std::string cause(3000, 'x');  // three of the board's rounds
  std::vector<StatusOr<RoundVerdict>> out(n, StatusOr<RoundVerdict>(RoundVerdict{}));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      HostRounds rounds(transports[r].get(), bells[r].get());
      BatchVerdicts verdicts(&rounds, &rounds, 10, 300, "global");
      std::vector<Status> mine(3);
      if (r == 1) mine[1] = Status(StatusCode::kInternal, cause);
      out[r] = verdicts.agree(mine, -1, batch_name, /*device=*/false);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(out[r].ok()) << out[r].status().to_string();
    EXPECT_TRUE(out[r]->batches[0].ok());
    EXPECT_EQ(out[r]->batches[1].message(),
              "allreduce 'b' and 1 more fused tensors: failed on rank 1: " + cause)
        << "rank " << r;
    EXPECT_FALSE(out[r]->stop);
  }
  EXPECT_EQ(hub.gathers(), gathers);
  EXPECT_EQ(hub.broadcasts(), broadcasts);
}

}  // namespace
}  // namespace chorus
