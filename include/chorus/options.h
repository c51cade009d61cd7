#pragma once
/// \file
/// Options for init() and for each collective.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chorus/rendezvous.h"
#include "chorus/status.h"
#include "chorus/types.h"

namespace chorus {

/// Programmatic overrides of the CHORUS_* environment. A field that is set wins over its
/// variable; an unset field falls back to the variable, then to the default.
/// hierarchical_allreduce: true forces it on, false off; unset: the variable, and when that
/// is unset too, the automatic choice. gpu_backend: "auto", "nccl" or "mpi". host_algorithm:
/// "auto", "gather", "direct", "doubling" or "halving". controller: "auto", "mpi" or "gloo".
struct Options {
  std::optional<int64_t> fusion_threshold_bytes;  ///< CHORUS_FUSION_THRESHOLD
  std::optional<double> cycle_time_ms;            ///< CHORUS_CYCLE_TIME
  std::optional<int64_t> cache_capacity;          ///< CHORUS_CACHE_CAPACITY
  std::optional<std::string> timeline_path;       ///< CHORUS_TIMELINE
  std::optional<int64_t> timeline_max_mb;         ///< CHORUS_TIMELINE_MAX_MB
  std::optional<bool> timeline_mark_cycles;       ///< CHORUS_TIMELINE_MARK_CYCLES
  std::optional<std::string> debug_dir;           ///< CHORUS_DEBUG_DIR
  std::optional<double> stall_check_seconds;      ///< CHORUS_STALL_CHECK_SECONDS
  std::optional<double> stall_shutdown_seconds;   ///< CHORUS_STALL_SHUTDOWN_SECONDS
  std::optional<double> liveness_seconds;         ///< CHORUS_LIVENESS_SECONDS
  std::optional<double> gpu_timeout_seconds;      ///< CHORUS_GPU_TIMEOUT_SECONDS
  std::optional<bool> hierarchical_allreduce;     ///< CHORUS_HIERARCHICAL_ALLREDUCE
  std::optional<std::string> log_level;           ///< CHORUS_LOG_LEVEL
  std::optional<std::string> bind;                ///< CHORUS_BIND
  std::optional<std::string> gpu_backend;         ///< CHORUS_GPU_BACKEND
  std::optional<std::string> host_algorithm;      ///< CHORUS_HOST_ALGORITHM
  std::optional<bool> shared_memory;              ///< CHORUS_SHARED_MEMORY
  std::optional<std::string> controller;          ///< CHORUS_CONTROLLER
  std::optional<bool> autotune;                   ///< CHORUS_AUTOTUNE
  std::optional<std::string> autotune_log;        ///< CHORUS_AUTOTUNE_LOG
  /// The store a job without MPI meets in (chorus/rendezvous.h); unset: made from torchrun's
  /// variables where the controller is Gloo.
  std::shared_ptr<Rendezvous> rendezvous;
};

/// Allocates the output of a collective whose output size is known only after the ranks
/// agreed (allgather, alltoall, reducescatter). Called on the background thread with the
/// final shape; returns memory that stays valid until the handle completes. When absent,
/// Chorus allocates the output inside the Handle.
using OutputAllocator = std::function<StatusOr<TensorRef>(const std::vector<int64_t>& shape)>;

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kAverage;
  /// Multiplies each rank's input before the reduction. Integer tensors: in float64, the
  /// product truncated toward zero (as Horovod on the CPU).
  double prescale = 1.0;
  /// Multiplies the result. Floats multiply by (postscale / size) for kAverage. Integers: a
  /// postscale of 1 leaves kAverage an exact truncating division by the size; another one
  /// multiplies the sum by (postscale / size), or by postscale for kSum, in float64,
  /// truncated toward zero.
  double postscale = 1.0;
  ProcessSet process_set;
};

/// reduce: the reduction of AllreduceOptions.
using ReduceOptions = AllreduceOptions;

struct AllgatherOptions {
  ProcessSet process_set;
  OutputAllocator allocate;
};

struct BroadcastOptions {
  ProcessSet process_set;
};

struct AlltoallOptions {
  ProcessSet process_set;
  OutputAllocator allocate;
};

struct ReducescatterOptions {
  ReduceOp op = ReduceOp::kAverage;  ///< kSum or kAverage
  double prescale = 1.0;             ///< as AllreduceOptions
  double postscale = 1.0;            ///< as AllreduceOptions
  ProcessSet process_set;
  OutputAllocator allocate;
};

/// grouped_allgather: `allocate` is empty (Chorus allocates every output) or has one
/// allocator per tensor, allocate[i] making output i.
struct GroupedAllgatherOptions {
  ProcessSet process_set;
  std::vector<OutputAllocator> allocate;
};

/// grouped_reducescatter: the reduction of ReducescatterOptions, and one allocator per
/// tensor or none, as GroupedAllgatherOptions.
struct GroupedReducescatterOptions {
  ReduceOp op = ReduceOp::kAverage;
  double prescale = 1.0;
  double postscale = 1.0;
  ProcessSet process_set;
  std::vector<OutputAllocator> allocate;
};

}  // namespace chorus
