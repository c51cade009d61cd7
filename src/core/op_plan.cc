#include "core/op_plan.h"

namespace chorus {

ReduceOp wire_op(ReduceOp op) { return op == ReduceOp::kAverage ? ReduceOp::kSum : op; }

kernels::Scale result_scale(const Response& r, int size) {
  return {r.reduce_op == ReduceOp::kAverage ? size : 1, r.postscale};
}

int64_t row_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

AllgatherPlan plan_allgather(const Response& r, int size) {
  const int64_t row_bytes = row_elements(r.shape) * static_cast<int64_t>(dtype_size(r.dtype));
  AllgatherPlan p;
  p.bytes.resize(size);
  p.output_shape = r.shape;
  p.output_shape[0] = 0;
  for (int i = 0; i < size; ++i) {
    p.bytes[i] = r.first_dims[i] * row_bytes;
    p.output_shape[0] += r.first_dims[i];
  }
  p.output_bytes = p.output_shape[0] * row_bytes;
  return p;
}

AlltoallPlan plan_alltoall(const Response& r, int rank, int size) {
  const int64_t row_bytes = row_elements(r.shape) * static_cast<int64_t>(dtype_size(r.dtype));
  const auto n = static_cast<std::size_t>(size);
  const auto me = static_cast<std::size_t>(rank);
  AlltoallPlan p;
  p.send_bytes.resize(n);
  p.recv_bytes.resize(n);
  p.received_splits.resize(n);
  p.output_shape = r.shape;
  p.output_shape[0] = 0;
  for (std::size_t i = 0; i < n; ++i) {
    p.send_bytes[i] = r.splits[me * n + i] * row_bytes;
    p.received_splits[i] = r.splits[i * n + me];
    p.recv_bytes[i] = p.received_splits[i] * row_bytes;
    p.output_shape[0] += p.received_splits[i];
  }
  p.output_bytes = p.output_shape[0] * row_bytes;
  return p;
}

int64_t reducescatter_rows(int64_t rows, int rank, int size) {
  return rows / size + (rank < rows % size ? 1 : 0);
}

ReducescatterPlan plan_reducescatter(const Response& r, int rank, int size) {
  const int64_t rows = r.shape[0];
  const int64_t row = row_elements(r.shape);
  ReducescatterPlan p;
  p.counts.resize(size);
  for (int i = 0; i < size; ++i) p.counts[i] = reducescatter_rows(rows, i, size) * row;
  p.output_shape = r.shape;
  p.output_shape[0] = reducescatter_rows(rows, rank, size);
  p.output_elements = p.counts[rank];
  return p;
}

RankMajor rank_major(const std::vector<std::vector<int64_t>>& part, int size) {
  RankMajor m;
  m.block.assign(size, 0);
  m.block_at.assign(size, 0);
  m.inside.assign(part.size(), std::vector<int64_t>(size, 0));
  for (int r = 0; r < size; ++r) {
    for (std::size_t k = 0; k < part.size(); ++k) {
      m.inside[k][r] = m.block[r];
      m.block[r] += part[k][r];
    }
    m.block_at[r] = m.total;
    m.total += m.block[r];
  }
  return m;
}

FusionLayout plan_fused_allreduce(const std::vector<const Response*>& batch, std::size_t align,
                                  std::size_t capacity) {
  FusionLayout layout;
  if (batch.empty()) return layout;
  const std::size_t esz = dtype_size(batch.front()->dtype);
  auto lay_out = [&](std::size_t unit) {
    layout.offsets.clear();
    std::size_t at = 0;
    for (const Response* r : batch) {
      at = (at + unit - 1) / unit * unit;
      layout.offsets.push_back(at);
      at += static_cast<std::size_t>(num_elements(r->shape)) * esz;
    }
    layout.bytes = at;
  };
  if (align > esz) {
    lay_out(align);
    if (layout.bytes <= capacity) return layout;
  }
  lay_out(esz);
  return layout;
}

}  // namespace chorus
