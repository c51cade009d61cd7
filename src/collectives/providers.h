#pragma once
// The providers of a process set's collectives, in the one order they are preferred, and the
// one place that assembles them into a set's choice for one memory (BackendChoice). Each
// provider says, of the set it is asked about, whether it serves it and why; assemble() asks
// every provider of the memory and offers the backends made in the registry's order, so the
// first that serves a batch runs it:
//
//   host memory: the hierarchical allreduce, shared memory, the set's own group (MPI or Gloo)
//   GPU memory:  the hierarchical allreduce, NCCL, the set's host backends staged through
//                pinned memory
//
// The last provider of each memory serves every set and every collective, so every batch
// has one. The providers are asked last first: a provider built on the others (the
// hierarchical allreduce) is made after them. Every member asks with the same inputs (the
// settings, the rank map, the agreed GPU path), so every member gets the same choice, and a
// provider whose making is collective makes it on every member or fails on every member.
//
// A new transport arrives as a World (collectives/world.h) whose groups carry the set's own
// backend, or as an entry here.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "collectives/backend_choice.h"
#include "collectives/gpu_path.h"
#include "collectives/world.h"
#include "topology/rank_map.h"

namespace chorus {

struct TopologyGroups;

enum class Memory { kHost, kGpu };

/// What the GPU providers make their backends with: the set's GPU context (its stream, its
/// batched copies, its bounded waits).
class GpuMaker {
 public:
  virtual ~GpuMaker() = default;
  /// Device memory moved by `host` (a group's host backends), staged through pinned buffers.
  virtual std::unique_ptr<Backend> staged(Backend& host) = 0;
  /// A NCCL communicator over the members of `host`, made by them alone (collective over
  /// them); `label` names it in messages.
  virtual StatusOr<std::unique_ptr<Backend>> nccl(Backend& host, const std::string& label) = 0;
  /// What an assembly that failed had made: the failure may have left the members out of
  /// step, and destroying a communicator then may wait for peers that will not come (NCCL's),
  /// so the maker decides when, or whether, to destroy it.
  virtual void keep(std::unique_ptr<Backend> made) = 0;
};

/// What a provider is asked about: one process set (or a topology group), the same on every
/// member.
struct ProviderSet {
  std::string label;       ///< "global", "set 3", "local group": the set in the log
  std::vector<int> ranks;  ///< its global ranks, in set order
  bool global_set = false;
  const RankMap* map = nullptr;
  /// CHORUS_SHARED_MEMORY and CHORUS_HIERARCHICAL_ALLREDUCE, the same on every rank.
  bool shared_memory = true;
  std::optional<bool> hierarchical;
  /// The local and cross groups (the global set's, where the runtime built them), or null.
  const TopologyGroups* groups = nullptr;
  /// Host memory: the set's group, whose backend serves everything.
  Group* group = nullptr;
  /// GPU memory: the set's host backends (its host choice), the agreed path, and the maker.
  Backend* host = nullptr;
  const GpuPathChoice* gpu_path = nullptr;
  GpuMaker* gpu = nullptr;
  /// "set 3 (ranks [0, 2])": names the set in NCCL's messages.
  std::string set_name;
};

/// What a provider made for a set is the offer to the set's choice (BackendChoice::Offer: the
/// backend, why it is offered, what it owns), with no backend where the provider does not
/// serve the set (its own debug log says why); assemble() fills in the provider's name.
using Offered = BackendChoice::Offer;

struct Provider {
  const char* name;
  Memory memory;
  /// Its backend for `set`; `below` is the backend of the memory's last provider, made
  /// first, which serves everything (the hierarchical allreduce runs on it).
  StatusOr<Offered> (*offer)(const ProviderSet& set, Backend* below);
};

/// Every provider, preferred first within each memory.
const std::vector<Provider>& provider_registry();

/// The choice of `set`'s backends for `memory`: every provider of the memory asked (last
/// first), those that serve the set offered in the registry's order. Collective over the
/// set where a provider's making is; fails on every member where it fails on one. After a
/// failure what was made goes to the GPU maker (GpuMaker::keep), or is destroyed (host).
StatusOr<BackendChoice> assemble(Memory memory, const ProviderSet& set);

}  // namespace chorus
