#include "collectives/host_tree.h"

#include <algorithm>
#include <cstring>

namespace chorus {
namespace {

int64_t pieces_of(int64_t bytes, int64_t piece) { return (bytes + piece - 1) / piece; }

// dst = (left op right) over `bytes`, scaled; dst may alias either.
void combine(char* dst, const char* left, const char* right, int64_t bytes, DataType dtype,
             ReduceOp op, kernels::Scale scale) {
  const void* both[2] = {left, right};
  kernels::reduce_ordered(dst, both, 2, bytes / static_cast<int64_t>(dtype_size(dtype)), dtype, op,
                          scale);
}

// `count` elements in `parts` blocks, the first count % parts one larger: parts + 1 offsets.
void even_offsets(int64_t count, int parts, std::vector<int64_t>* offsets) {
  offsets->assign(static_cast<std::size_t>(parts) + 1, 0);
  for (int i = 0; i < parts; ++i) {
    (*offsets)[i + 1] = (*offsets)[i] + count / parts + (i < count % parts ? 1 : 0);
  }
}

}  // namespace

HostTree::HostTree(Links& links)
    : links_(links), rank_(links.rank()), shape_(links.size()), leaf_(shape_.leaf_of(rank_)) {}

template <typename OnPiece>
Status HostTree::exchange(int peer, const char* out, int64_t out_bytes, char* in, int64_t in_bytes,
                          OnPiece on_piece) {
  const int64_t n_in = pieces_of(in_bytes, kPieceBytes);
  const int64_t n_out = pieces_of(out_bytes, kPieceBytes);
  links_.clear();
  for (int64_t i = 0; i < n_in; ++i) {
    const int64_t len = std::min(kPieceBytes, in_bytes - i * kPieceBytes);
    if (Status s = links_.post_recv(peer, kTag, in + i * kPieceBytes, len); !s.ok()) return s;
  }
  for (int64_t i = 0; i < n_out; ++i) {
    const int64_t len = std::min(kPieceBytes, out_bytes - i * kPieceBytes);
    if (Status s = links_.post_send(peer, kTag, out + i * kPieceBytes, len); !s.ok()) return s;
  }
  for (int64_t i = 0; i < n_in; ++i) {
    const int64_t len = std::min(kPieceBytes, in_bytes - i * kPieceBytes);
    if (Status s = links_.wait(static_cast<std::size_t>(i), 1, 2 * len); !s.ok()) return s;
    on_piece(i * kPieceBytes, len);
  }
  return links_.wait(static_cast<std::size_t>(n_in), static_cast<std::size_t>(n_out), out_bytes);
}

Status HostTree::send_to(int peer, const char* out, int64_t bytes) {
  return exchange(peer, out, bytes, nullptr, 0, [](int64_t, int64_t) {});
}

Status HostTree::receive_from(int peer, char* in, int64_t bytes) {
  return exchange(peer, nullptr, 0, in, bytes, [](int64_t, int64_t) {});
}

Status HostTree::fold_in(const char* mine, char* acc, int64_t bytes, DataType dtype, ReduceOp op) {
  char* theirs = scratch(static_cast<std::size_t>(bytes));
  return exchange(rank_ + 1, nullptr, 0, theirs, bytes, [&](int64_t at, int64_t len) {
    combine(acc + at, mine + at, theirs + at, len, dtype, op, kernels::Scale{});
  });
}

Status HostTree::allreduce_doubling(const void* send, void* recv, int64_t count, DataType dtype,
                                    ReduceOp op, kernels::Scale scale) {
  return allreduce(false, send, recv, count, dtype, op, scale);
}

Status HostTree::allreduce_halving(const void* send, void* recv, int64_t count, DataType dtype,
                                   ReduceOp op, kernels::Scale scale) {
  return allreduce(true, send, recv, count, dtype, op, scale);
}

Status HostTree::allreduce(bool halving, const void* send, void* recv, int64_t count,
                           DataType dtype, ReduceOp op, kernels::Scale scale) {
  const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
  char* acc = static_cast<char*>(recv);
  if (leaf_ < 0) {
    if (Status s = send_to(rank_ - 1, static_cast<const char*>(send), bytes); !s.ok()) return s;
    return receive_from(rank_ - 1, acc, bytes);
  }
  const char* mine = static_cast<const char*>(send);
  if (shape_.leads_pair(rank_)) {
    if (Status s = fold_in(mine, acc, bytes, dtype, op); !s.ok()) return s;
    mine = acc;
  }
  Status s;
  if (halving) {
    even_offsets(count, shape_.p2, &offsets_);
    s = halve(mine, acc, offsets_, dtype, op, scale);
    if (s.ok()) s = double_blocks(acc, offsets_, dtype);
  } else {
    s = double_vectors(mine, acc, bytes, dtype, op, scale);
  }
  if (!s.ok()) return s;
  if (shape_.leads_pair(rank_)) return send_to(rank_ + 1, acc, bytes);
  return {};
}

Status HostTree::double_vectors(const char* mine, char* acc, int64_t bytes, DataType dtype,
                                ReduceOp op, kernels::Scale scale) {
  // The whole vector goes out each round, so the partner's arrives in a buffer of its own
  // and is combined once both transfers are done.
  char* theirs = scratch(static_cast<std::size_t>(bytes));
  for (int d = shape_.p2 / 2; d >= 1; d /= 2) {
    const int partner = leaf_ ^ d;
    if (Status s =
            exchange(shape_.rank_of(partner), mine, bytes, theirs, bytes, [](int64_t, int64_t) {});
        !s.ok()) {
      return s;
    }
    const bool left = leaf_ < partner;
    combine(acc, left ? mine : theirs, left ? theirs : mine, bytes, dtype, op,
            d == 1 ? scale : kernels::Scale{});
    mine = acc;
  }
  return {};
}

Status HostTree::halve(const char* mine, char* acc, const std::vector<int64_t>& offsets,
                       DataType dtype, ReduceOp op, kernels::Scale scale) {
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  int lo = 0, hi = shape_.p2;  // the blocks this leaf still reduces
  // The most received is the first round's half (a later round receives part of it).
  const int64_t half = std::max(offsets[hi / 2], offsets[hi] - offsets[hi / 2]);
  char* theirs = scratch(static_cast<std::size_t>(half * esz));
  for (int d = shape_.p2 / 2; d >= 1; d /= 2) {
    const int partner = leaf_ ^ d;
    const int mid = lo + (hi - lo) / 2;
    const bool left = leaf_ < partner;  // the lower leaf keeps the lower half
    const int keep_lo = left ? lo : mid, keep_hi = left ? mid : hi;
    const int give_lo = left ? mid : lo, give_hi = left ? hi : mid;
    const int64_t keep_at = offsets[keep_lo] * esz;
    const int64_t give_at = offsets[give_lo] * esz;
    const kernels::Scale step_scale = d == 1 ? scale : kernels::Scale{};
    Status s = exchange(shape_.rank_of(partner), mine + give_at, offsets[give_hi] * esz - give_at,
                        theirs, offsets[keep_hi] * esz - keep_at, [&](int64_t at, int64_t len) {
                          const char* own = mine + keep_at + at;
                          combine(acc + keep_at + at, left ? own : theirs + at,
                                  left ? theirs + at : own, len, dtype, op, step_scale);
                        });
    if (!s.ok()) return s;
    mine = acc;
    lo = keep_lo;
    hi = keep_hi;
  }
  return {};
}

Status HostTree::double_blocks(char* acc, const std::vector<int64_t>& offsets, DataType dtype) {
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  for (int d = 1; d < shape_.p2; d *= 2) {
    const int partner = leaf_ ^ d;
    const int mine_lo = leaf_ / d * d, theirs_lo = partner / d * d;
    const int64_t mine_at = offsets[mine_lo] * esz, theirs_at = offsets[theirs_lo] * esz;
    Status s = exchange(shape_.rank_of(partner), acc + mine_at,
                        offsets[mine_lo + d] * esz - mine_at, acc + theirs_at,
                        offsets[theirs_lo + d] * esz - theirs_at, [](int64_t, int64_t) {});
    if (!s.ok()) return s;
  }
  return {};
}

Status HostTree::reducescatter_halving(const void* send, void* recv,
                                       const std::vector<int64_t>& counts, DataType dtype,
                                       ReduceOp op, kernels::Scale scale) {
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  // Leaf v's block: the blocks of the ranks it stands for.
  offsets_.assign(static_cast<std::size_t>(shape_.p2) + 1, 0);
  for (int v = 0; v < shape_.p2; ++v) {
    const int r = shape_.rank_of(v);
    offsets_[v + 1] = offsets_[v] + counts[r] + (v < shape_.extra ? counts[r + 1] : 0);
  }
  const int64_t bytes = offsets_[shape_.p2] * esz;
  char* out = static_cast<char*>(recv);
  if (leaf_ < 0) {
    if (Status s = send_to(rank_ - 1, static_cast<const char*>(send), bytes); !s.ok()) return s;
    return receive_from(rank_ - 1, out, counts[rank_] * esz);
  }
  // The partial results go to a buffer of their own: `send` is the caller's, and `recv`
  // holds one block.
  char* acc = acc_.get(static_cast<std::size_t>(bytes));
  const char* mine = static_cast<const char*>(send);
  if (shape_.leads_pair(rank_)) {
    if (Status s = fold_in(mine, acc, bytes, dtype, op); !s.ok()) return s;
    mine = acc;
  }
  if (Status s = halve(mine, acc, offsets_, dtype, op, scale); !s.ok()) return s;
  const char* block = acc + offsets_[leaf_] * esz;
  std::memmove(out, block, static_cast<std::size_t>(counts[rank_] * esz));
  if (shape_.leads_pair(rank_)) {
    return send_to(rank_ + 1, block + counts[rank_] * esz, counts[rank_ + 1] * esz);
  }
  return {};
}

}  // namespace chorus
