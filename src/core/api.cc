// The public API: validates arguments on the caller's thread, builds the requests and
// entries (each op's filler, core/ops/), and hands them to the runtime. Errors found here
// fail the returned handle at once, with a message naming the collective, the tensor and
// the value at fault.

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>

#include "chorus/chorus.h"
#include "collectives/gpu_build.h"
#include "collectives/gpu_event.h"
#include "core/commit_writer.h"
#include "core/ops/allgather.h"
#include "core/ops/allreduce.h"
#include "core/ops/alltoall.h"
#include "core/ops/broadcast.h"
#include "core/ops/checks.h"
#include "core/ops/reduce.h"
#include "core/ops/reducescatter.h"
#include "core/runtime.h"
#include "core/thread_runtime.h"

namespace chorus {
namespace {

// The single process-wide handle: set by init(), cleared by shutdown().
std::mutex g_mu;
std::shared_ptr<Runtime> g_runtime;
// What the last init() was given, for a restart (an elastic reset in place).
Options g_options;
// The calling thread's own, if it named one (core/thread_runtime.h).
thread_local std::shared_ptr<Runtime> t_runtime;

Handle failed(Status status) { return Handle(detail::HandleState::failed(std::move(status))); }

// CUDA inputs: the event the background thread waits on before reading (types.h), taken
// now, on the producer's thread. Outputs whose size is agreed later must come from the
// caller's allocator: Chorus's own fallback allocates host memory. A rank's collectives
// run on one GPU (RankDevice): checked here, so that a tensor on another device fails its
// own handle instead of reaching the background thread, where this rank could not join
// the collective the others run.
Status attach_ready_event(Runtime& rt, Entry& e) {
  // Only a build with CUDA takes CUDA tensors (check_tensor).
  if (e.input.device.kind != Device::Kind::kCUDA) return {};
  const OpType op = e.request.op;
  const int pinned = rt.gpu_device().pin(e.input.device.index);
  if (pinned != e.input.device.index) {
    return invalid_argument(what(op, e.request.name) + "a tensor on " +
                            device_name(e.input.device) + " cannot join this rank's collectives," +
                            " which run on cuda:" + std::to_string(pinned) +
                            " (the device of its first CUDA tensor; one GPU per rank)");
  }
  if (op_descriptor(op).output_sized_by_agreement && !e.allocate) {
    return invalid_argument(what(op, e.request.name) + "a tensor on " +
                            device_name(e.input.device) +
                            " needs options.allocate to provide the output in device memory");
  }
  StatusOr<std::shared_ptr<void>> ev =
      gpu::capture_ready_event(e.input.device.index, e.input.ready_event, e.input.ready_stream);
  if (!ev.ok()) return ev.status();
  e.ready_event = std::move(ev).value();
  return {};
}

// Everything every collective shares: the runtime, the set, the name, the request.
struct Prepared {
  std::shared_ptr<Runtime> rt;
  ProcessSets::Info set;
  Entry entry;
};

StatusOr<Prepared> prepare(OpType op, const std::string& name, ProcessSet ps) {
  Prepared p;
  p.rt = current_runtime();
  if (!p.rt) {
    return Status(StatusCode::kNotInitialized,
                  std::string("chorus::") + op_type_name(op) +
                      " called while Chorus is not initialized (call chorus::init() first)");
  }
  if (!p.rt->running()) return p.rt->stopped(std::string("chorus::") + op_type_name(op));
  std::optional<ProcessSets::Info> info = p.rt->process_sets().info(ps.id);
  if (!info) {
    return invalid_argument(std::string(op_type_name(op)) + ": process set " +
                            std::to_string(ps.id) + " does not exist");
  }
  if (info->rank < 0) {
    return invalid_argument(std::string(op_type_name(op)) + ": rank " +
                            std::to_string(p.rt->rank_map().rank) +
                            " is not a member of process set " + std::to_string(ps.id));
  }
  p.set = *info;
  p.entry.set_id = ps.id;
  p.entry.request.op = op;
  p.entry.request.name = name.empty() ? p.rt->process_sets().generate_name(op, ps.id) : name;
  p.entry.handle = std::make_shared<detail::HandleState>(1);
  return p;
}

Handle submit_one(Prepared& p) {
  if (Status s = attach_ready_event(*p.rt, p.entry); !s.ok()) return failed(s);
  return p.rt->submit({&p.entry, 1});
}

Status check_allocators(OpType op, const std::vector<OutputAllocator>& allocate,
                        std::size_t tensors) {
  if (allocate.empty() || allocate.size() == tensors) return {};
  return invalid_argument(std::string("grouped_") + op_type_name(op) + ": " +
                          std::to_string(allocate.size()) + " allocators for " +
                          std::to_string(tensors) + " tensors; give one per tensor, or none");
}

OutputAllocator allocator(const std::vector<OutputAllocator>& allocate, std::size_t i) {
  return allocate.empty() ? OutputAllocator() : allocate[i];
}

// Prepares one entry per tensor with `fill(i, entry)` and submits them as one group: one
// handle, negotiated as a unit (a group of one is a plain collective).
template <class Fill>
Handle submit_group(OpType op, const std::vector<std::string>& names, std::size_t count,
                    ProcessSet process_set, const Fill& fill) {
  const std::string fn = std::string("grouped_") + op_type_name(op);
  if (count == 0) return failed(invalid_argument(fn + ": no tensors given"));
  if (!names.empty() && names.size() != count) {
    return failed(invalid_argument(fn + ": " + std::to_string(names.size()) + " names for " +
                                   std::to_string(count) +
                                   " tensors; give one per tensor, or none"));
  }
  std::vector<Entry> entries;
  std::shared_ptr<Runtime> rt;
  std::string group;
  for (std::size_t i = 0; i < count; ++i) {
    StatusOr<Prepared> p = prepare(op, names.empty() ? "" : names[i], process_set);
    if (!p.ok()) return failed(p.status());
    if (Status s = fill(i, p->entry); !s.ok()) return failed(s);
    if (Status s = attach_ready_event(*p->rt, p->entry); !s.ok()) return failed(s);
    if (count > 1) {
      // The group's key is derived from its first name, which every rank shares.
      Request& q = p->entry.request;
      if (i == 0) group = q.name + "/group";
      q.group = group;
      q.group_size = static_cast<int32_t>(count);
      q.group_index = static_cast<int32_t>(i);
    }
    rt = p->rt;
    entries.push_back(std::move(p->entry));
  }
  auto handle = std::make_shared<detail::HandleState>(static_cast<int>(entries.size()));
  for (Entry& e : entries) e.handle = handle;
  return rt->submit(entries);
}

}  // namespace

std::shared_ptr<Runtime> current_runtime() {
  if (t_runtime) return t_runtime;
  std::lock_guard<std::mutex> lock(g_mu);
  return g_runtime;
}

ThreadRuntime::ThreadRuntime(std::shared_ptr<Runtime> runtime)
    : previous_(std::exchange(t_runtime, std::move(runtime))) {}
ThreadRuntime::~ThreadRuntime() { t_runtime = std::move(previous_); }

Status init(const Options& options) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_runtime && g_runtime->running()) return {};
  if (g_runtime) {
    g_runtime->shutdown();
    g_runtime.reset();
  }
  g_options = options;
  StatusOr<std::shared_ptr<Runtime>> rt = Runtime::start(options);
  if (!rt.ok()) return rt.status();
  g_runtime = std::move(rt).value();
  return {};
}

// The start waits for the job's next round, which may take until the others' next commit:
// other threads' calls find Chorus not initialized meanwhile, rather than waiting on g_mu.
Status restart_runtime() {
  std::shared_ptr<Runtime> old;
  Options options;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    old = std::move(g_runtime);
    options = g_options;
  }
  if (old) old->shutdown();
  old.reset();
  StatusOr<std::shared_ptr<Runtime>> rt = Runtime::start(options);
  if (!rt.ok()) return rt.status();
  std::lock_guard<std::mutex> lock(g_mu);
  g_runtime = std::move(rt).value();
  return {};
}

Status shutdown() {
  // The elastic commits handed over reach the store first (a failure is logged where it
  // happened, and returned by the next commit).
  (void)process_commit_writer().flush();
  std::shared_ptr<Runtime> rt;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    rt = std::move(g_runtime);
  }
  return rt ? rt->shutdown() : Status();
}

bool is_initialized() {
  std::shared_ptr<Runtime> rt = current_runtime();
  return rt && rt->running();
}

int rank() {
  auto rt = current_runtime();
  return rt ? rt->rank_map().rank : -1;
}
int size() {
  auto rt = current_runtime();
  return rt ? rt->rank_map().size : -1;
}
std::string controller() {
  auto rt = current_runtime();
  return rt ? kControllerWords.name(rt->config().controller) : "";
}
int local_rank() {
  auto rt = current_runtime();
  return rt ? rt->rank_map().local_rank : -1;
}
int local_size() {
  auto rt = current_runtime();
  return rt ? rt->rank_map().local_size : -1;
}
int cross_rank() {
  auto rt = current_runtime();
  return rt ? rt->rank_map().cross_rank : -1;
}
int cross_size() {
  auto rt = current_runtime();
  return rt ? rt->rank_map().cross_size : -1;
}

Handle grouped_allreduce(const std::vector<std::string>& names,
                         const std::vector<TensorRef>& inputs,
                         const std::vector<TensorRef>& outputs, const AllreduceOptions& options) {
  if (outputs.size() != inputs.size()) {
    return failed(invalid_argument("grouped_allreduce: " + std::to_string(inputs.size()) +
                                   " inputs but " + std::to_string(outputs.size()) +
                                   " outputs; give one output per input"));
  }
  return submit_group(
      OpType::kAllreduce, names, inputs.size(), options.process_set,
      [&](std::size_t i, Entry& e) { return fill_reduction(e, inputs[i], outputs[i], options); });
}

Handle grouped_allgather(const std::vector<std::string>& names,
                         const std::vector<TensorRef>& inputs,
                         const GroupedAllgatherOptions& options) {
  if (Status s = check_allocators(OpType::kAllgather, options.allocate, inputs.size()); !s.ok()) {
    return failed(s);
  }
  return submit_group(OpType::kAllgather, names, inputs.size(), options.process_set,
                      [&](std::size_t i, Entry& e) {
                        return fill_allgather(e, inputs[i], allocator(options.allocate, i));
                      });
}

Handle grouped_reducescatter(const std::vector<std::string>& names,
                             const std::vector<TensorRef>& inputs,
                             const GroupedReducescatterOptions& options) {
  if (Status s = check_allocators(OpType::kReducescatter, options.allocate, inputs.size());
      !s.ok()) {
    return failed(s);
  }
  return submit_group(OpType::kReducescatter, names, inputs.size(), options.process_set,
                      [&](std::size_t i, Entry& e) {
                        return fill_reducescatter(e, inputs[i], options.op, options.prescale,
                                                  options.postscale,
                                                  allocator(options.allocate, i));
                      });
}

Handle allreduce(const std::string& name, const TensorRef& input, const TensorRef& output,
                 const AllreduceOptions& options) {
  StatusOr<Prepared> p = prepare(OpType::kAllreduce, name, options.process_set);
  if (!p.ok()) return failed(p.status());
  if (Status s = fill_reduction(p->entry, input, output, options); !s.ok()) return failed(s);
  return submit_one(*p);
}

Handle allgather(const std::string& name, const TensorRef& input, const AllgatherOptions& options) {
  StatusOr<Prepared> p = prepare(OpType::kAllgather, name, options.process_set);
  if (!p.ok()) return failed(p.status());
  if (Status s = fill_allgather(p->entry, input, options.allocate); !s.ok()) return failed(s);
  return submit_one(*p);
}

Handle broadcast(const std::string& name, const TensorRef& tensor, int root,
                 const BroadcastOptions& options) {
  StatusOr<Prepared> p = prepare(OpType::kBroadcast, name, options.process_set);
  if (!p.ok()) return failed(p.status());
  if (Status s = fill_broadcast(p->entry, tensor, root); !s.ok()) return failed(s);
  return submit_one(*p);
}

Handle alltoall(const std::string& name, const TensorRef& input, const std::vector<int64_t>& splits,
                const AlltoallOptions& options) {
  StatusOr<Prepared> p = prepare(OpType::kAlltoall, name, options.process_set);
  if (!p.ok()) return failed(p.status());
  if (Status s = fill_alltoall(p->entry, input, splits, p->set.size, options.allocate); !s.ok()) {
    return failed(s);
  }
  return submit_one(*p);
}

Handle reducescatter(const std::string& name, const TensorRef& input,
                     const ReducescatterOptions& options) {
  StatusOr<Prepared> p = prepare(OpType::kReducescatter, name, options.process_set);
  if (!p.ok()) return failed(p.status());
  if (Status s = fill_reducescatter(p->entry, input, options.op, options.prescale,
                                    options.postscale, options.allocate);
      !s.ok()) {
    return failed(s);
  }
  return submit_one(*p);
}

Handle reduce(const std::string& name, const TensorRef& input, const TensorRef& output, int root,
              const ReduceOptions& options) {
  StatusOr<Prepared> p = prepare(OpType::kReduce, name, options.process_set);
  if (!p.ok()) return failed(p.status());
  if (Status s = fill_reduce(p->entry, input, output, root, options); !s.ok()) return failed(s);
  return submit_one(*p);
}

Handle barrier(ProcessSet process_set, const std::string& name) {
  StatusOr<Prepared> p = prepare(OpType::kBarrier, name, process_set);
  if (!p.ok()) return failed(p.status());
  return submit_one(*p);
}

Handle join() {
  // One join in flight per rank: the fixed name makes a second one a duplicate.
  StatusOr<Prepared> p = prepare(OpType::kJoin, "chorus.join", ProcessSet::global());
  if (!p.ok()) return failed(p.status());
  return submit_one(*p);
}

namespace {

// add_process_set and add_process_set_of_members: the checks and the submit they share. The
// handle carries the new set's id.
Handle add_set(OpType op, const std::vector<int>& ranks, const std::string& purpose = {}) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  std::shared_ptr<Runtime> rt = current_runtime();
  const int job = rt ? rt->rank_map().size : 0;
  if (rt && (sorted.empty() || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
             sorted.front() < 0 || sorted.back() >= job)) {
    return failed(invalid_argument(std::string(op_type_name(op)) +
                                   ": ranks must be distinct global ranks in [0, " +
                                   std::to_string(job) + "), at least one"));
  }
  const bool by_members = op == OpType::kAddProcessSetOfMembers;
  if (rt && by_members && !std::binary_search(sorted.begin(), sorted.end(), rt->rank_map().rank)) {
    return failed(invalid_argument(std::string(op_type_name(op)) + ": rank " +
                                   std::to_string(rt->rank_map().rank) +
                                   " is not one of the ranks " + ranks_string(sorted) +
                                   "; only the new set's members call it"));
  }
  StatusOr<Prepared> p =
      prepare(op, by_members && rt ? rt->process_sets().members_set_name(sorted, purpose) : "",
              ProcessSet::global());
  if (!p.ok()) return failed(p.status());
  p->entry.request.ranks.assign(sorted.begin(), sorted.end());
  return submit_one(*p);
}

StatusOr<ProcessSet> made_set(const Handle& h) {
  if (Status s = h.wait(); !s.ok()) return s;
  return h.process_set();
}

}  // namespace

StatusOr<ProcessSet> add_process_set(const std::vector<int>& ranks) {
  return made_set(add_set(OpType::kAddProcessSet, ranks));
}

StatusOr<ProcessSet> add_process_set_of_members(const std::vector<int>& ranks) {
  return made_set(add_set(OpType::kAddProcessSetOfMembers, ranks));
}

Handle add_process_set_of_members_async(const std::vector<int>& ranks, const std::string& purpose) {
  return add_set(OpType::kAddProcessSetOfMembers, ranks, purpose);
}

Status remove_process_set(ProcessSet process_set) {
  if (process_set.id == 0)
    return invalid_argument("remove_process_set: the global set cannot be removed");
  StatusOr<Prepared> p = prepare(OpType::kRemoveProcessSet, "", ProcessSet::global());
  if (!p.ok()) return p.status();
  if (!p->rt->process_sets().info(process_set.id)) {
    return invalid_argument("remove_process_set: process set " + std::to_string(process_set.id) +
                            " does not exist");
  }
  p->entry.request.target_set = process_set.id;
  return submit_one(*p).wait();
}

Status start_timeline(const std::string& path, bool mark_cycles) {
  std::shared_ptr<Runtime> rt = current_runtime();
  if (!rt) {
    return Status(StatusCode::kNotInitialized,
                  "start_timeline called while Chorus is not initialized (call chorus::init() "
                  "first)");
  }
  if (path.empty()) return invalid_argument("start_timeline: the file path is empty");
  return rt->request_timeline(path, mark_cycles);
}

Status stop_timeline() {
  std::shared_ptr<Runtime> rt = current_runtime();
  if (!rt) {
    return Status(StatusCode::kNotInitialized,
                  "stop_timeline called while Chorus is not initialized (call chorus::init() "
                  "first)");
  }
  return rt->request_timeline({}, false);
}

void mark_step() {
  if (std::shared_ptr<Runtime> rt = current_runtime()) rt->mark_step();
}

int process_set_rank(ProcessSet process_set) {
  auto rt = current_runtime();
  if (!rt) return -1;
  auto info = rt->process_sets().info(process_set.id);
  return info ? info->rank : -1;
}

int process_set_size(ProcessSet process_set) {
  auto rt = current_runtime();
  if (!rt) return -1;
  auto info = rt->process_sets().info(process_set.id);
  return info ? info->size : -1;
}

BuildInfo build_info() {
  BuildInfo b;
  b.cuda = built_with_cuda();
  b.nccl_version_code = nccl_compiled_version_code();
  b.gloo = gloo_world_built();
  return b;
}

}  // namespace chorus
