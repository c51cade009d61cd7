#include "collectives/hierarchical_allreduce.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

namespace chorus {

bool hierarchical_layout(const RankMap& map, std::string* reason) {
  auto no = [&](const char* why) {
    if (reason) *reason = why;
    return false;
  };
  if (map.cross_size < 2) return no("all ranks are on one host");
  if (map.local_size < 2) return no("one rank per host: nothing to reduce inside a node");
  if (!map.uniform) return no("hosts run different numbers of ranks");
  if (reason) *reason = map.layout();
  return true;
}

bool hierarchical_groups_needed(std::optional<bool> requested, const RankMap& map) {
  if (requested) return *requested;
  return hierarchical_layout(map, nullptr);
}

bool use_hierarchical_host_allreduce(std::optional<bool> requested, bool global_set,
                                     const RankMap& map, std::string* reason) {
  auto no = [&](const std::string& why) {
    if (reason) *reason = why;
    return false;
  };
  if (requested == false) return no("CHORUS_HIERARCHICAL_ALLREDUCE=0 turns it off");
  if (!global_set) return no("only the global process set has local and cross groups");
  std::string layout;
  if (!hierarchical_layout(map, &layout)) return no(layout);
  if (reason) *reason = std::string(requested ? "as requested" : "automatic") + ": " + layout;
  return true;
}

std::vector<int64_t> hierarchical_blocks(int64_t count, int parts, int64_t align) {
  if (parts < 1) parts = 1;
  if (align < 1) align = 1;
  const int64_t units = (count + align - 1) / align;
  const int64_t base = units / parts;
  const int64_t extra = units % parts;
  auto boundary = [&](int64_t i) {
    return std::min(count, align * (i * base + std::min(i, extra)));
  };
  std::vector<int64_t> blocks(static_cast<std::size_t>(parts));
  for (int i = 0; i < parts; ++i) blocks[i] = boundary(i + 1) - boundary(i);
  return blocks;
}

StatusOr<std::unique_ptr<HierarchicalBackend>> HierarchicalBackend::create(Backend* flat,
                                                                           Backend* local,
                                                                           Backend* cross,
                                                                           bool host_memory) {
  if (!flat || !local || !cross) {
    return failed_precondition("hierarchical allreduce needs flat, local and cross backends");
  }
  if (local->size() * cross->size() != flat->size()) {
    return failed_precondition(
        "hierarchical allreduce needs a uniform layout: " + std::to_string(local->size()) +
        " local ranks x " + std::to_string(cross->size()) +
        " hosts != " + std::to_string(flat->size()) + " ranks");
  }
  return std::unique_ptr<HierarchicalBackend>(
      new HierarchicalBackend(flat, local, cross, host_memory));
}

// A sequence of calls on two groups: a step that fails leaves its own group out of step,
// but the other group's members still wait for this rank there, so every step on a group
// still in step is made, carrying the first failure (its data is then wrong; the set's
// verdict fails the batch on every member, core/batch_verdict.h). A step on a group whose
// earlier step failed is not made: its members fail by their own bound.
Status HierarchicalBackend::allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                                      ReduceOp op, kernels::Scale scale) {
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  const std::vector<int64_t> blocks =
      hierarchical_blocks(count, local_->size(), std::max<int64_t>(1, kAlignBytes / esz));
  const int me = local_->rank();
  int64_t offset = 0;
  for (int i = 0; i < me; ++i) offset += blocks[i];
  char* shard = static_cast<char*>(recv) + offset * esz;
  // Unscaled inside the node: the scale belongs to the final sum (integer averages truncate
  // once, after everything is added).
  const Status local = local_->reducescatter(send, shard, blocks, dtype, op, kernels::Scale{});
  // Every member of the cross group has this local_rank, hence this block size: they all
  // skip an empty shard together.
  const Status cross =
      blocks[me] > 0 ? cross_->allreduce(shard, shard, blocks[me], dtype, op, scale) : Status();
  if (!local.ok()) return local;
  std::vector<int64_t> bytes(blocks.size());
  for (std::size_t i = 0; i < blocks.size(); ++i) bytes[i] = blocks[i] * esz;
  const Status gathered = local_->allgatherv(shard, recv, bytes);
  return !cross.ok() ? cross : gathered;
}

Status HierarchicalBackend::reducescatter(const void* send, void* recv,
                                          const std::vector<int64_t>& counts, DataType dtype,
                                          ReduceOp op, kernels::Scale scale) {
  if (!host_memory_) return not_served(Collective::kReducescatter);
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  int64_t total = 0, offset = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (static_cast<int>(r) == rank()) offset = total;
    total += counts[r];
  }
  std::vector<char> whole(static_cast<std::size_t>(total * esz));
  const Status s = allreduce(send, whole.data(), total, dtype, op, scale);
  if (s.ok() && counts[rank()] > 0) {
    std::memcpy(recv, whole.data() + offset * esz, static_cast<std::size_t>(counts[rank()] * esz));
  }
  return s;
}

}  // namespace chorus
