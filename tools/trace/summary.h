#pragma once
// chorus-trace summary: where each training step's time went, rank by rank.
//
// A step is the time between two step marks of a rank (STEP, on its trainer row). Within
// it, the trainer thread was blocked on handles (WAIT) or computing. Of its blocked time,
// the part during which this rank's reductions ran (MEMCPY_IN, COLLECTIVE, MEMCPY_OUT) is
// reducing; the rest is waiting for peers: mostly for a rank that had not submitted yet,
// plus the negotiation's own rounds and the queue behind other batches, which on a healthy
// job take a small part of it. The rank that computed longest in a step is its slowest.

#include <cstdint>
#include <string>
#include <vector>

#include "trace_events.h"

namespace chorus::trace {

struct RankStep {
  int rank = 0;
  double step_ms = 0, compute_ms = 0, peers_ms = 0, reduce_ms = 0;
};

struct StepSummary {
  int64_t step = 0;
  std::vector<RankStep> ranks;  ///< the ranks that marked this step, by rank
  int slowest_rank = -1;
};

/// A tensor's negotiations: from each rank's submission to the agreement.
struct TensorWaits {
  std::string name;
  int64_t collectives = 0;
  double mean_ms = 0, max_ms = 0;  ///< over every rank of every collective
  int last_rank = -1;              ///< the rank that submitted last most often
  int64_t last_count = 0;          ///< how often it did
};

struct FusionSummary {
  int64_t batches = 0;      ///< fused collectives (two tensors or more)
  int64_t fused = 0;        ///< tensors in them
  int64_t max_tensors = 0;  ///< the most tensors in one batch
  int64_t bytes = 0;        ///< all batches' bytes
  int64_t max_bytes = 0;
  int64_t alone = 0;  ///< collectives of one tensor
};

struct Summary {
  std::vector<int> ranks;
  std::vector<StepSummary> steps;  ///< by step number
  std::vector<TensorWaits> waits;  ///< the longest total waits first
  FusionSummary fusion;            ///< of the lowest rank (every rank runs the same batches)
  std::vector<int> ranks_without_steps;
};

Summary summarize(const std::vector<Span>& spans);

/// The summary for a reader: per rank, the slowest `most_steps` steps, the `most_tensors`
/// tensors with the longest waits, and the fusion batches.
std::string summary_text(const Summary& s, std::size_t most_steps = 10,
                         std::size_t most_tensors = 10);

/// The steps as chorus_trace_plot.py reads them (ranks, and per step each rank's split).
std::string summary_json(const Summary& s);

}  // namespace chorus::trace
