// The executor's CUDA memory (core/tensor_memory.h): the set's GPU context, made at its
// first CUDA response. Compiled only with CHORUS_WITH_CUDA.
//
// Per batch: the communication stream waits on every input's ready event (no host wait),
// one batched kernel packs the inputs into the device fusion buffer with the prescale
// folded in, the backend reduces (NCCL enqueues on the stream; MPI stages), one batched
// kernel unpacks with the average and postscale folded in, and an event marks the batch's
// end. The background thread goes on launching the round's next batches while the device
// runs this one (up to kInFlight), and completes the handles of each batch, in order, once
// its event has passed (seen between launches, or GpuContext::wait: sleeps, polls NCCL's
// async errors, bounded). A NCCL kernel is enqueued only after the host saw the batch's
// inputs produced (GpuContext::await_producers), so that an abort never waits behind them.
// Every batch uses the one stream, so a batch's packing never overtakes the unpacking of
// the one before it in the shared fusion buffer. The trainer's streams are never blocked.
// An output that an allocator made is written only after the stream it was allocated for
// reaches the allocation, and a failed batch's handles complete only after its device
// work ended.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <deque>

#include "base/logging.h"
#include "core/executor.h"
#include "kernels/cuda_check.h"

namespace chorus {
namespace {

class CudaMemory final : public TensorMemory, public DeferredBatches {
 public:
  // `host`: the set's host backends, which carry Adasum's steps.
  CudaMemory(std::unique_ptr<GpuContext> g, Backend& host) : g_(std::move(g)), host_(host) {}
  // Nothing is in flight here: Executor::execute settles every round before it returns.
  ~CudaMemory() override {
    for (void* e : events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  }

  Backend& backend(Collective c, DataType dtype) override { return g_->backend(c, dtype); }
  Status wait_ready(const Entry& e) override { return g_->wait_ready(e.ready_event.get()); }
  Status wait_allocated(const TensorRef& out) override {
    return g_->wait_allocated(out.ready_stream, out.ready_event);
  }
  Status copy(const std::vector<gpu::CopyItem>& items, DataType dtype,
              kernels::Scale scale) override {
    return g_->copy(items, dtype, scale);
  }
  // Staged through host memory, whose failures are kept until the set's calls are made.
  Status adasum(const void* send, void* recv, const std::vector<AdasumTensor>& tensors,
                DataType dtype, kernels::Scale scale) override {
    int64_t extent = 0;
    for (const AdasumTensor& t : tensors) extent = std::max(extent, t.offset + t.count);
    const std::size_t bytes = static_cast<std::size_t>(extent) * dtype_size(dtype);
    char* staged = staged_.get(bytes + 1);
    const Status in = g_->copy_and_wait(staged, send, bytes, "staging Adasum's input");
    const Status s = adasum_.allreduce(host_, staged, staged, tensors, dtype, scale);
    if (!in.ok()) return in;
    if (!s.ok()) return s;
    return g_->copy_and_wait(recv, staged, bytes, "staging Adasum's result");
  }
  Status zero(void* dst, std::size_t bytes) override { return g_->zero(dst, bytes); }
  StatusOr<char*> zeros(std::size_t bytes) override { return g_->zeros(bytes); }
  StatusOr<char*> scratch(std::size_t bytes) override { return g_->staging(bytes); }
  char* fusion_buffer() override { return g_->fusion_buffer(); }
  std::size_t fusion_capacity() const override { return g_->fusion_capacity(); }
  // Slots on 16 bytes when the padded batch fits: every tensor after an odd-sized one then
  // keeps the kernel's 16-byte copies (cuda_kernels.cu).
  std::size_t fusion_alignment(std::size_t) const override { return 16; }
  bool scales_on_unpack() const override { return true; }
  bool timed_on_host() const override { return false; }
  DeferredBatches* deferred() override { return this; }

  Status complete(const Response& first, std::size_t tensors, Status s, Done done) override {
    g_->end_batch();
    std::string during = describe_batch(first, tensors);
    if (!s.ok()) return fail_all(Status(s.code(), during + ": " + s.message()), &done);
    StatusOr<void*> event = take_event();
    if (!event.ok()) return fail_all(event.status(), &done);
    if (Status r = g_->record(*event); !r.ok()) {
      events_.push_back(*event);
      return fail_all(r, &done);
    }
    in_flight_.push_back({*event, std::move(during), std::move(done)});
    // A bounded queue: past kInFlight batches, the oldest completes before this returns.
    Status first_failure = complete_finished();
    if (in_flight_.size() > kInFlight) {
      Status oldest = complete_oldest();
      if (first_failure.ok()) first_failure = oldest;
    }
    return first_failure;
  }

  Status settle() override {
    Status first;
    while (!in_flight_.empty()) {
      Status s = complete_oldest();
      if (first.ok()) first = s;
    }
    return first;
  }

  void abandon(const Status& why) override { g_->fail(why); }

 private:
  // Batches launched and not yet completed, at most this many: enough to hide the host's
  // work for one batch (negotiation is per round, packing and the NCCL call per batch)
  // behind the device's for the ones before it. The copy kernels' descriptor ring holds
  // two launches per batch for every batch in flight and the one being launched.
  static constexpr std::size_t kInFlight = gpu::BatchedCopy::kSlots / 2 - 1;
  struct InFlight {
    void* event;  // cudaEvent_t recorded after the batch's work
    std::string during;
    Done done;
  };

  StatusOr<void*> take_event() {
    if (!events_.empty()) {
      void* e = events_.back();
      events_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    CHORUS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return static_cast<void*>(e);
  }

  // Pops the oldest batch and completes it with `s`.
  Status pop_oldest(const Status& s) {
    InFlight b = std::move(in_flight_.front());
    in_flight_.pop_front();
    events_.push_back(b.event);
    return b.done(s);
  }

  // Completes the batches at the front whose work the device has finished, without waiting.
  Status complete_finished() {
    Status first;
    while (!in_flight_.empty() &&
           cudaEventQuery(static_cast<cudaEvent_t>(in_flight_.front().event)) == cudaSuccess) {
      Status s = pop_oldest(Status());
      if (first.ok()) first = s;
    }
    return first;
  }

  // Waits for the oldest batch's work and completes it; after a failure, ends the rest.
  Status complete_oldest() {
    Status s = g_->wait(in_flight_.front().event, in_flight_.front().during);
    if (!s.ok()) return fail_all(std::move(s), nullptr);  // wait() ended the work
    return pop_oldest(s);
  }

  // After a failure `s`, once the device work was ended (GpuContext::fail aborted the
  // communicators and drained the stream, once): every batch in flight, in order, then `last`
  // (the failing batch, if it was not launched yet) complete with `s`. A batch still in flight
  // may have finished before the failure, but after an abort every event has passed, so none
  // can be told apart: they fail too. Batches seen finished at an earlier launch completed
  // then (complete_finished), with their own result.
  Status fail_all(Status s, Done* last) {
    s = g_->fail(std::move(s));
    while (!in_flight_.empty()) pop_oldest(s);
    if (last) (*last)(s);
    return s;
  }

  std::unique_ptr<GpuContext> g_;
  Backend& host_;
  Adasum adasum_;
  HostBuffer staged_;  // Adasum's buffers on the host
  std::deque<InFlight> in_flight_;
  std::vector<void*> events_;  // cudaEvent_t, free for the next batch
};

}  // namespace

StatusOr<TensorMemory*> Executor::device_memory(const std::vector<Job>& batch) {
  if (device_) return device_.get();
  // The rank's one GPU (RankDevice): pinned at enqueue by its first CUDA tensor, so a
  // joined rank with no tensor of its own still builds on the GPU it will use.
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) devices = 1;
  const int fallback = gpu_setup_.local_rank % devices;
  const int index = gpu_setup_.device ? gpu_setup_.device->pin(fallback) : fallback;
  std::vector<void*> inputs;
  for (const Job& j : batch) {
    if (j.entry && j.entry->ready_event) inputs.push_back(j.entry->ready_event.get());
  }
  StatusOr<std::unique_ptr<GpuContext>> g = GpuContext::create(gpu_setup_, index, inputs);
  if (!g.ok()) return g.status();
  log().debug("{}: GPU context on cuda:{} ({})", gpu_setup_.label, index, (*g)->description());
  device_ = std::make_unique<CudaMemory>(std::move(g).value(), host_.backends());
  return device_.get();
}

}  // namespace chorus
