#include "core/executor.h"

#include <cstring>
#include <optional>
#include <string>
#include <tuple>

#include "core/injected_failure.h"
#include "core/op_plan.h"
#include "core/ops/op.h"
#include "fusion/planner.h"
#include "kernels/reduce_kernels.h"

namespace chorus {
namespace {

// A batch's completion, `done` with its final Status: at once where the memory's steps are
// done when they return (the host's, without a closure on the heap), else once its device
// work is, in launch order (TensorMemory::deferred).
template <class Done>
Status complete_batch(TensorMemory& m, const Response& first, std::size_t tensors, Status s,
                      Done&& done) {
  DeferredBatches* later = m.deferred();
  if (!later) return done(s);
  return later->complete(first, tensors, std::move(s), std::forward<Done>(done));
}

}  // namespace

std::string describe_batch(const Response& first, std::size_t tensors) {
  std::string named = std::string(op_type_name(first.op)) + " '" + first.name + "'";
  if (tensors > 1) named += " and " + std::to_string(tensors - 1) + " more fused tensors";
  return named;
}

Executor::Executor(BackendChoice host, std::size_t fusion_capacity, Timeline* timeline)
    : host_(std::move(host), fusion_capacity), fusion_limit_(fusion_capacity), timeline_(timeline) {
  gpu_setup_.host = &host_.backends();
  gpu_setup_.label = "process set";
  gpu_setup_.fusion_threshold = fusion_capacity;
}

Executor::~Executor() = default;

void Executor::set_gpu_setup(const GpuContextSetup& setup) {
  gpu_setup_ = setup;
  gpu_setup_.host = &host_.backends();
  gpu_setup_.fusion_threshold = host_.fusion_capacity();
}

void Executor::trace(const std::string& name, TimelinePhase phase, Clock::time_point start,
                     Clock::time_point end, std::string_view detail) {
  if (timeline_) timeline_->record(name, phase, start, end, detail);
}

Status Executor::execute(const std::vector<std::shared_ptr<const Response>>& responses,
                         EntryTable& entries, Clock::time_point agreed, const Finish& finish) {
  verdict_reached_ = true;
  std::vector<Job> runnable;
  std::vector<FusionItem> items;
  // Fused ops (allreduce) fuse only with identical reduction parameters, and the host members
  // of a group only with their group (OpDescriptor::batching): keys index this list.
  std::vector<
      std::tuple<OpType, std::string, DataType, ReduceOp, Device::Kind, int, double, double>>
      keys;
  for (const auto& shared : responses) {
    const Response& r = *shared;
    const uint64_t sequence = ++responses_run_;
    Entry* e = entries.find(r.name);
    if (!r.status.ok()) {
      if (e) finish(*e, r.status);
      continue;
    }
    const OpDescriptor& op = op_descriptor(r.op);
    if (!op.run) continue;  // a process-set change: the set table applies it
    if (e && timeline_) {
      trace(r.name, TimelinePhase::kNegotiate, e->enqueued, agreed,
            "collective " + std::to_string(sequence));
    }
    FusionItem item;
    item.bytes = static_cast<std::size_t>(num_elements(r.shape)) * dtype_size(r.dtype);
    const Batching batching = op.batching(r);
    item.fusible = batching != Batching::kAlone;
    if (item.fusible) {
      auto key = std::make_tuple(r.op, batching == Batching::kGroupOnHost ? r.group : std::string(),
                                 r.dtype, r.reduce_op, r.device.kind, r.device.index, r.prescale,
                                 r.postscale);
      std::size_t k = 0;
      while (k < keys.size() && keys[k] != key) ++k;
      if (k == keys.size()) keys.push_back(key);
      item.key = k;
    }
    runnable.push_back({&r, e});
    items.push_back(item);
  }
  // Each batch's handles complete only once the set agreed on its outcome (BatchVerdicts):
  // until then what the batch would give them waits in pending_.
  const std::vector<FusionBatch> batches = plan_fusion(items, fusion_limit_);
  // Nothing ran (an idle round, or only failed responses): nothing to agree on. Every member
  // has the same responses, so all skip the verdict alike.
  if (batches.empty()) return settle_device();
  pending_.clear();
  finishers_.clear();
  std::vector<Status>& mine = mine_;
  mine.assign(batches.size(), Status());
  // A batch's name, for messages: made only where one is written.
  auto described = [&](std::size_t i) {
    return describe_batch(*runnable[batches[i].items.front()].response, batches[i].items.size());
  };
  Status stop;  // this rank's failed call: it is out of step and makes no more of them
  int stop_batch = -1;
  bool device_ran = false;
  std::vector<Job> members;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    members.clear();
    for (std::size_t k : batches[i].items) members.push_back(runnable[k]);
    const Job& front = members.front();
    if (!stop.ok()) continue;
    const Finish& later = finishers_.emplace_back([this, i](Entry& e, const Status& st) {
      pending_.push_back({&e, st, i});
    });
    batch_local_ = Status();
    Status s;
    if (front.response->device.kind == Device::Kind::kCUDA) {
      device_ran = true;
      // The device memory is made at the set's first CUDA response, on every member
      // together; its failure is every member's. It names the batch that asked for it: a
      // communicator that could not be made fails that collective.
      StatusOr<TensorMemory*> device = device_memory(members);
      s = device.ok()
              ? run_batch(**device, members, agreed, later)
              : Status(device.status().code(), described(i) + ": " + device.status().message());
    } else {
      // Handles complete in response order: the device's batches before a host batch.
      s = settle_device();
      const OpDescriptor& op = op_descriptor(front.response->op);
      if (s.ok() && members.size() > 1 && op.run_group) {
        GroupRun::Trace traced = [this](const std::string& name, Clock::time_point t0,
                                        Clock::time_point t1) {
          trace(name, TimelinePhase::kCollective, t0, t1);
        };
        GroupRun group{host_, members, later, traced};
        s = op.run_group(group);
      } else if (s.ok()) {
        s = run_batch(host_, members, agreed, later);
      }
    }
    mine[i] = !s.ok() ? s : batch_local_;
    if (!s.ok()) {
      stop = s;
      stop_batch = static_cast<int>(i);
    }
  }
  // The device's batches still in flight complete (or fail) before the verdict: a batch whose
  // device work failed is this rank's failure too, and leaves it out of step (its
  // communicators were aborted); the set stops with the first such batch.
  const Status settled = settle_device();
  int first_late = -1;  // the first batch whose device work failed
  for (const Pending& p : pending_) {
    if (mine[p.batch].ok() && !p.status.ok()) {
      mine[p.batch] = p.status;
      if (first_late < 0 || static_cast<int>(p.batch) < first_late)
        first_late = static_cast<int>(p.batch);
    }
  }
  if (!settled.ok() && stop.ok()) {
    stop = settled;
    stop_batch = first_late >= 0 ? first_late : static_cast<int>(mine.size()) - 1;
    if (mine[stop_batch].ok()) mine[stop_batch] = settled;
  }
  StatusOr<RoundVerdict> verdict = verdicts_
                                       ? verdicts_->agree(mine, stop_batch, described, device_ran)
                                       : StatusOr<RoundVerdict>(RoundVerdict{
                                             std::vector<Status>(mine.size()), !stop.ok(), stop});
  verdict_reached_ = verdict.ok();
  if (!verdict.ok()) {
    // No verdict: a member never came (it exited, or is stuck). What this rank saw of each
    // batch goes with the reason, and the runtime stops.
    const Status& why = verdict.status();
    auto unagreed = [&](std::size_t i) {
      return Status(why.code(), described(i) + ": " +
                                    (mine[i].ok() ? "" : mine[i].message() + "; then ") +
                                    why.message());
    };
    std::size_t first = 0;
    while (first + 1 < mine.size() && mine[first].ok()) ++first;
    for (const Pending& p : pending_) finish(*p.entry, unagreed(p.batch));
    pending_.clear();
    finishers_.clear();
    return unagreed(first);
  }
  const Status end = verdict->stop ? verdict->stop_status : settled;
  for (const Pending& p : pending_) {
    const Status& agreed_status = verdict->batches[p.batch];
    finish(*p.entry, !end.ok() ? end : !agreed_status.ok() ? agreed_status : p.status);
  }
  pending_.clear();
  finishers_.clear();
  // Every handle of the round completes before the next round: its entries leave the table.
  return end;
}

Status Executor::settle_device() {
  DeferredBatches* later = device_ ? device_->deferred() : nullptr;
  return later ? later->settle() : Status();
}

void Executor::abandon_device(const Status& why) {
  if (DeferredBatches* later = device_ ? device_->deferred() : nullptr) later->abandon(why);
}

bool Executor::runs_without_mpi(
    const std::vector<std::shared_ptr<const Response>>& responses) const {
  for (const auto& r : responses) {
    if (!r->device.is_cpu()) return false;
    // Adasum moves its blocks with the set's alltoall and allgather (collectives/adasum.h).
    if (r->status.ok() && r->reduce_op == ReduceOp::kAdasum) return false;
    if (r->status.ok() &&
        !(op_descriptor(r->op).collective == Collective::kAllreduce &&
          host_.backends().pick(Collective::kAllreduce, r->dtype).allreduce_without_mpi())) {
      return false;
    }
  }
  return true;
}

// One batch of the plan on `m`, fused or alone.
Status Executor::run_batch(TensorMemory& m, const std::vector<Job>& batch, Clock::time_point agreed,
                           const Finish& finish) {
  if (batch.size() > 1) return run_fused_allreduce(m, batch, agreed, finish);
  const Job& j = batch.front();
  if (j.entry && timeline_) trace(j.response->name, TimelinePhase::kQueue, agreed, Clock::now());
  return run_single(m, *j.response, j.entry, finish);
}

// The failure discipline of the fused allreduce, as of each op's execution (OpRun): this
// rank's own failure (an output it cannot allocate, an event it cannot wait on, a kernel it
// cannot launch) is kept in `local` and goes to its handle, and the backend call is still made, so
// that the other members never wait for this rank; only the backend's failure (the ranks are out of
// step), or memory this rank cannot have to call it with, or a failed wait for the device, is
// returned and stops the runtime.
Status Executor::run_fused_allreduce(TensorMemory& m, const std::vector<Job>& batch,
                                     Clock::time_point agreed, const Finish& finish) {
  const Response& first = *batch.front().response;
  const std::size_t esz = dtype_size(first.dtype);
  std::vector<const Response*> responses;
  responses.reserve(batch.size());
  for (const Job& j : batch) responses.push_back(j.response);
  const FusionLayout layout =
      plan_fused_allreduce(responses, m.fusion_alignment(esz), m.fusion_capacity());
  const std::size_t total = layout.bytes;
  if (total > m.fusion_capacity()) {
    // The plan is the same on every rank, so every rank returns here.
    return internal_error("fusion batch of " + std::to_string(total) + " bytes exceeds the " +
                          std::to_string(m.fusion_capacity()) + "-byte fusion buffer");
  }
  char* buffer = m.fusion_buffer();
  Status local;
  auto keep = [&](Status st) {
    if (local.ok() && !st.ok()) local = std::move(st);
  };
  const Clock::time_point t0 = Clock::now();
  // Reused from batch to batch: no allocation per batch.
  std::vector<gpu::CopyItem>& in = copy_in_;
  std::vector<gpu::CopyItem>& out = copy_out_;
  in.clear();
  out.clear();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const int64_t count = num_elements(batch[i].response->shape);
    char* slot = buffer + layout.offsets[i];
    if (Entry* e = batch[i].entry) {
      // An input whose producer cannot be waited for is never read: zeros take its slot,
      // and the failure goes to the verdict.
      const Status ready = m.wait_ready(*e);
      if (ready.ok()) {
        in.push_back({e->input.data, slot, count});
      } else {
        keep(ready);
        keep(m.zero(slot, static_cast<std::size_t>(count) * esz));
      }
      out.push_back({slot, e->output.data, count});
    } else {
      // A joined rank contributes zeros for the tensors it does not have.
      keep(m.zero(slot, static_cast<std::size_t>(count) * esz));
    }
  }
  keep(m.copy(in, first.dtype, kernels::Scale{1, first.prescale}));
  // Phases timed on the host (the host's steps are done when they return); on a device the
  // batch's whole span is one phase, and t1 stays t0.
  const Clock::time_point t1 = m.timed_on_host() ? Clock::now() : t0;
  // Padding between the slots is reduced with the rest and never read.
  Backend& chosen = m.backend(Collective::kAllreduce, first.dtype);
  const kernels::Scale result = result_scale(first, chosen.size());
  std::optional<InjectedFailureBackend> failing;
  for (const Job& j : batch) {
    if (!injected_failure_.empty() && j.response->name == injected_failure_)
      failing.emplace(chosen, injected_failure_);
  }
  Backend& be = failing ? *failing : chosen;
  const kernels::Scale scale = m.scales_on_unpack() ? kernels::Scale{} : result;
  Status s;
  if (first.reduce_op == ReduceOp::kAdasum) {
    std::vector<AdasumTensor> tensors(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      tensors[i] = {static_cast<int64_t>(layout.offsets[i] / esz),
                    num_elements(batch[i].response->shape)};
    }
    s = m.adasum(buffer, buffer, tensors, first.dtype, scale);
  } else {
    s = be.allreduce(buffer, buffer, static_cast<int64_t>(total / esz), first.dtype,
                     wire_op(first.reduce_op), scale);
  }
  for (const Job& j : batch) keep(injected_part(j.response->name));
  const Clock::time_point t2 = m.timed_on_host() ? Clock::now() : t0;
  if (s.ok() && local.ok()) {
    keep(m.copy(out, first.dtype, m.scales_on_unpack() ? result : kernels::Scale{}));
  }
  batch_local_ = local;
  // The handles complete when the batch's device work is done (or ended after a failure):
  // at once on the host; on a device, while later batches are launched (complete_batch).
  const bool joined_only = in.empty();
  const bool timed = m.timed_on_host();
  return complete_batch(
      m, first, batch.size(), std::move(s),
      [this, batch, local, joined_only, timed, agreed, t0, t1, t2, total,
       &finish](const Status& done) {
        // A joined rank has no handle to carry its own failure: its contribution may be
        // wrong, so it stops (the collective itself completed on every member).
        const Status s = done.ok() && !local.ok() && joined_only ? local : done;
        const Clock::time_point t3 = Clock::now();
        // The fusion batch, on each of its tensors' collectives (chorus-trace summary counts
        // them).
        const std::string fused = timeline_ && batch.size() > 1
                                      ? "fused: " + std::to_string(batch.size()) + " tensors, " +
                                            std::to_string(total) + " bytes"
                                      : std::string();
        for (const Job& j : batch) {
          Entry* e = j.entry;
          if (!e) continue;
          if (timeline_) {  // a clock read per tensor costs about as much as a small copy
            const std::string& name = j.response->name;
            trace(name, TimelinePhase::kQueue, agreed, t0);
            if (timed) {
              trace(name, TimelinePhase::kMemcpyIn, t0, t1);
              trace(name, TimelinePhase::kCollective, t1, t2, fused);
              trace(name, TimelinePhase::kMemcpyOut, t2, t3);
            } else {
              trace(name, TimelinePhase::kCollective, t0, t3, fused);
            }
          }
          finish(*e, s.ok() ? local : s);
        }
        return s;
      });
}

Status Executor::injected_part(const std::string& name) const {
  if (injected_part_.empty() || name != injected_part_) return {};
  return Status(StatusCode::kInternal,
                "this rank's own part of '" + name + "' failed: CHORUS_TEST_FAIL_PART");
}

Status Executor::run_single(TensorMemory& m, const Response& r, Entry* e, const Finish& finish) {
  const OpDescriptor& op = op_descriptor(r.op);
  Backend& chosen = m.backend(op.collective, r.dtype);
  std::optional<InjectedFailureBackend> failing;
  if (!injected_failure_.empty() && r.name == injected_failure_) failing.emplace(chosen, r.name);
  const Clock::time_point t0 = Clock::now();
  OpRun run{m, failing ? *failing : chosen, r, e, {}, {}, t0};
  if (e) {
    // An input whose producer cannot be waited for is never read: the op takes part with
    // zeros in its place (memory it cannot have for them leaves it out of step).
    if (Status ready = m.wait_ready(*e); !ready.ok()) {
      run.keep(ready);
      const auto bytes = static_cast<std::size_t>(num_elements(r.shape)) * dtype_size(r.dtype);
      if (char* zeros = run.have(m.zeros(bytes))) e->input.data = zeros;
    }
  }
  if (run.s.ok()) op.run(run);
  run.keep(injected_part(r.name));
  batch_local_ = run.local;
  // The handle completes once the device work on its buffers is done, or ended after a
  // failure (DeferredBatches::complete).
  const bool timed = m.timed_on_host();
  const Clock::time_point t1 = run.begun;
  return complete_batch(
      m, r, 1, std::move(run.s),
      [this, &r, e, local = std::move(run.local), t0, t1, timed, &finish](const Status& done) {
        const Clock::time_point t2 = Clock::now();
        if (e) {
          if (timed && t1 > t0) trace(r.name, TimelinePhase::kMemcpyIn, t0, t1);
          trace(r.name, TimelinePhase::kCollective, timed ? t1 : t0, t2);
          finish(*e, done.ok() ? local : done);
        }
        return done;
      });
}

}  // namespace chorus
