#include "collectives/gpu_context.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/logging.h"
#include "collectives/gpu_path.h"
#include "collectives/gpu_staged_backend.h"
#include "kernels/cuda_check.h"
#ifdef CHORUS_WITH_NCCL
#include "collectives/nccl/nccl_backend.h"
#endif

namespace chorus {

StatusOr<std::unique_ptr<GpuContext>> GpuContext::create(const GpuContextSetup& setup, int device,
                                                         const std::vector<void*>& inputs) {
  std::unique_ptr<GpuContext> c(new GpuContext());
  c->device_ = device;
  c->timeout_ = setup.timeout;
  c->label_ = setup.label;
  c->ranks_ = setup.ranks;
  c->fusion_capacity_ = setup.fusion_threshold;
  // This rank's own steps may fail here; choose_backend() still takes part in the set's
  // exchange, so that every member learns of it and fails too.
  Status prepared = c->prepare(setup);
  if (prepared.ok()) {
    c->producers_ = inputs;
    prepared = c->await_producers();
  }
  if (Status s = c->choose_backend(setup, prepared); !s.ok()) {
    c->failed_ = true;  // a producer may be stuck: tearing down must not wait for the device
    return s;
  }
  return c;
}

Status GpuContext::prepare(const GpuContextSetup& setup) {
  CHORUS_CUDA_CHECK(cudaSetDevice(device_));
  cudaStream_t stream = nullptr;
  CHORUS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  cudaEvent_t done = nullptr;
  CHORUS_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  done_ = done;
  StatusOr<std::unique_ptr<gpu::BatchedCopy>> copy = gpu::BatchedCopy::create(device_);
  if (!copy.ok()) return copy.status();
  copy_ = std::move(copy).value();
  // Stream-ordered, as the other buffers: the set's teardown frees it without waiting for
  // the device.
  if (fusion_capacity_ > 0) CHORUS_CUDA_CHECK(cudaMallocAsync(&fusion_, fusion_capacity_, stream));
  return {};
}

GpuContext::~GpuContext() {
  // A healthy, idle stream: wait for it and let the backends destroy their communicators
  // normally. Work still queued after a failure may never finish (a peer that left a
  // collective): abort the communicators first, which ends their kernels, and never
  // destroy a communicator that is failed or busy.
  auto stream = static_cast<cudaStream_t>(stream_);
  if (stream && (failed_ || cudaStreamQuery(stream) != cudaSuccess)) abort_nccl();
  if (failed_) {
    // After a failure the device may never be idle again (a producer that is stuck, a
    // collective a dead peer holds), and freeing device or pinned memory waits for all of
    // it: what the set holds is left to the process's exit.
    if (choice_) choice_->abandon();
    for (std::unique_ptr<Backend>& b : left_) static_cast<void>(b.release());
    static_cast<void>(copy_.release());
    return;
  }
  if (stream) cudaStreamSynchronize(stream);
  choice_.reset();
  left_.clear();
  copy_.reset();
  // On the set's stream, idle by now: cudaFree would wait for the whole device, the
  // trainer's kernels too, holding the background thread when a set is removed.
  for (void* p : {fusion_, zeros_, staging_}) {
    if (p) cudaFreeAsync(p, stream);
  }
  if (done_) cudaEventDestroy(static_cast<cudaEvent_t>(done_));
  for (void* e : marks_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  if (stream) cudaStreamDestroy(stream);
}

void GpuContext::abort_nccl() {
#ifdef CHORUS_WITH_NCCL
  for (NcclBackend* n : nccl_) n->abort("the process set's GPU context was torn down");
#endif
}

namespace {

// One member's record in the setup exchange.
constexpr int kRecord = 18;
constexpr int kOk = 16;         // 1: this rank's own setup succeeded
constexpr int kRequested = 17;  // GpuBackendRequest: 0 auto, 1 nccl, 2 mpi

}  // namespace

// Every member contributes its GPU's UUID, whether its own setup succeeded and which path it
// was asked for (CHORUS_GPU_BACKEND); all see the same table, so all choose the same path,
// and all fail together when one could not set up, when they asked for different paths, or
// when the path asked for cannot run.
Status GpuContext::choose_backend(const GpuContextSetup& setup, const Status& prepared) {
  Backend& host = *setup.host;
  std::vector<char> table(static_cast<std::size_t>(kRecord) * host.size());
  char* mine = table.data() + static_cast<std::size_t>(kRecord) * host.rank();
  Status local = prepared;
  if (local.ok()) {
    cudaDeviceProp prop{};
    const cudaError_t rc = cudaGetDeviceProperties(&prop, device_);
    if (rc == cudaSuccess) {
      std::memcpy(mine, &prop.uuid, 16);
    } else {
      local = cuda_detail::cuda_status(rc, "cudaGetDeviceProperties", __FILE__, __LINE__);
    }
  }
  mine[kOk] = local.ok() ? 1 : 0;
  mine[kRequested] = static_cast<char>(setup.requested_backend);
  if (Status s = host.allgatherv(mine, table.data(), std::vector<int64_t>(host.size(), kRecord));
      !s.ok()) {
    return s;
  }
  if (!local.ok()) return local;
  GpuPathInputs in;
#ifdef CHORUS_WITH_NCCL
  in.nccl_built = true;
#endif
  std::string failed;
  std::vector<GpuBackendRequest> requested;
  for (int r = 0; r < host.size(); ++r) {
    const char* rec = table.data() + static_cast<std::size_t>(kRecord) * r;
    if (rec[kOk] != 1) failed += (failed.empty() ? "" : ", ") + std::to_string(r);
    requested.push_back(static_cast<GpuBackendRequest>(rec[kRequested]));
    for (int q = 0; q < r; ++q) {
      if (std::memcmp(rec, table.data() + static_cast<std::size_t>(kRecord) * q, 16) == 0) {
        if (!in.gpu_shared)
          in.shared_by = "ranks " + std::to_string(q) + " and " + std::to_string(r);
        in.gpu_shared = true;
      }
    }
  }
  if (!failed.empty()) {
    return internal_error(set_name() + ": the GPU context could not be set up on rank(s) " +
                          failed + " of the set (their logs say why)");
  }
  StatusOr<GpuBackendRequest> agreed = agree_gpu_backend(requested, setup.label);
  if (!agreed.ok()) return agreed.status();
  in.requested = *agreed;
  in.shared_gpu_nccl = setup.shared_gpu_nccl;
  StatusOr<GpuPathChoice> chosen = choose_gpu_path(in);
  if (!chosen.ok()) {
    return Status(chosen.status().code(), setup.label + ": " + chosen.status().message());
  }
  const GpuPathChoice& choice = *chosen;
  log().debug("{}: GPU collectives on cuda:{} use {} ({})", setup.label, device_,
              gpu_path_name(choice.path), choice.reason);
  ProviderSet set;
  set.label = setup.label;
  set.ranks = setup.ranks;
  set.global_set = setup.global_set;
  set.map = setup.map;
  set.hierarchical = setup.hierarchical_requested;
  set.groups = setup.groups;
  set.host = setup.host;
  set.gpu_path = &choice;
  set.gpu = this;
  set.set_name = set_name();
  StatusOr<BackendChoice> assembled = assemble(Memory::kGpu, set);
  if (!assembled.ok()) return assembled.status();
  choice_.emplace(std::move(assembled).value());
  description_ = gpu_path_name(choice.path);
  if (choice_->offered_by("hierarchical allreduce")) description_ += " + hierarchical allreduce";
  return {};
}

// Device memory moved by a group's host backends, staged through pinned buffers. Staged
// copies wait for the stream through synchronize(): asleep between polls, NCCL's errors
// polled (a level of the hierarchy may wait behind a NCCL one), and the same deadline.
std::unique_ptr<Backend> GpuContext::staged(Backend& host) {
  return std::make_unique<StagedGpuBackend>(host, stream_,
                                            [this] { return synchronize("a staged host copy"); });
}

// Collective over the members of `host`: agreed among them (NcclBackend::create).
StatusOr<std::unique_ptr<Backend>> GpuContext::nccl(Backend& host, const std::string& label) {
#ifdef CHORUS_WITH_NCCL
  StatusOr<std::unique_ptr<NcclBackend>> b = NcclBackend::create(
      host, device_, stream_, copy_.get(), label, timeout_, [this] { return await_producers(); });
  if (!b.ok()) return b.status();
  nccl_.push_back(b->get());
  return std::unique_ptr<Backend>(std::move(b).value());
#else
  (void)host;
  return internal_error(label + ": NCCL is not in this build");  // never the agreed path
#endif
}

Status GpuContext::wait_ready(void* event) {
  if (!event) return {};
  CHORUS_CUDA_CHECK(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream_), static_cast<cudaEvent_t>(event), 0));
  producers_.push_back(event);
  return {};
}

Status GpuContext::wait_allocated(void* stream, void* event) {
  if (event) return wait_ready(event);
  if (marks_used_ == marks_.size()) {
    cudaEvent_t e = nullptr;
    CHORUS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    marks_.push_back(e);
  }
  // A mark is recorded again in a later batch only: a stream's wait takes the event's state
  // when it is enqueued, and the host's await is over by then (end_batch).
  void* mark = marks_[marks_used_++];
  CHORUS_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(mark), static_cast<cudaStream_t>(stream)));
  return wait_ready(mark);
}

Status GpuContext::await_producers() {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto pause = std::chrono::microseconds(1);
  for (std::size_t i = 0; i < producers_.size();) {
    const cudaError_t q = cudaEventQuery(static_cast<cudaEvent_t>(producers_[i]));
    if (q == cudaSuccess) {
      ++i;
      continue;
    }
    if (q != cudaErrorNotReady)
      return cuda_detail::cuda_status(q, "cudaEventQuery", __FILE__, __LINE__);
    if (std::chrono::steady_clock::now() > deadline) {
      return Status(
          StatusCode::kAborted,
          set_name() + ": the batch's inputs were not produced within " +
              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) +
              " s (CHORUS_GPU_TIMEOUT_SECONDS): the streams that produce them are "
              "stuck or far behind");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(100));
  }
  producers_.clear();
  return {};
}

void GpuContext::end_batch() {
  producers_.clear();
  marks_used_ = 0;
}

Status GpuContext::copy(const std::vector<gpu::CopyItem>& items, DataType dtype,
                        kernels::Scale scale) {
  return copy_->launch(items, dtype, scale, stream_);
}

// Stream-ordered: batches still in flight keep the old buffer until they are done, and
// nothing waits for the device (cudaFree would, behind a collective a dead peer holds up).
StatusOr<char*> GpuContext::grow(void** slot, std::size_t* have, std::size_t bytes) {
  auto stream = static_cast<cudaStream_t>(stream_);
  if (bytes > *have || !*slot) {
    if (*slot) CHORUS_CUDA_CHECK(cudaFreeAsync(*slot, stream));
    *slot = nullptr;
    *have = 0;
    CHORUS_CUDA_CHECK(cudaMallocAsync(slot, std::max<std::size_t>(bytes, 256), stream));
    *have = std::max<std::size_t>(bytes, 256);
  }
  return static_cast<char*>(*slot);
}

Status GpuContext::zero(void* dst, std::size_t bytes) {
  return gpu::zero_fill(dst, bytes, stream_);
}

StatusOr<char*> GpuContext::zeros(std::size_t bytes) {
  StatusOr<char*> p = grow(&zeros_, &zeros_bytes_, bytes);
  if (!p.ok()) return p;
  if (Status s = gpu::zero_fill(*p, bytes, stream_); !s.ok()) return s;
  return p;
}

StatusOr<char*> GpuContext::staging(std::size_t bytes) {
  return grow(&staging_, &staging_bytes_, bytes);
}

Status GpuContext::copy_and_wait(void* dst, const void* src, std::size_t bytes,
                                 const std::string& during) {
  if (bytes > 0) {
    if (cudaError_t rc =
            cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream_));
        rc != cudaSuccess) {
      return fail(cuda_detail::cuda_status(rc, "cudaMemcpyAsync", __FILE__, __LINE__));
    }
  }
  return synchronize(during);
}

Status GpuContext::synchronize(const std::string& during) {
  if (Status s = record(done_); !s.ok()) return s;
  return wait(done_, during);
}

Status GpuContext::record(void* event) {
  if (cudaError_t rc =
          cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream_));
      rc != cudaSuccess) {
    return fail(cuda_detail::cuda_status(rc, "cudaEventRecord", __FILE__, __LINE__));
  }
  return {};
}

Status GpuContext::wait(void* until, const std::string& during) {
  if (failed_) {
    return Status(StatusCode::kAborted, set_name() + ": GPU work of " + during +
                                            " not run: an earlier GPU failure stopped the set");
  }
  auto event = static_cast<cudaEvent_t>(until);
  // Short work finishes within a few polls; longer work is polled with a doubling sleep
  // (up to 100 us), so the wait costs the background thread's core almost nothing and
  // never touches the trainer's streams.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto pause = std::chrono::microseconds(0);
  for (int polls = 0;; ++polls) {
    const cudaError_t q = cudaEventQuery(event);
    if (q == cudaSuccess) return {};
    if (q != cudaErrorNotReady) {
      return fail(cuda_detail::cuda_status(q, "cudaEventQuery", __FILE__, __LINE__));
    }
#ifdef CHORUS_WITH_NCCL
    for (NcclBackend* n : nccl_) {
      if (Status s = n->poll_async(during); !s.ok()) return fail(s);
    }
#endif
    if (std::chrono::steady_clock::now() > deadline) {
      // NCCL does not report a peer that never joined or left: a bounded wait turns it
      // into a failure. Aborting ends the communicators' kernels, so the stream drains.
      return fail(Status(
          StatusCode::kAborted,
          set_name() + ": GPU work of " + during + " did not finish within " +
              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) +
              " s (CHORUS_GPU_TIMEOUT_SECONDS): a rank of the set left the collective, or is "
              "stuck, or its inputs' producers are; the set's NCCL communicators were aborted"));
    }
    if (polls < 32) {
      std::this_thread::yield();
      continue;
    }
    pause =
        std::min(std::max(pause * 2, std::chrono::microseconds(2)), std::chrono::microseconds(100));
    std::this_thread::sleep_for(pause);
  }
}

Status GpuContext::fail(Status failure) {
  if (failed_) return failure;  // aborted and drained already
  failed_ = true;
  // Every communicator: the hierarchical allreduce's other level may wait on the failed one.
  abort_nccl();
  if (drain()) return failure;
  log().error(
      "{}: the GPU stream did not drain within the timeout after a failure; buffers of "
      "the failed batch may still be written",
      set_name());
  return Status(
      failure.code(),
      failure.message() + " (the GPU stream did not drain within " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) +
          " s after it: its inputs' producers may be stuck)");
}

bool GpuContext::drain() {
  auto stream = static_cast<cudaStream_t>(stream_);
  if (!stream) return true;
  // The communicators are aborted, so what is left are copies and waits on producers' events.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto pause = std::chrono::microseconds(10);
  while (true) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (q != cudaErrorNotReady) return true;  // done, or the context is lost: nothing will run
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

std::string GpuContext::set_name() const {
  std::string out = label_ + " (ranks [";
  for (std::size_t i = 0; i < ranks_.size(); ++i)
    out += (i ? ", " : "") + std::to_string(ranks_[i]);
  return out + "])";
}

}  // namespace chorus
