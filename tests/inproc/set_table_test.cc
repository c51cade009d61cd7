// The set table (core/set_table.h) of each rank of an in-memory job, ranks as threads: the
// global set at start, a set created by a response on its members only (the others learn
// its size and that they are not in it), entries taken into their sets, an entry for a
// removed set refused, a removal failing the set's entries, and the teardown failing the
// rest. Every outcome is read from the entries' handles.

#include "core/set_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/handle_state.h"
#include "in_memory_world.h"

namespace chorus::testing {
namespace {

Entry entry(const std::string& name, int32_t set_id) {
  Entry e;
  e.request.name = name;
  e.request.op = OpType::kAllreduce;
  e.request.dtype = DataType::kFloat32;
  e.request.shape = {4};
  e.set_id = set_id;
  e.handle = std::make_shared<detail::HandleState>(1);
  return e;
}

Response add_set(int32_t id, std::vector<int32_t> ranks) {
  Response r;
  r.op = OpType::kAddProcessSet;
  r.name = "add." + std::to_string(id);
  r.new_set_id = id;
  r.ranks = std::move(ranks);
  return r;
}

Response remove_set(int32_t id) {
  Response r;
  r.op = OpType::kRemoveProcessSet;
  r.name = "remove." + std::to_string(id);
  r.target_set = id;
  return r;
}

// What one rank saw, checked on the test's thread.
struct Seen {
  Status started;
  std::size_t sets_after_add = 0;
  int rank_in_set1 = -2;
  int size_of_set1 = 0;
  Status refused;  // an entry for set 1 once removed
  Status removed;  // an entry of set 1 when it was removed
  Status closed;   // an entry of the global set at teardown
};

void run_rank(InMemoryJob& job, int rank, Seen* seen) {
  StatusOr<std::unique_ptr<World>> world = job.world(rank)(WorldOptions{});
  ASSERT_TRUE(world.ok()) << world.status().to_string();
  std::vector<std::string> hosts;
  for (int r = 0; r < job.size(); ++r) hosts.push_back(job.host(r));
  const RankMap map = compute_rank_map(hosts, rank);
  const Config config;
  Doorbells doorbells;
  TopologyGroups groups;
  RankDevice device;
  ProcessSets info;
  Observability observability({"/tmp", 64, nullptr, nullptr});
  SetTable table(&info, &observability);
  seen->started = table.start({world->get(), rank, &config, &map, &doorbells, &groups, &device});
  if (!seen->started.ok()) return;

  // Set 1 holds ranks 0 and 2; its members take an entry into it.
  ASSERT_TRUE(table.apply_changes({add_set(1, {0, 2})}).ok());
  seen->sets_after_add = table.size();
  if (std::optional<ProcessSets::Info> in = info.info(1)) {
    seen->rank_in_set1 = in->rank;
    seen->size_of_set1 = in->size;
  }
  std::vector<Entry> fresh;
  std::shared_ptr<detail::HandleState> in_set1;
  if (rank != 1) {
    fresh.push_back(entry("grad.set1", 1));
    in_set1 = fresh.back().handle;
  }
  fresh.push_back(entry("grad.global", 0));
  std::shared_ptr<detail::HandleState> in_global = fresh.back().handle;
  ASSERT_TRUE(info.claim(fresh, rank).ok());
  table.accept(fresh);
  EXPECT_TRUE(table.pending());

  ASSERT_TRUE(table.apply_changes({remove_set(1)}).ok());
  if (in_set1) seen->removed = in_set1->status;
  std::vector<Entry> late{entry("grad.late", 1)};
  std::shared_ptr<detail::HandleState> refused = late.back().handle;
  table.accept(late);
  seen->refused = refused->status;

  table.close(Status(StatusCode::kAborted, "the test ended"), false);
  seen->closed = in_global->status;
  EXPECT_EQ(0u, table.size());
}

TEST(SetTable, SetsComeAndGoAndTheirEntriesWithThem) {
  InMemoryJob job({"a", "a", "b"});
  std::vector<Seen> seen(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) threads.emplace_back([&, r] { run_rank(job, r, &seen[r]); });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(seen[r].started.ok()) << seen[r].started.to_string();
    // The global set, and set 1 on its members only; every rank knows set 1's size.
    EXPECT_EQ(r == 1 ? 1u : 2u, seen[r].sets_after_add);
    EXPECT_EQ(2, seen[r].size_of_set1);
    EXPECT_EQ(r == 0 ? 0 : r == 2 ? 1 : -1, seen[r].rank_in_set1);
    if (r != 1) {
      EXPECT_EQ(StatusCode::kAborted, seen[r].removed.code()) << seen[r].removed.to_string();
      EXPECT_NE(std::string::npos, seen[r].removed.message().find("process set 1 was removed"));
    }
    EXPECT_EQ(StatusCode::kInvalidArgument, seen[r].refused.code()) << seen[r].refused.to_string();
    EXPECT_NE(std::string::npos,
              seen[r].refused.message().find("removed before the collective ran"));
    EXPECT_EQ(StatusCode::kAborted, seen[r].closed.code()) << seen[r].closed.to_string();
    EXPECT_NE(std::string::npos, seen[r].closed.message().find("the test ended"));
  }
}

}  // namespace
}  // namespace chorus::testing
