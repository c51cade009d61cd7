#include "collectives/adasum.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

namespace chorus {
namespace {

int add_merges(int lo, int hi, std::vector<std::vector<AdasumMerge>>* levels) {
  if (hi - lo < 2) return 0;
  const int mid = lo + (hi - lo + 1) / 2;
  const int height = std::max(add_merges(lo, mid, levels), add_merges(mid, hi, levels)) + 1;
  if (static_cast<int>(levels->size()) < height) levels->resize(static_cast<std::size_t>(height));
  (*levels)[static_cast<std::size_t>(height - 1)].push_back({lo, mid, hi});
  return height;
}

// `n` elements of `dtype` at `in`, widened into `out`; the dtype is switched on once.
template <class W>
void widen(const char* in, W* out, int64_t n, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        out[i] = kernels::half_to_float(h);
      }
      return;
    case DataType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        out[i] = kernels::bfloat16_to_float(h);
      }
      return;
    case DataType::kFloat32:
      if constexpr (std::is_same_v<W, float>) {
        std::memcpy(out, in, static_cast<std::size_t>(n) * 4);
      }
      return;
    default:
      if constexpr (std::is_same_v<W, double>) {
        std::memcpy(out, in, static_cast<std::size_t>(n) * 8);
      }
      return;
  }
}

// `n` elements of `in` times `factor`, stored as `dtype` at `out` (rounded once from float64).
template <class W>
void narrow(const W* in, char* out, int64_t n, DataType dtype, double factor) {
  switch (dtype) {
    case DataType::kFloat16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = kernels::float_to_half(static_cast<float>(in[i] * factor));
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DataType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = kernels::float_to_bfloat16(static_cast<float>(in[i] * factor));
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DataType::kFloat32:
      for (int64_t i = 0; i < n; ++i) {
        const float f = static_cast<float>(static_cast<double>(in[i]) * factor);
        std::memcpy(out + 4 * i, &f, 4);
      }
      return;
    default:
      for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(in[i]) * factor;
        std::memcpy(out + 8 * i, &d, 8);
      }
      return;
  }
}

// The coefficient of a vector whose squared norm is `norm2` and that covers the share
// `weight` of the merge's ranks, against the other's dot product.
double coefficient(double dot, double norm2, double weight) {
  return norm2 > 0 ? 1.0 - weight * dot / norm2 : 1.0;
}

}  // namespace

std::vector<std::vector<AdasumMerge>> adasum_tree(int size) {
  std::vector<std::vector<AdasumMerge>> levels;
  add_merges(0, size, &levels);
  return levels;
}

Status Adasum::allreduce(Backend& set, const void* send, void* recv,
                         const std::vector<AdasumTensor>& tensors, DataType dtype,
                         kernels::Scale scale) {
  const double factor = scale.factor / static_cast<double>(scale.divisor);
  switch (dtype) {
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat32: return run<float>(set, send, recv, tensors, dtype, factor);
    case DataType::kFloat64: return run<double>(set, send, recv, tensors, dtype, factor);
    default:
      return invalid_argument(std::string("Adasum reduces floating-point tensors; got ") +
                              dtype_name(dtype));
  }
}

template <class W>
Status Adasum::run(Backend& set, const void* send, void* recv,
                   const std::vector<AdasumTensor>& tensors, DataType dtype, double factor) {
  const int size = set.size();
  const int me = set.rank();
  const std::size_t esz = dtype_size(dtype);
  const auto* src = static_cast<const char*>(send);
  auto* dst = static_cast<char*>(recv);
  const std::size_t nt = tensors.size();
  // blocks[t][q]: the elements of tensor t that rank q combines; begin[t][q]: where they start
  // inside the tensor; mine[t]: where tensor t's block starts inside this rank's share.
  std::vector<std::vector<int64_t>> blocks(nt), begin(nt);
  std::vector<int64_t> share(static_cast<std::size_t>(size), 0), mine(nt);
  for (std::size_t t = 0; t < nt; ++t) {
    even_blocks(tensors[t].count, size, &blocks[t]);
    begin[t].assign(static_cast<std::size_t>(size), 0);
    for (int q = 0; q < size; ++q) {
      if (q > 0) begin[t][q] = begin[t][q - 1] + blocks[t][q - 1];
    }
    mine[t] = share[me];
    for (int q = 0; q < size; ++q) share[q] += blocks[t][q];
  }
  const int64_t n = share[me];  // elements of each rank's vector that this rank combines
  int64_t total = 0;
  for (int64_t s : share) total += s;

  // 1. Rank q's share of every rank's tensors, to rank q.
  char* out = out_.get(static_cast<std::size_t>(total) * esz + 1);
  char* in = in_.get(static_cast<std::size_t>(std::max(n * size, total)) * esz + 1);
  std::vector<int64_t> send_bytes(static_cast<std::size_t>(size)), recv_bytes(send_bytes.size());
  char* at = out;
  for (int q = 0; q < size; ++q) {
    send_bytes[q] = share[q] * static_cast<int64_t>(esz);
    recv_bytes[q] = n * static_cast<int64_t>(esz);
    for (std::size_t t = 0; t < nt; ++t) {
      const std::size_t bytes = static_cast<std::size_t>(blocks[t][q]) * esz;
      std::memcpy(at, src + static_cast<std::size_t>(tensors[t].offset + begin[t][q]) * esz, bytes);
      at += bytes;
    }
  }
  Status first = set.alltoallv(out, send_bytes, in, recv_bytes);

  // 2. The tree, from the leaves up; rank s's share sits at work + s * n.
  W* work = reinterpret_cast<W*>(work_.get(static_cast<std::size_t>(n * size) * sizeof(W) + 1));
  widen(in, work, n * size, dtype);
  for (const std::vector<AdasumMerge>& level : adasum_tree(size)) {
    sums_.assign(level.size() * nt * 3, 0.0);
    for (std::size_t m = 0; m < level.size(); ++m) {
      for (std::size_t t = 0; t < nt; ++t) {
        const W* a = work + level[m].left * n + mine[t];
        const W* b = work + level[m].mid * n + mine[t];
        double ab = 0, aa = 0, bb = 0;
        for (int64_t i = 0; i < blocks[t][me]; ++i) {
          const double x = a[i], y = b[i];
          ab += x * y;
          aa += x * x;
          bb += y * y;
        }
        double* s = &sums_[(m * nt + t) * 3];
        s[0] = ab;
        s[1] = aa;
        s[2] = bb;
      }
    }
    const Status summed =
        set.allreduce(sums_.data(), sums_.data(), static_cast<int64_t>(sums_.size()),
                      DataType::kFloat64, ReduceOp::kSum, kernels::Scale{});
    if (first.ok()) first = summed;
    for (std::size_t m = 0; m < level.size(); ++m) {
      for (std::size_t t = 0; t < nt; ++t) {
        const double* s = &sums_[(m * nt + t) * 3];
        const AdasumMerge& g = level[m];
        const double wa = static_cast<double>(g.mid - g.left) / (g.end - g.left);
        const double ca = coefficient(s[0], s[1], wa);
        const double cb = coefficient(s[0], s[2], 1.0 - wa);
        W* a = work + level[m].left * n + mine[t];
        const W* b = work + level[m].mid * n + mine[t];
        for (int64_t i = 0; i < blocks[t][me]; ++i) {
          a[i] = static_cast<W>(ca * static_cast<double>(a[i]) + cb * static_cast<double>(b[i]));
        }
      }
    }
  }

  // 3. The root (at rank 0's place) to every rank.
  char* root = out;
  narrow(work, root, n, dtype, factor);
  std::vector<int64_t> bytes(static_cast<std::size_t>(size));
  int64_t offset = 0;
  for (int q = 0; q < size; ++q) {
    bytes[q] = share[q] * static_cast<int64_t>(esz);
    if (q < me) offset += bytes[q];
  }
  char* gathered = in;
  std::memcpy(gathered + offset, root, static_cast<std::size_t>(n) * esz);
  const Status all = set.allgatherv(gathered + offset, gathered, bytes);
  if (first.ok()) first = all;
  at = gathered;
  for (int q = 0; q < size; ++q) {
    for (std::size_t t = 0; t < nt; ++t) {
      const std::size_t b = static_cast<std::size_t>(blocks[t][q]) * esz;
      std::memcpy(dst + static_cast<std::size_t>(tensors[t].offset + begin[t][q]) * esz, at, b);
      at += b;
    }
  }
  return first;
}

}  // namespace chorus
