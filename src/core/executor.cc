#include "core/executor.h"

#include <cstring>
#include <string>
#include <tuple>

#include "core/op_plan.h"
#include "fusion/planner.h"
#include "kernels/reduce_kernels.h"

namespace chorus {

Executor::Executor(Backend* backend, std::size_t fusion_threshold, Timeline* timeline)
    : backend_(backend), fusion_(fusion_threshold), timeline_(timeline) {
  gpu_setup_.host = backend;
  gpu_setup_.label = "process set";
  gpu_setup_.fusion_threshold = fusion_threshold;
}

Executor::~Executor() = default;

void Executor::set_gpu_setup(const GpuContextSetup& setup) {
  gpu_setup_ = setup;
  gpu_setup_.host = backend_;
  gpu_setup_.fusion_threshold = fusion_.capacity();
}

#ifndef CHORUS_WITH_CUDA
// The API refuses CUDA tensors in a build without CUDA, so no CUDA response reaches here.
Status Executor::run_gpu_batch(const std::vector<Job>& batch, Clock::time_point, const Finish&) {
  const Response& r = *batch.front().response;
  return internal_error("'" + r.name + "' is on " + device_name(r.device) +
                        " in a build without CUDA");
}
#endif

void Executor::trace(const std::string& name, TimelinePhase phase, Clock::time_point start,
                     Clock::time_point end) {
  if (timeline_) timeline_->record(name, phase, start, end);
}

char* Executor::zeros(std::size_t bytes) {
  char* p = zeros_.get(bytes);
  std::memset(p, 0, bytes);
  return p;
}

StatusOr<TensorRef> Executor::output_for(Entry& e, const std::vector<int64_t>& shape) {
  const auto index = static_cast<std::size_t>(e.request.group_index);
  if (!e.allocate) {
    TensorRef out = e.handle->allocate_output(index, e.request.dtype, shape);
    e.output = TensorPlace::of(out);
    return out;
  }
  StatusOr<TensorRef> got = e.allocate(shape);
  if (!got.ok()) return got.status();
  if (got->dtype != e.request.dtype || got->shape != shape ||
      (got->data == nullptr && got->num_elements() > 0)) {
    return invalid_argument(std::string(op_type_name(e.request.op)) + " '" + e.request.name +
                            "': the output allocator returned " + describe(*got) + ", expected " +
                            dtype_name(e.request.dtype) + shape_string(shape));
  }
  e.output = TensorPlace::of(*got);
  e.handle->set_output(index, *got);
  return got;
}

Status Executor::execute(const std::vector<std::shared_ptr<const Response>>& responses,
                         EntryTable& entries, Clock::time_point agreed, const Finish& finish) {
  std::vector<Job> runnable;
  std::vector<FusionItem> items;
  // Allreduces fuse only with identical reduction parameters, and the host members of a
  // grouped allgather or reducescatter only with their group: keys index this list.
  std::vector<
      std::tuple<OpType, std::string, DataType, ReduceOp, Device::Kind, int, double, double>>
      keys;
  for (const auto& shared : responses) {
    const Response& r = *shared;
    Entry* e = entries.find(r.name);
    if (!r.status.ok()) {
      if (e) finish(*e, r.status);
      continue;
    }
    if (r.op == OpType::kAddProcessSet || r.op == OpType::kRemoveProcessSet) continue;
    if (e) trace(r.name, TimelinePhase::kNegotiate, e->enqueued, agreed);
    FusionItem item;
    item.bytes = static_cast<std::size_t>(num_elements(r.shape)) * dtype_size(r.dtype);
    const bool grouped_on_host = r.group_size > 0 && r.device.is_cpu() &&
                                 (r.op == OpType::kAllgather || r.op == OpType::kReducescatter);
    item.fusible = r.op == OpType::kAllreduce || grouped_on_host;
    if (item.fusible) {
      auto key =
          std::make_tuple(r.op, grouped_on_host ? r.group : std::string(), r.dtype, r.reduce_op,
                          r.device.kind, r.device.index, r.prescale, r.postscale);
      std::size_t k = 0;
      while (k < keys.size() && keys[k] != key) ++k;
      if (k == keys.size()) keys.push_back(key);
      item.key = k;
    }
    runnable.push_back({&r, e});
    items.push_back(item);
  }
  std::vector<Job> members;
  for (const FusionBatch& batch : plan_fusion(items, fusion_.capacity())) {
    members.clear();
    for (std::size_t i : batch.items) members.push_back(runnable[i]);
    const Job& front = members.front();
    Status s;
    if (front.response->device.kind == Device::Kind::kCUDA) {
      s = run_gpu_batch(members, agreed, finish);
    } else if (members.size() == 1) {
      if (front.entry && timeline_) {
        trace(front.response->name, TimelinePhase::kQueue, agreed, Clock::now());
      }
      s = run_single(*front.response, front.entry, finish);
    } else if (front.response->op == OpType::kAllgather) {
      s = run_grouped_allgather(members, finish);
    } else if (front.response->op == OpType::kReducescatter) {
      s = run_grouped_reducescatter(members, finish);
    } else {
      s = run_allreduce_batch(members, agreed, finish);
    }
    if (!s.ok()) return s;
  }
  return {};
}

bool Executor::runs_without_mpi(
    const std::vector<std::shared_ptr<const Response>>& responses) const {
  for (const auto& r : responses) {
    if (!r->device.is_cpu()) return false;
    if (r->status.ok() && !(r->op == OpType::kAllreduce && backend_->allreduce_without_mpi())) {
      return false;
    }
  }
  return true;
}

Status Executor::run_allreduce_batch(const std::vector<Job>& batch, Clock::time_point agreed,
                                     const Finish& finish) {
  const Response& first = *batch.front().response;
  const std::size_t esz = dtype_size(first.dtype);
  std::vector<const Response*> responses;
  responses.reserve(batch.size());
  for (const Job& j : batch) responses.push_back(j.response);
  // Packed back to back: the host kernels need no alignment beyond the element's.
  const FusionLayout layout = plan_fused_allreduce(responses, esz, fusion_.capacity());
  const std::size_t total = layout.bytes;
  char* buffer = fusion_.get(total);

  const Clock::time_point t0 = Clock::now();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const Response* r = batch[i].response;
    const int64_t count = num_elements(r->shape);
    if (Entry* e = batch[i].entry) {
      kernels::scale_copy(buffer + layout.offsets[i], e->input.data, count, r->dtype, r->prescale);
    } else {
      std::memset(buffer + layout.offsets[i], 0, static_cast<std::size_t>(count) * esz);
    }
  }
  const Clock::time_point t1 = Clock::now();
  Status s = backend_->allreduce(buffer, buffer, static_cast<int64_t>(total / esz), first.dtype,
                                 wire_op(first.reduce_op), result_scale(first, backend_->size()));
  const Clock::time_point t2 = Clock::now();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const Response* r = batch[i].response;
    const std::size_t bytes = static_cast<std::size_t>(num_elements(r->shape)) * esz;
    if (Entry* e = batch[i].entry) {
      if (s.ok()) std::memcpy(e->output.data, buffer + layout.offsets[i], bytes);
      if (timeline_) {  // a clock read per tensor costs about as much as a small copy
        trace(r->name, TimelinePhase::kQueue, agreed, t0);
        trace(r->name, TimelinePhase::kMemcpyIn, t0, t1);
        trace(r->name, TimelinePhase::kCollective, t1, t2);
        trace(r->name, TimelinePhase::kMemcpyOut, t2, Clock::now());
      }
      finish(*e, s);
    }
  }
  return s;
}

Status Executor::run_single(const Response& r, Entry* e, const Finish& finish) {
  const int n = backend_->size();
  const int me = backend_->rank();
  const std::size_t esz = dtype_size(r.dtype);
  const Clock::time_point t0 = Clock::now();
  Clock::time_point t1 = t0;
  Status s;
  // Every rank must make the same backend call even when its own part failed (an output
  // allocation, say), or the others would wait forever: `local` holds such a failure.
  Status local;
  switch (r.op) {
    case OpType::kAllreduce: {
      const int64_t count = num_elements(r.shape);
      const void* in;
      void* out;
      if (e) {
        in = e->input.data;
        out = e->output.data;
        if (r.prescale != 1.0) {
          kernels::scale_copy(out, in, count, r.dtype, r.prescale);
          in = out;
        }
      } else {
        out = zeros(static_cast<std::size_t>(count) * esz);
        in = out;
      }
      t1 = Clock::now();
      s = backend_->allreduce(in, out, count, r.dtype, wire_op(r.reduce_op), result_scale(r, n));
      break;
    }
    case OpType::kBroadcast:
      s = backend_->broadcast(e->output.data, num_elements(r.shape) * static_cast<int64_t>(esz),
                              r.root);
      break;
    case OpType::kAllgather: {
      const AllgatherPlan plan = plan_allgather(r, n);
      StatusOr<TensorRef> out = output_for(*e, plan.output_shape);
      void* dst = out.ok() ? out->data : zeros(static_cast<std::size_t>(plan.output_bytes));
      if (!out.ok()) local = out.status();
      t1 = Clock::now();
      s = backend_->allgatherv(e->input.data, dst, plan.bytes);
      break;
    }
    case OpType::kAlltoall: {
      AlltoallPlan plan = plan_alltoall(r, me, n);
      StatusOr<TensorRef> out = output_for(*e, plan.output_shape);
      void* dst = out.ok() ? out->data : zeros(static_cast<std::size_t>(plan.output_bytes));
      if (!out.ok()) local = out.status();
      e->handle->received_splits = std::move(plan.received_splits);
      t1 = Clock::now();
      s = backend_->alltoallv(e->input.data, plan.send_bytes, dst, plan.recv_bytes);
      break;
    }
    case OpType::kReducescatter: {
      const ReducescatterPlan plan = plan_reducescatter(r, me, n);
      StatusOr<TensorRef> out = output_for(*e, plan.output_shape);
      void* dst =
          out.ok() ? out->data : zeros(static_cast<std::size_t>(plan.output_elements) * esz);
      if (!out.ok()) local = out.status();
      const void* in = e->input.data;
      if (r.prescale != 1.0) {
        const int64_t count = num_elements(r.shape);
        char* staged = staging_.get(static_cast<std::size_t>(count) * esz);
        kernels::scale_copy(staged, in, count, r.dtype, r.prescale);
        in = staged;
      }
      t1 = Clock::now();
      s = backend_->reducescatter(in, dst, plan.counts, r.dtype, wire_op(r.reduce_op),
                                  result_scale(r, n));
      break;
    }
    case OpType::kBarrier: s = backend_->barrier(); break;
    case OpType::kJoin:
      if (e) e->handle->value = r.last_joined_rank;
      break;
    case OpType::kAddProcessSet:
    case OpType::kRemoveProcessSet: break;
  }
  const Clock::time_point t2 = Clock::now();
  if (e) {
    if (t1 > t0) trace(r.name, TimelinePhase::kMemcpyIn, t0, t1);
    trace(r.name, TimelinePhase::kCollective, t1, t2);
    finish(*e, s.ok() ? local : s);
  }
  return s;
}

}  // namespace chorus
