// The executor's CUDA half: the same collectives as executor.cc, on the set's GPU context.
// Compiled only with CHORUS_WITH_CUDA.
//
// Per batch: the communication stream waits on every input's ready event (no host wait),
// one batched kernel packs the inputs into the device fusion buffer with the prescale
// folded in, the backend reduces (NCCL enqueues on the stream; MPI stages), one batched
// kernel unpacks with the average and postscale folded in, and the background thread then
// waits for the stream (GpuContext::synchronize: sleeps, polls NCCL's async errors) before
// the handles complete. The trainer's streams are never blocked.

#include <cuda_runtime_api.h>

#include "core/executor.h"
#include "core/logging.h"

namespace chorus {
namespace {

ReduceOp wire_op(ReduceOp op) { return op == ReduceOp::kAverage ? ReduceOp::kSum : op; }

kernels::Scale result_scale(const Response& r, int size) {
  return {r.reduce_op == ReduceOp::kAverage ? size : 1, r.postscale};
}

int64_t row_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

std::string during(const Response& r, std::size_t tensors) {
  std::string s = std::string(op_type_name(r.op)) + " '" + r.name + "'";
  if (tensors > 1) s += " and " + std::to_string(tensors - 1) + " more fused tensors";
  return s;
}

}  // namespace

StatusOr<GpuContext*> Executor::gpu_for(const Device& device) {
  if (gpu_) {
    if (device.index >= 0 && device.index != gpu_->device()) {
      return invalid_argument("this rank's collectives use cuda:" + std::to_string(gpu_->device()) +
                              "; a tensor on " + device_name(device) +
                              " cannot join them (one GPU per rank and process set)");
    }
    return gpu_.get();
  }
  int index = device.index;
  if (index < 0 && cudaGetDevice(&index) != cudaSuccess) index = 0;
  StatusOr<std::unique_ptr<GpuContext>> g = GpuContext::create(gpu_setup_, index);
  if (!g.ok()) return g.status();
  gpu_ = std::move(g).value();
  log().debug("{}: GPU context on cuda:{} ({})", gpu_setup_.label, index, gpu_->description());
  return gpu_.get();
}

Status Executor::run_gpu_batch(const std::vector<const Response*>& batch,
                               std::unordered_map<std::string, Entry>& entries,
                               Clock::time_point agreed, const Finish& finish) {
  // This rank's device: from its own entries (a joined rank has none: the context's).
  Device device = batch.front()->device;
  device.index = -1;
  for (const Response* r : batch) {
    if (Entry* e = find(entries, r->name)) {
      device = e->input.device;
      break;
    }
  }
  // A context that cannot be built, or a tensor on a second GPU, leaves this rank unable
  // to take part: the error stops the runtime (and fails every handle) rather than letting
  // the other ranks wait in a collective this rank never joins.
  StatusOr<GpuContext*> g = gpu_for(device);
  if (!g.ok()) return g.status();
  if (batch.size() > 1) return run_gpu_fused(**g, batch, entries, agreed, finish);
  Entry* e = find(entries, batch.front()->name);
  if (e) trace(batch.front()->name, TimelinePhase::kQueue, agreed, Clock::now());
  return run_gpu_single(**g, *batch.front(), e, finish);
}

Status Executor::run_gpu_fused(GpuContext& g, const std::vector<const Response*>& batch,
                               std::unordered_map<std::string, Entry>& entries,
                               Clock::time_point agreed, const Finish& finish) {
  const Response& first = *batch.front();
  const std::size_t esz = dtype_size(first.dtype);
  std::size_t total = 0;
  for (const Response* r : batch) total += static_cast<std::size_t>(num_elements(r->shape)) * esz;
  StatusOr<char*> buffer = g.fusion_buffer(total);
  if (!buffer.ok()) return buffer.status();
  StatusOr<char*> zero = g.zeros(0);
  const Clock::time_point t0 = Clock::now();
  std::vector<gpu::CopyItem> in, out;
  std::size_t offset = 0;
  std::size_t missing = 0;
  for (const Response* r : batch) {
    const int64_t count = num_elements(r->shape);
    if (Entry* e = find(entries, r->name)) {
      if (Status s = g.wait_ready(e->ready_event.get()); !s.ok()) return s;
      in.push_back({e->input.data, *buffer + offset, count});
      out.push_back({*buffer + offset, e->output.data, count});
    } else {
      missing = std::max(missing, static_cast<std::size_t>(count) * esz);
    }
    offset += static_cast<std::size_t>(count) * esz;
  }
  if (missing > 0) {
    // A joined rank contributes zeros for the tensors it does not have.
    zero = g.zeros(missing);
    if (!zero.ok()) return zero.status();
    offset = 0;
    for (const Response* r : batch) {
      const int64_t count = num_elements(r->shape);
      if (!find(entries, r->name)) in.push_back({*zero, *buffer + offset, count});
      offset += static_cast<std::size_t>(count) * esz;
    }
  }
  Status s = g.copy(in, first.dtype, kernels::Scale{1, first.prescale});
  if (s.ok()) {
    // Unscaled: the average and postscale are folded into the unpack.
    s = g.backend().allreduce(*buffer, *buffer, static_cast<int64_t>(total / esz), first.dtype,
                              wire_op(first.reduce_op), kernels::Scale{});
  }
  if (s.ok()) s = g.copy(out, first.dtype, result_scale(first, g.backend().size()));
  if (s.ok()) s = g.synchronize(during(first, batch.size()));
  const Clock::time_point t1 = Clock::now();
  for (const Response* r : batch) {
    if (Entry* e = find(entries, r->name)) {
      trace(r->name, TimelinePhase::kQueue, agreed, t0);
      trace(r->name, TimelinePhase::kCollective, t0, t1);
      finish(*e, s);
    }
  }
  return s;
}

Status Executor::run_gpu_single(GpuContext& g, const Response& r, Entry* e, const Finish& finish) {
  Backend& be = g.backend();
  const int n = be.size();
  const int me = be.rank();
  const std::size_t esz = dtype_size(r.dtype);
  const Clock::time_point t0 = Clock::now();
  Status s;
  Status local;  // this rank's own failure; the collective call is still made (executor.cc)
  if (e) s = g.wait_ready(e->ready_event.get());
  auto scratch = [&](StatusOr<char*> p) -> void* {
    if (!p.ok()) {
      if (s.ok()) s = p.status();
      return nullptr;
    }
    return *p;
  };
  if (s.ok()) {
    switch (r.op) {
      case OpType::kAllreduce: {
        const int64_t count = num_elements(r.shape);
        const void* in = nullptr;
        void* out = nullptr;
        if (e) {
          in = e->input.data;
          out = e->output.data;
          if (r.prescale != 1.0) {
            s = g.copy({{in, out, count}}, r.dtype, kernels::Scale{1, r.prescale});
            in = out;
          }
        } else {
          out = scratch(g.zeros(static_cast<std::size_t>(count) * esz));
          in = out;
        }
        if (s.ok()) {
          s = be.allreduce(in, out, count, r.dtype, wire_op(r.reduce_op), result_scale(r, n));
        }
        break;
      }
      case OpType::kBroadcast:
        s = be.broadcast(e->output.data, num_elements(r.shape) * static_cast<int64_t>(esz), r.root);
        break;
      case OpType::kAllgather: {
        const int64_t row_bytes = row_elements(r.shape) * static_cast<int64_t>(esz);
        std::vector<int64_t> bytes(n);
        std::vector<int64_t> shape = r.shape;
        shape[0] = 0;
        for (int i = 0; i < n; ++i) {
          bytes[i] = r.first_dims[i] * row_bytes;
          shape[0] += r.first_dims[i];
        }
        StatusOr<TensorRef> out = output_for(*e, shape);
        if (!out.ok()) local = out.status();
        void* dst = out.ok() ? out->data
                             : scratch(g.staging(static_cast<std::size_t>(shape[0] * row_bytes)));
        if (s.ok()) s = be.allgatherv(e->input.data, dst, bytes);
        break;
      }
      case OpType::kAlltoall: {
        const int64_t row_bytes = row_elements(e->request.shape) * static_cast<int64_t>(esz);
        std::vector<int64_t> send(n), recv(n), received(n);
        std::vector<int64_t> shape = e->request.shape;
        shape[0] = 0;
        for (int i = 0; i < n; ++i) {
          send[i] = r.splits[static_cast<std::size_t>(me) * n + i] * row_bytes;
          received[i] = r.splits[static_cast<std::size_t>(i) * n + me];
          recv[i] = received[i] * row_bytes;
          shape[0] += received[i];
        }
        StatusOr<TensorRef> out = output_for(*e, shape);
        if (!out.ok()) local = out.status();
        void* dst = out.ok() ? out->data
                             : scratch(g.staging(static_cast<std::size_t>(shape[0] * row_bytes)));
        e->handle->received_splits = received;
        if (s.ok()) s = be.alltoallv(e->input.data, send, dst, recv);
        break;
      }
      case OpType::kReducescatter: {
        const int64_t rows = r.shape[0];
        const int64_t row = row_elements(r.shape);
        auto rows_of = [&](int i) { return rows / n + (i < rows % n ? 1 : 0); };
        std::vector<int64_t> counts(n);
        for (int i = 0; i < n; ++i) counts[i] = rows_of(i) * row;
        std::vector<int64_t> shape = r.shape;
        shape[0] = rows_of(me);
        StatusOr<TensorRef> out = output_for(*e, shape);
        if (!out.ok()) local = out.status();
        const int64_t count = num_elements(r.shape);
        // The prescaled input and, when the output failed, the place to receive into share
        // one scratch buffer: input first, this rank's block after it.
        const std::size_t in_bytes = r.prescale != 1.0 ? static_cast<std::size_t>(count) * esz : 0;
        char* tmp = static_cast<char*>(
            scratch(g.staging(in_bytes + static_cast<std::size_t>(counts[me]) * esz)));
        const void* in = e->input.data;
        if (s.ok() && r.prescale != 1.0) {
          s = g.copy({{in, tmp, count}}, r.dtype, kernels::Scale{1, r.prescale});
          in = tmp;
        }
        void* dst = out.ok() ? out->data : tmp + in_bytes;
        if (s.ok()) {
          s = be.reducescatter(in, dst, counts, r.dtype, wire_op(r.reduce_op), result_scale(r, n));
        }
        break;
      }
      case OpType::kBarrier: s = be.barrier(); break;
      case OpType::kJoin:
      case OpType::kAddProcessSet:
      case OpType::kRemoveProcessSet: break;
    }
  }
  if (s.ok()) s = g.synchronize(during(r, 1));
  const Clock::time_point t1 = Clock::now();
  if (e) {
    trace(r.name, TimelinePhase::kCollective, t0, t1);
    finish(*e, s.ok() ? local : s);
  }
  return s;
}

}  // namespace chorus
