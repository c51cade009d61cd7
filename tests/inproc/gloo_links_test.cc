// The host backend over Gloo (collectives/gloo/): ranks as threads, each with its own Gloo
// context over TCP on loopback, meeting through one in-memory store. The reductions by
// messages over GlooLinks: Every algorithm of HostReduce must give, on every rank, the bits of the
// combination tree evaluated on every rank's input (kernels/reduce_tree.h): the definition
// the MPI path is held to, so both transports give the same bits for the same set size. A
// member that never comes fails the others' waits after the liveness bound, naming it.
#include "collectives/gloo/gloo_links.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/gloo/gloo_backend.h"
#include "collectives/host_reduce.h"
#include "kernels/reduce_tree.h"

namespace chorus {
namespace {

using Connected = std::shared_ptr<gloo::Context>;

// Runs body(rank, context) on `size` threads, each over its own connected context.
void run_contexts(int size, const std::function<void(int, Connected)>& body,
                  const std::string& prefix) {
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      gloo::transport::tcp::attr attr("127.0.0.1");
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(r, size);
      gloo::rendezvous::PrefixStore scoped(prefix, store);
      context->connectFullMesh(scoped, device);
      body(r, context);
    });
  }
  for (std::thread& t : threads) t.join();
}

// Runs body(rank, links) on `size` threads, over links with the given bound.
void run_ranks(int size, double liveness, const std::function<void(int, Links&)>& body,
               const std::string& prefix) {
  run_contexts(
      size,
      [&](int r, Connected context) {
        GlooLinks links(context, liveness);
        body(r, links);
      },
      prefix);
}

float input(int rank, int64_t i) { return 1.0f / static_cast<float>(3 + rank * 7 + i % 13); }

TEST(GlooLinks, EveryAlgorithmGivesTheTreesBits) {
  for (int size : {2, 3, 4, 5}) {
    for (HostAlgorithm algorithm :
         {HostAlgorithm::kGatherAll, HostAlgorithm::kDirect, HostAlgorithm::kRecursiveDoubling,
          HostAlgorithm::kHalvingDoubling}) {
      // Large enough for several chunks and pieces of the pipelined and tree algorithms.
      const int64_t count = 200003;
      std::vector<std::vector<float>> inputs(size, std::vector<float>(count));
      std::vector<const void*> sources;
      for (int r = 0; r < size; ++r) {
        for (int64_t i = 0; i < count; ++i) inputs[r][i] = input(r, i);
        sources.push_back(inputs[r].data());
      }
      std::vector<float> want(count);
      kernels::reduce_tree(want.data(), sources.data(), size, count, DataType::kFloat32,
                           ReduceOp::kSum, kernels::Scale{});
      std::vector<std::vector<float>> got(size, std::vector<float>(count));
      std::vector<Status> status(size);
      run_ranks(
          size, 30,
          [&](int r, Links& links) {
            HostReduce reduce(links, algorithm);
            status[r] = reduce.allreduce(inputs[r].data(), got[r].data(), count, DataType::kFloat32,
                                         ReduceOp::kSum, kernels::Scale{});
          },
          "allreduce." + std::to_string(size) + "." + std::to_string(static_cast<int>(algorithm)));
      for (int r = 0; r < size; ++r) {
        ASSERT_TRUE(status[r].ok()) << status[r].to_string();
        ASSERT_EQ(std::memcmp(got[r].data(), want.data(), count * sizeof(float)), 0)
            << "rank " << r << " of " << size << ", algorithm " << static_cast<int>(algorithm);
      }
    }
  }
}

TEST(GlooLinks, ReduceScatterGivesEachRankItsBlockOfTheTree) {
  const int size = 3;
  const std::vector<int64_t> counts = {5, 70001, 2};
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  std::vector<std::vector<double>> inputs(size, std::vector<double>(total));
  std::vector<const void*> sources;
  for (int r = 0; r < size; ++r) {
    for (int64_t i = 0; i < total; ++i) inputs[r][i] = input(r, i);
    sources.push_back(inputs[r].data());
  }
  std::vector<double> want(total);
  kernels::reduce_tree(want.data(), sources.data(), size, total, DataType::kFloat64, ReduceOp::kSum,
                       kernels::Scale{});
  for (HostAlgorithm algorithm : {HostAlgorithm::kDirect, HostAlgorithm::kHalvingDoubling}) {
    std::vector<std::vector<double>> got(size);
    std::vector<Status> status(size);
    run_ranks(
        size, 30,
        [&](int r, Links& links) {
          got[r].resize(counts[r]);
          HostReduce reduce(links, algorithm);
          status[r] = reduce.reducescatter(inputs[r].data(), got[r].data(), counts,
                                           DataType::kFloat64, ReduceOp::kSum, kernels::Scale{});
        },
        "reducescatter." + std::to_string(static_cast<int>(algorithm)));
    int64_t at = 0;
    for (int r = 0; r < size; ++r) {
      ASSERT_TRUE(status[r].ok()) << status[r].to_string();
      EXPECT_EQ(std::memcmp(got[r].data(), want.data() + at, counts[r] * sizeof(double)), 0)
          << "rank " << r;
      at += counts[r];
    }
  }
}

// The last rank connects and then never takes part: the others' waits end at the bound,
// naming it alone (at 3 ranks rank 1 is there, and must not be named with it).
TEST(GlooLinks, AnAbsentMemberFailsTheWaitNamingIt) {
  for (int size : {2, 3}) {
    const int absent = size - 1;
    std::vector<Status> status(size);
    run_ranks(
        size, 1,
        [&](int r, Links& links) {
          if (r == absent) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
            return;
          }
          std::vector<float> x(16, 1.0f);
          HostReduce reduce(links, HostAlgorithm::kDirect);
          status[r] = reduce.allreduce(x.data(), x.data(), 16, DataType::kFloat32, ReduceOp::kSum,
                                       kernels::Scale{});
        },
        "absent." + std::to_string(size));
    for (int r = 0; r < absent; ++r) {
      EXPECT_EQ(status[r].code(), StatusCode::kAborted) << status[r].to_string();
      EXPECT_NE(status[r].message().find("ranks [" + std::to_string(absent) + "] took no part"),
                std::string::npos)
          << "size " << size << ", rank " << r << ": " << status[r].to_string();
    }
  }
}

// The group's data movement through Gloo's own collectives: every rank's bytes where they
// belong, uneven sizes, in place, every root, and a barrier.
TEST(GlooBackend, MovesEveryRanksBytes) {
  const int size = 3;
  auto byte = [](int from, int to, int64_t i) { return static_cast<char>(31 * from + 7 * to + i); };
  std::vector<Status> status(size, Status(StatusCode::kInternal, "not run"));
  run_contexts(
      size,
      [&](int r, Connected context) {
        GlooBackend backend(context, HostAlgorithm::kAuto, 30);
        auto check = [&](bool ok, const std::string& what) {
          if (!ok && status[r].ok()) status[r] = internal_error(what);
        };
        status[r] = Status();
        // allgatherv: rank q gives q + 2 bytes, into a buffer whose own block is the input.
        std::vector<int64_t> bytes = {2, 3, 4};
        std::vector<char> all(9);
        const int64_t at = r == 0 ? 0 : r == 1 ? 2 : 5;
        for (int64_t i = 0; i < bytes[r]; ++i) all[at + i] = byte(r, 0, i);
        Status s = backend.allgatherv(all.data() + at, all.data(), bytes);
        check(s.ok(), s.to_string());
        for (int q = 0, off = 0; q < size; off += bytes[q], ++q) {
          for (int64_t i = 0; i < bytes[q]; ++i) check(all[off + i] == byte(q, 0, i), "allgatherv");
        }
        // broadcast from every root.
        for (int root = 0; root < size; ++root) {
          std::vector<char> data(5, 0);
          if (r == root) {
            for (int64_t i = 0; i < 5; ++i) data[i] = byte(root, 1, i);
          }
          s = backend.broadcast(data.data(), 5, root);
          check(s.ok(), s.to_string());
          for (int64_t i = 0; i < 5; ++i) check(data[i] == byte(root, 1, i), "broadcast");
        }
        // alltoallv: rank q sends q + d + 1 bytes to rank d.
        std::vector<int64_t> send_bytes(size), recv_bytes(size);
        std::vector<char> out, in;
        for (int d = 0; d < size; ++d) {
          send_bytes[d] = r + d + 1;
          recv_bytes[d] = d + r + 1;
          for (int64_t i = 0; i < send_bytes[d]; ++i) out.push_back(byte(r, d, i));
        }
        in.resize(static_cast<std::size_t>(recv_bytes[0] + recv_bytes[1] + recv_bytes[2]));
        s = backend.alltoallv(out.data(), send_bytes, in.data(), recv_bytes);
        check(s.ok(), s.to_string());
        for (int q = 0, off = 0; q < size; off += static_cast<int>(recv_bytes[q]), ++q) {
          for (int64_t i = 0; i < recv_bytes[q]; ++i)
            check(in[off + i] == byte(q, r, i), "alltoallv");
        }
        s = backend.barrier();
        check(s.ok(), s.to_string());
      },
      "backend");
  for (int r = 0; r < size; ++r)
    EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r].to_string();
}

}  // namespace
}  // namespace chorus
