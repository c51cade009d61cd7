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

#include "base/logging.h"
#include "core/executor.h"
#include "core/op_plan.h"

namespace chorus {
namespace {

std::string during(const Response& r, std::size_t tensors) {
  std::string s = std::string(op_type_name(r.op)) + " '" + r.name + "'";
  if (tensors > 1) s += " and " + std::to_string(tensors - 1) + " more fused tensors";
  return s;
}

}  // namespace

StatusOr<GpuContext*> Executor::gpu_for() {
  if (gpu_) return gpu_.get();
  // The rank's one GPU (RankDevice): pinned at enqueue by its first CUDA tensor, so a
  // joined rank with no tensor of its own still builds on the GPU it will use.
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) devices = 1;
  const int fallback = gpu_setup_.local_rank % devices;
  const int index = gpu_setup_.device ? gpu_setup_.device->pin(fallback) : fallback;
  StatusOr<std::unique_ptr<GpuContext>> g = GpuContext::create(gpu_setup_, index);
  if (!g.ok()) return g.status();
  gpu_ = std::move(g).value();
  log().debug("{}: GPU context on cuda:{} ({})", gpu_setup_.label, index, gpu_->description());
  return gpu_.get();
}

Status Executor::run_gpu_batch(const std::vector<Job>& batch, Clock::time_point agreed,
                               const Finish& finish) {
  // GpuContext::create fails on every member together, so returning its error (which
  // stops the runtime and fails every handle) leaves no member waiting. A tensor on
  // another GPU than the rank's was refused at enqueue (api.cc).
  StatusOr<GpuContext*> g = gpu_for();
  if (!g.ok()) return g.status();
  if (batch.size() > 1) return run_gpu_fused(**g, batch, agreed, finish);
  const Job& j = batch.front();
  if (j.entry) trace(j.response->name, TimelinePhase::kQueue, agreed, Clock::now());
  return run_gpu_single(**g, *j.response, j.entry, finish);
}

// Failures follow executor.cc: this rank's own failure (an event it cannot wait on, a
// kernel it cannot launch) is kept in `local` and the backend call is still made, so the
// other members never wait for this rank; only the backend's failure (the ranks are out of
// step) or a failed wait for the stream is returned.
Status Executor::run_gpu_fused(GpuContext& g, const std::vector<Job>& batch,
                               Clock::time_point agreed, const Finish& finish) {
  const Response& first = *batch.front().response;
  const std::size_t esz = dtype_size(first.dtype);
  std::vector<const Response*> responses;
  responses.reserve(batch.size());
  for (const Job& j : batch) responses.push_back(j.response);
  // Slots on 16 bytes when the padded batch fits: every tensor after an odd-sized one then
  // keeps the kernel's 16-byte copies (cuda_kernels.cu).
  const FusionLayout layout = plan_fused_allreduce(responses, 16, g.fusion_capacity());
  const std::vector<std::size_t>& offsets = layout.offsets;
  const std::size_t total = layout.bytes;
  if (total > g.fusion_capacity()) {
    // The plan is the same on every rank, so every rank returns here.
    return internal_error("fusion batch of " + std::to_string(total) + " bytes exceeds the " +
                          std::to_string(g.fusion_capacity()) + "-byte GPU fusion buffer");
  }
  char* buffer = g.fusion_buffer();
  const Clock::time_point t0 = Clock::now();
  Status local;
  auto keep = [&](Status s) {
    if (local.ok() && !s.ok()) local = std::move(s);
  };
  std::vector<gpu::CopyItem> in, out;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const Response* r = batch[i].response;
    const int64_t count = num_elements(r->shape);
    if (Entry* e = batch[i].entry) {
      keep(g.wait_ready(e->ready_event.get()));
      in.push_back({e->input.data, buffer + offsets[i], count});
      out.push_back({buffer + offsets[i], e->output.data, count});
    } else {
      // A joined rank contributes zeros for the tensors it does not have.
      keep(g.zero(buffer + offsets[i], static_cast<std::size_t>(count) * esz));
    }
  }
  keep(g.copy(in, first.dtype, kernels::Scale{1, first.prescale}));
  // Unscaled: the average and postscale are folded into the unpack. Padding between the
  // slots is reduced with the rest and never read.
  Status s = g.backend().allreduce(buffer, buffer, static_cast<int64_t>(total / esz), first.dtype,
                                   wire_op(first.reduce_op), kernels::Scale{});
  if (s.ok() && local.ok()) keep(g.copy(out, first.dtype, result_scale(first, g.backend().size())));
  if (s.ok()) s = g.synchronize(during(first, batch.size()));
  // A joined rank has no handle to carry its own failure: its contribution may be wrong,
  // so it stops (the collective itself completed on every member).
  if (s.ok() && !local.ok() && in.empty()) s = local;
  const Clock::time_point t1 = Clock::now();
  for (const Job& j : batch) {
    if (Entry* e = j.entry) {
      trace(j.response->name, TimelinePhase::kQueue, agreed, t0);
      trace(j.response->name, TimelinePhase::kCollective, t0, t1);
      finish(*e, s.ok() ? local : s);
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
  Status s;      // the backend's failure or the stream's: returned, stops the runtime
  Status local;  // this rank's own failure: goes to its handle; the call is still made
  auto keep = [&](Status st) {
    if (local.ok() && !st.ok()) local = std::move(st);
  };
  // Device scratch that this rank cannot allocate leaves it nothing to pass to the call: it
  // is then returned as the collective failure, and the other members' waits end at their
  // synchronize() deadline (NCCL) instead of hanging.
  auto scratch = [&](StatusOr<char*> p) -> char* {
    if (p.ok()) return *p;
    if (s.ok()) s = p.status();
    return nullptr;
  };
  if (e) keep(g.wait_ready(e->ready_event.get()));
  switch (r.op) {
    case OpType::kAllreduce: {
      const int64_t count = num_elements(r.shape);
      const void* in = nullptr;
      void* out = nullptr;
      if (e) {
        in = e->input.data;
        out = e->output.data;
        if (r.prescale != 1.0) {
          keep(g.copy({{in, out, count}}, r.dtype, kernels::Scale{1, r.prescale}));
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
      const AllgatherPlan plan = plan_allgather(r, n);
      StatusOr<TensorRef> out = output_for(*e, plan.output_shape);
      if (!out.ok()) keep(out.status());
      void* dst =
          out.ok() ? out->data : scratch(g.staging(static_cast<std::size_t>(plan.output_bytes)));
      if (s.ok()) s = be.allgatherv(e->input.data, dst, plan.bytes);
      break;
    }
    case OpType::kAlltoall: {
      AlltoallPlan plan = plan_alltoall(r, me, n);
      StatusOr<TensorRef> out = output_for(*e, plan.output_shape);
      if (!out.ok()) keep(out.status());
      void* dst =
          out.ok() ? out->data : scratch(g.staging(static_cast<std::size_t>(plan.output_bytes)));
      e->handle->received_splits = std::move(plan.received_splits);
      if (s.ok()) s = be.alltoallv(e->input.data, plan.send_bytes, dst, plan.recv_bytes);
      break;
    }
    case OpType::kReducescatter: {
      const ReducescatterPlan plan = plan_reducescatter(r, me, n);
      StatusOr<TensorRef> out = output_for(*e, plan.output_shape);
      if (!out.ok()) keep(out.status());
      const int64_t count = num_elements(r.shape);
      // The prescaled input and, when the output failed, the place to receive into share
      // one scratch buffer: input first, this rank's block after it.
      const std::size_t in_bytes = r.prescale != 1.0 ? static_cast<std::size_t>(count) * esz : 0;
      const std::size_t out_bytes =
          out.ok() ? 0 : static_cast<std::size_t>(plan.output_elements) * esz;
      char* tmp = in_bytes + out_bytes > 0 ? scratch(g.staging(in_bytes + out_bytes)) : nullptr;
      const void* in = e->input.data;
      if (s.ok() && r.prescale != 1.0) {
        keep(g.copy({{in, tmp, count}}, r.dtype, kernels::Scale{1, r.prescale}));
        in = tmp;
      }
      void* dst = out.ok() ? out->data : tmp + in_bytes;
      if (s.ok()) {
        s = be.reducescatter(in, dst, plan.counts, r.dtype, wire_op(r.reduce_op),
                             result_scale(r, n));
      }
      break;
    }
    case OpType::kBarrier: s = be.barrier(); break;
    case OpType::kJoin:
      if (e) e->handle->value = r.last_joined_rank;
      break;
    case OpType::kAddProcessSet:
    case OpType::kRemoveProcessSet: break;
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
