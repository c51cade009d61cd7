#pragma once
// What one agreed response means in numbers on this rank: the bytes each rank sends and
// receives, the shape of this rank's output, the rows each rank gets, and where the tensors
// of a fused allreduce sit in the fusion buffer. Pure functions of the Response and the
// rank's place in the set, used by each op's execution (core/ops/) and the executor's fused
// allreduce for host and CUDA tensors alike.
//
// Every member computes the counts of every rank from the same response, so the count
// vectors it hands the backend are the same on every member and the calls line up.
// Callers pass responses that the coordinator accepted (shapes with the dimensions each op
// needs, one first dimension per rank for allgather, an n*n split matrix for alltoall).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/reduce_kernels.h"
#include "protocol/message.h"

namespace chorus {

/// The reduction the backend runs for `op`: kAverage is a sum, divided afterwards.
ReduceOp wire_op(ReduceOp op);
/// What the backend applies to the reduced result: the division of kAverage by `size`,
/// then the response's postscale.
kernels::Scale result_scale(const Response& r, int size);
/// Elements in one row of `shape` (one index of the first dimension): the product of the
/// dimensions after the first; 1 for a shape of one or no dimension.
int64_t row_elements(const std::vector<int64_t>& shape);

struct AllgatherPlan {
  std::vector<int64_t> bytes;         ///< per rank: the bytes it contributes, in rank order
  std::vector<int64_t> output_shape;  ///< every rank's rows stacked in rank order
  int64_t output_bytes = 0;           ///< sum of `bytes`
};
/// allgather over `size` ranks: rank i contributes first_dims[i] rows of r.shape's rows.
AllgatherPlan plan_allgather(const Response& r, int size);

struct AlltoallPlan {
  std::vector<int64_t> send_bytes;       ///< per destination rank
  std::vector<int64_t> recv_bytes;       ///< per source rank
  std::vector<int64_t> received_splits;  ///< rows from each source (the handle's splits)
  std::vector<int64_t> output_shape;     ///< the received rows stacked in source order
  int64_t output_bytes = 0;              ///< sum of `recv_bytes`
};
/// alltoall as `rank` of `size`: row s of r.splits is what rank s sends to each rank. The
/// rows' trailing dimensions are r.shape's (the coordinator made every rank's agree).
AlltoallPlan plan_alltoall(const Response& r, int rank, int size);

/// Rows `rank` gets when a reducescatter splits `rows` rows over `size` ranks: rows / size
/// each, and one more for each of the first rows % size ranks.
int64_t reducescatter_rows(int64_t rows, int rank, int size);

struct ReducescatterPlan {
  std::vector<int64_t> counts;        ///< per rank: elements of the result it keeps
  std::vector<int64_t> output_shape;  ///< this rank's rows
  int64_t output_elements = 0;        ///< counts[rank]
};
/// reducescatter of r.shape as `rank` of `size` (reducescatter_rows).
ReducescatterPlan plan_reducescatter(const Response& r, int rank, int size);

/// Offsets of rank-major blocks, for the host members of a group fused into one call: block
/// r holds every member's part for rank r, in member order.
struct RankMajor {
  std::vector<int64_t> block;                ///< per rank: the sum of its parts
  std::vector<int64_t> block_at;             ///< per rank: where its block starts
  std::vector<std::vector<int64_t>> inside;  ///< [k][r]: member k's offset inside block r
  int64_t total = 0;
};
/// part[k][r] is member k's size for rank r (bytes or elements), over `size` ranks.
RankMajor rank_major(const std::vector<std::vector<int64_t>>& part, int size);

struct FusionLayout {
  std::vector<std::size_t> offsets;  ///< byte offset of each tensor, in batch order
  std::size_t bytes = 0;             ///< end of the last tensor: the bytes reduced
};
/// Where the tensors of one fused allreduce (same dtype) go in a fusion buffer of
/// `capacity` bytes. Each slot starts on a multiple of `align` bytes when the padded batch
/// still fits in `capacity`; otherwise, or when `align` is at most the element size, the
/// tensors are packed back to back (the planner made sure the packed batch fits).
/// `align` must be a multiple of the element size. Padding is reduced with the rest and
/// never read. Depends only on the responses, so it is the same on every rank.
FusionLayout plan_fused_allreduce(const std::vector<const Response*>& batch, std::size_t align,
                                  std::size_t capacity);

}  // namespace chorus
