#include "chorus/torch/process_group.h"

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "chorus/chorus.h"
#include "chorus/torch/tensor_ops.h"
#include "torch/c10d_work.h"

namespace chorus::torch {
namespace {

using at::Tensor;
using RedOp = ::c10d::ReduceOp;

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

[[noreturn]] void refuse(const std::string& what) {
  throw Error(invalid_argument("chorus process group: " + what));
}

const Tensor& one(const std::vector<Tensor>& tensors, const char* op) {
  if (tensors.size() != 1) {
    refuse(std::string(op) + " takes one tensor per rank, as on a single device (got " +
           std::to_string(tensors.size()) + ")");
  }
  return tensors[0];
}

// The tensor Chorus moves for `t`: bool as uint8 and complex as its real pairs, dtypes whose
// bytes the collectives carry unchanged. A view: results written into it land in `t`.
Tensor carried(const Tensor& t) {
  if (t.scalar_type() == at::kBool) return t.view(at::kByte);
  if (t.is_complex()) return at::view_as_real(t);
  return t;
}

// `t` read back as `like`'s dtype (the inverse of carried()).
Tensor as_dtype_of(const Tensor& t, const Tensor& like) {
  if (like.scalar_type() == at::kBool) return t.view(at::kBool);
  if (like.is_complex()) return at::view_as_complex(t.contiguous());
  return t;
}

// c10d's reduction on `t` as Chorus's. bool: OR is MAX and AND is MIN over 0 and 1 (SUM is
// OR, PRODUCT is AND, as torch's backends give them on bool). PREMUL_SUM: the sum of each
// rank's input multiplied by the factor.
AllreduceOptions reduction(const RedOp& op, const Tensor& t, ProcessSet set) {
  AllreduceOptions o;
  o.process_set = set;
  const bool is_bool = t.scalar_type() == at::kBool;
  switch (static_cast<RedOp::RedOpType>(op)) {
    case RedOp::SUM: o.op = is_bool ? ReduceOp::kMax : ReduceOp::kSum; return o;
    case RedOp::AVG:
      if (is_bool) refuse("AVG of a bool tensor");
      o.op = ReduceOp::kAverage;
      return o;
    case RedOp::PRODUCT:
      if (t.is_complex()) refuse("PRODUCT of a complex tensor");
      o.op = is_bool ? ReduceOp::kMin : ReduceOp::kProduct;
      return o;
    case RedOp::MIN:
      if (t.is_complex()) refuse("MIN of a complex tensor");
      o.op = ReduceOp::kMin;
      return o;
    case RedOp::MAX:
      if (t.is_complex()) refuse("MAX of a complex tensor");
      o.op = ReduceOp::kMax;
      return o;
    case RedOp::BAND:
    case RedOp::BOR:
      if (!is_bool)
        refuse("BAND and BOR reduce bool tensors only here (got " +
               std::string(c10::toString(t.scalar_type())) + ")");
      o.op = static_cast<RedOp::RedOpType>(op) == RedOp::BAND ? ReduceOp::kMin : ReduceOp::kMax;
      return o;
    case RedOp::PREMUL_SUM: {
      auto* factor = dynamic_cast<::c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      if (!factor) refuse("PREMUL_SUM without its factor");
      o.op = ReduceOp::kSum;
      o.prescale = factor->tensor_factors.empty() ? factor->double_factor
                                                  : factor->tensor_factors[0].item<double>();
      return o;
    }
    default:
      refuse(std::string(static_cast<RedOp::RedOpType>(op) == RedOp::BXOR ? "BXOR" : "this op") +
             " is not a reduction Chorus has: SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM, and "
             "BAND and BOR on bool tensors");
  }
}

// What a call launches: the tensors its Work gives back, and its finishing step.
struct Launch {
  std::vector<Tensor> outputs;
  CompletionThreads::Finish finish;
};

class ProcessGroup final : public C10dBackend {
 public:
  // `members`: the job's rank of each group rank.
  ProcessGroup(int rank, int size, ProcessSet set, std::vector<int> members, std::string prefix)
      : C10dBackend(rank, size),
        set_(set),
        members_(std::move(members)),
        prefix_(std::move(prefix)) {}

  const std::string getBackendName() const override { return "chorus"; }

  c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<Tensor>& tensors,
                                             const ::c10d::BroadcastOptions& opts) override {
    return call(::c10d::OpType::BROADCAST, [&](const std::string& name) {
      Tensor t = one(tensors, "broadcast");
      root_in_group(opts.rootRank, "broadcast");
      Tensor c = carried(t);
      TensorHandle h = broadcast_async_(c, static_cast<int>(opts.rootRank), name, set_);
      return Launch{{t}, [h]() mutable { h.wait(); }};
    });
  }

  c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<Tensor>& tensors,
                                             const ::c10d::AllreduceOptions& opts) override {
    return call(::c10d::OpType::ALLREDUCE, [&](const std::string& name) {
      Tensor t = one(tensors, "allreduce");
      Tensor c = carried(t);
      TensorHandle h = allreduce_async_(c, name, reduction(opts.reduceOp, t, set_));
      return Launch{{t}, [h]() mutable { h.wait(); }};
    });
  }

  c10::intrusive_ptr<::c10d::Work> allreduce_coalesced(
      std::vector<Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) override {
    return call(::c10d::OpType::ALLREDUCE_COALESCED, [&](const std::string& name) {
      if (tensors.empty()) refuse("allreduce_coalesced of no tensors");
      std::vector<Tensor> moved;
      std::vector<std::string> names;
      for (const Tensor& t : tensors) {
        if (t.scalar_type() != tensors[0].scalar_type())
          refuse("allreduce_coalesced of tensors of several dtypes");
        moved.push_back(carried(t));
        names.push_back(name + "." + std::to_string(names.size()));
      }
      TensorHandle h =
          grouped_allreduce_async_(moved, names, reduction(opts.reduceOp, tensors[0], set_));
      return Launch{tensors, [h]() mutable { h.wait_all(); }};
    });
  }

  c10::intrusive_ptr<::c10d::Work> reduce(std::vector<Tensor>& tensors,
                                          const ::c10d::ReduceOptions& opts) override {
    return call(::c10d::OpType::REDUCE, [&](const std::string& name) {
      Tensor t = one(tensors, "reduce");
      root_in_group(opts.rootRank, "reduce");
      Tensor c = carried(t);
      TensorHandle h = reduce_async_(c, static_cast<int>(opts.rootRank), name,
                                     reduction(opts.reduceOp, t, set_));
      return Launch{{t}, [h]() mutable { h.wait(); }};
    });
  }

  c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<Tensor>>& outputs,
                                             std::vector<Tensor>& inputs,
                                             const ::c10d::AllgatherOptions& opts) override {
    return call(::c10d::OpType::ALLGATHER, [&](const std::string& name) {
      const Tensor& in = one(inputs, "allgather");
      if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != getSize())
        refuse("allgather needs one list of " + std::to_string(getSize()) + " output tensors");
      std::vector<Tensor> out = outputs[0];
      TensorHandle h = gather_rows(in, name);
      return Launch{out, [h, out, in]() mutable { copy_rows(as_dtype_of(h.wait(), in), out); }};
    });
  }

  c10::intrusive_ptr<::c10d::Work> _allgather_base(Tensor& output, Tensor& input,
                                                   const ::c10d::AllgatherOptions& opts) override {
    return call(::c10d::OpType::_ALLGATHER_BASE, [&](const std::string& name) {
      if (output.numel() != input.numel() * getSize()) {
        refuse("all_gather_into_tensor: the output has " + std::to_string(output.numel()) +
               " elements, not " + std::to_string(getSize()) + " x " +
               std::to_string(input.numel()));
      }
      TensorHandle h = gather_rows(input, name);
      return Launch{{output}, [h, output, input]() mutable {
                      output.copy_(as_dtype_of(h.wait(), input).reshape(output.sizes()));
                    }};
    });
  }

  c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<Tensor>>& outputs,
                                          std::vector<Tensor>& inputs,
                                          const ::c10d::GatherOptions& opts) override {
    return call(::c10d::OpType::GATHER, [&](const std::string& name) {
      const Tensor& in = one(inputs, "gather");
      root_in_group(opts.rootRank, "gather");
      const bool root = opts.rootRank == getRank();
      if (root && (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != getSize()))
        refuse("gather's root needs one list of " + std::to_string(getSize()) + " output tensors");
      if (!root && !(outputs.empty() || (outputs.size() == 1 && outputs[0].empty())))
        refuse("gather: only the root passes output tensors");
      std::vector<Tensor> out = root ? outputs[0] : std::vector<Tensor>{};
      // Every member receives every row (Chorus's allgather); the root keeps them.
      TensorHandle h = gather_rows(in, name);
      return Launch{out, [h, out, in]() mutable { copy_rows(as_dtype_of(h.wait(), in), out); }};
    });
  }

  c10::intrusive_ptr<::c10d::Work> scatter(std::vector<Tensor>& outputs,
                                           std::vector<std::vector<Tensor>>& inputs,
                                           const ::c10d::ScatterOptions& opts) override {
    return call(::c10d::OpType::SCATTER, [&](const std::string& name) {
      Tensor out = one(outputs, "scatter");
      root_in_group(opts.rootRank, "scatter");
      const bool root = opts.rootRank == getRank();
      Tensor send;
      std::vector<int64_t> splits(static_cast<std::size_t>(getSize()), 0);
      if (root) {
        if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != getSize())
          refuse("scatter's root needs one list of " + std::to_string(getSize()) + " tensors");
        std::vector<Tensor> rows;
        for (const Tensor& t : inputs[0]) rows.push_back(carried(t).reshape(carried(out).sizes()));
        send = at::stack(rows);
        std::fill(splits.begin(), splits.end(), 1);
      } else {
        if (!(inputs.empty() || (inputs.size() == 1 && inputs[0].empty())))
          refuse("scatter: only the root passes input tensors");
        std::vector<int64_t> shape = carried(out).sizes().vec();
        shape.insert(shape.begin(), 0);
        send = at::empty(shape, carried(out).options());
      }
      // Only the root sends: one row to each member.
      TensorHandle h = alltoall_async(send, splits, name, set_);
      return Launch{{out}, [h, out]() mutable { carried(out).copy_(h.wait()[0]); }};
    });
  }

  c10::intrusive_ptr<::c10d::Work> reduce_scatter(
      std::vector<Tensor>& outputs, std::vector<std::vector<Tensor>>& inputs,
      const ::c10d::ReduceScatterOptions& opts) override {
    return call(::c10d::OpType::REDUCE_SCATTER, [&](const std::string& name) {
      Tensor out = one(outputs, "reduce_scatter");
      if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != getSize())
        refuse("reduce_scatter needs one list of " + std::to_string(getSize()) + " input tensors");
      std::vector<Tensor> rows;
      for (const Tensor& t : inputs[0]) rows.push_back(carried(t).reshape({1, -1}));
      return scatter_reduced(at::cat(rows), out, opts, name);
    });
  }

  c10::intrusive_ptr<::c10d::Work> _reduce_scatter_base(
      Tensor& output, Tensor& input, const ::c10d::ReduceScatterOptions& opts) override {
    return call(::c10d::OpType::_REDUCE_SCATTER_BASE, [&](const std::string& name) {
      if (input.numel() != output.numel() * getSize()) {
        refuse("reduce_scatter_tensor: the input has " + std::to_string(input.numel()) +
               " elements, not " + std::to_string(getSize()) + " x " +
               std::to_string(output.numel()));
      }
      return scatter_reduced(carried(input).reshape({getSize(), -1}), output, opts, name);
    });
  }

  c10::intrusive_ptr<::c10d::Work> alltoall_base(Tensor& output, Tensor& input,
                                                 std::vector<int64_t>& output_splits,
                                                 std::vector<int64_t>& input_splits,
                                                 const ::c10d::AllToAllOptions& opts) override {
    return call(::c10d::OpType::ALLTOALL_BASE, [&](const std::string& name) {
      TensorHandle h = alltoall_async(carried(input), input_splits, name, set_);
      std::vector<int64_t> expected = output_splits;
      return Launch{{output}, [h, output, expected]() mutable {
                      Tensor got = h.wait();
                      if (!expected.empty() && h.received_splits() != expected) {
                        refuse(
                            "all_to_all_single: the output splits differ from what the "
                            "members sent this rank");
                      }
                      carried(output).copy_(got.reshape(carried(output).sizes()));
                    }};
    });
  }

  c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<Tensor>& outputs,
                                            std::vector<Tensor>& inputs,
                                            const ::c10d::AllToAllOptions& opts) override {
    return call(::c10d::OpType::ALLTOALL, [&](const std::string& name) {
      if (static_cast<int>(inputs.size()) != getSize() ||
          static_cast<int>(outputs.size()) != getSize()) {
        refuse("all_to_all needs " + std::to_string(getSize()) + " input and output tensors");
      }
      std::vector<Tensor> flat;
      std::vector<int64_t> splits;
      for (const Tensor& t : inputs) {
        flat.push_back(carried(t).reshape({-1}));
        splits.push_back(flat.back().numel());
      }
      TensorHandle h = alltoall_async(at::cat(flat), splits, name, set_);
      std::vector<Tensor> out = outputs;
      return Launch{out, [h, out]() mutable {
                      Tensor got = h.wait();
                      const std::vector<int64_t> received = h.received_splits();
                      int64_t at = 0;
                      for (std::size_t r = 0; r < out.size(); ++r) {
                        Tensor mine = carried(out[r]);
                        if (received[r] != mine.numel()) {
                          refuse("all_to_all: rank " + std::to_string(r) + " of the group sent " +
                                 std::to_string(received[r]) + " elements for an output of " +
                                 std::to_string(mine.numel()));
                        }
                        mine.copy_(got.narrow(0, at, received[r]).view_as(mine));
                        at += received[r];
                      }
                    }};
    });
  }

  // A barrier of the group's sequence, completed once the group's earlier calls on this rank
  // completed too (as c10d's backends do), so their outputs are in place when it returns.
  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions& opts) override {
    return call(::c10d::OpType::BARRIER, [&](const std::string& name) {
      Handle h = chorus::barrier(set_, name);
      if (h.refused()) throw Error(h.status());
      std::vector<c10::intrusive_ptr<ChorusWork>> earlier = in_flight();
      return Launch{{}, [h, earlier] {
                      if (Status s = h.wait(); !s.ok()) throw Error(s);
                      for (const auto& w : earlier) w->wait_quietly();
                    }};
    });
  }

  c10::intrusive_ptr<::c10d::Work> send(std::vector<Tensor>& tensors, int dst, int tag) override {
    return message(::c10d::OpType::SEND, tensors, dst, tag);
  }

  c10::intrusive_ptr<::c10d::Work> recv(std::vector<Tensor>& tensors, int src, int tag) override {
    return message(::c10d::OpType::RECV, tensors, src, tag);
  }

#if TORCH_VERSION_MAJOR < 2
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return sequence_.load(); }
#endif

 private:
  // One call of the group: its name first, then `body(name)`, which checks this rank's
  // arguments and submits the collective. Every member takes the group's names in the order
  // of its calls, the same on every member as c10d requires (calls made from several threads
  // at once, such as a communication hook's from its callbacks, must still come in one order
  // on every member). When this rank's checks or submit fail, a stand-in takes the name (an
  // allreduce of no element), so the members that made the call fail it as a disagreement
  // instead of waiting for this rank, and the names stay in step; this rank throws its error.
  template <class Body>
  c10::intrusive_ptr<::c10d::Work> call(::c10d::OpType type, Body&& body) {
    const std::string name = prefix_ + std::to_string(sequence_.fetch_add(1));
    Launch l;
    try {
      l = body(name);
    } catch (...) {
      stand_in(name);
      throw;
    }
    return launch(type, std::move(l));
  }

  void stand_in(const std::string& name) {
    AllreduceOptions o;
    o.op = ReduceOp::kSum;
    o.process_set = set_;
    Tensor nothing = at::empty({0}, at::kByte);
    try {
      TensorHandle h = allreduce_async_(nothing, name, o);
      launch(::c10d::OpType::UNKNOWN, Launch{{}, [h]() mutable { h.wait(); }});
    } catch (const std::exception&) {
      // Chorus is not running: there is no peer to keep in step.
    }
  }

  // A message (send, recv) between this rank and group rank `peer` is a broadcast from its
  // sender over the pair: the group itself where it has two members, else a set of the two
  // (pair()). It is named by sender, receiver, tag and its count among their messages of that
  // tag, so the k-th send of a tag matches the k-th recv of it on the other side, whatever the
  // two do meanwhile; Chorus checks that both tensors agree and names the ranks when not. A
  // message takes no place in the group's sequence: the other members do not make it. Where
  // this rank refuses its own tensor, an empty one takes the name, so the peer fails too.
  c10::intrusive_ptr<::c10d::Work> message(::c10d::OpType type, std::vector<Tensor>& tensors,
                                           int peer, int tag) {
    const bool sending = type == ::c10d::OpType::SEND;
    const std::string op = sending ? "send" : "recv";
    if (peer < 0 || peer >= getSize() || peer == getRank()) {
      refuse(op + ": rank " + std::to_string(peer) + " is not another rank of the group (0.." +
             std::to_string(getSize() - 1) + ", this rank " + std::to_string(getRank()) + ")");
    }
    const int from = sending ? getRank() : peer;
    const int to = sending ? peer : getRank();
    std::string name;
    std::optional<Handle> made;
    {
      std::lock_guard<std::mutex> lock(mu_);
      name = prefix_ + "p2p." + std::to_string(from) + ">" + std::to_string(to) + ".tag" +
             std::to_string(tag) + "." + std::to_string(messages_[{from, to, tag}]++);
      made = pair(peer);
    }
    // The sender's place in the pair: a set's ranks are in the job's order.
    const int root = getSize() == 2 ? from : (members_[from] < members_[to] ? 0 : 1);
    // Runs on a completion thread, which may outlive the group: it holds copies.
    auto carry = [group = set_, made, root, name](Tensor c) {
      return [group, made, root, name, c]() mutable {
        ProcessSet over = group;
        if (made) {
          if (Status s = made->wait(); !s.ok()) throw Error(s);
          over = made->process_set();
        }
        TensorHandle h = broadcast_async_(c, root, name, over);
        h.wait();
      };
    };
    Tensor t;
    try {
      t = one(tensors, op.c_str());
    } catch (...) {
      launch(::c10d::OpType::UNKNOWN, Launch{{}, carry(at::empty({0}, at::kByte))});
      throw;
    }
    return launch(type, Launch{{t}, carry(carried(t))});
  }

  // The making of the set of this rank and group rank `peer` that carries their messages
  // where the group has more than two members; none where it has two. Started on the pair's
  // first message on either side without waiting for the other (each rank of a ring may first
  // send to its next while that one first sends to its own); the message's completion thread
  // waits for it. Called with mu_ held.
  std::optional<Handle> pair(int peer) {
    if (getSize() == 2) return std::nullopt;
    auto it = pairs_.find(peer);
    if (it == pairs_.end()) {
      Handle h =
          add_process_set_of_members_async({members_[getRank()], members_[peer]}, prefix_ + "p2p");
      it = pairs_.emplace(peer, h).first;
    }
    return it->second;
  }

  void root_in_group(int64_t root, const char* op) const {
    if (root < 0 || root >= getSize()) {
      refuse(std::string(op) + ": root " + std::to_string(root) +
             " is not a rank of the group (0.." + std::to_string(getSize() - 1) + ")");
    }
  }

  // Every member's `in` as row r of one tensor (Chorus's allgather along a new first
  // dimension, which also checks that the members' shapes agree).
  TensorHandle gather_rows(const Tensor& in, const std::string& name) {
    return allgather_async(carried(in).unsqueeze(0), name, set_);
  }

  static void copy_rows(const Tensor& all, std::vector<Tensor>& out) {
    for (std::size_t r = 0; r < out.size(); ++r) out[r].copy_(all[r].view_as(out[r]));
  }

  // Reduces `rows` (one row per member) and writes this member's row into `out`.
  Launch scatter_reduced(const Tensor& rows, Tensor out, const ::c10d::ReduceScatterOptions& opts,
                         const std::string& name) {
    const AllreduceOptions r = reduction(opts.reduceOp, out, set_);
    ReducescatterOptions o;
    o.op = r.op;
    o.prescale = r.prescale;
    o.process_set = set_;
    TensorHandle h = reducescatter_async(rows, name, o);
    return Launch{{out}, [h, out]() mutable {
                    Tensor c = carried(out);
                    c.copy_(h.wait().reshape(c.sizes()));
                  }};
  }

  c10::intrusive_ptr<::c10d::Work> launch(::c10d::OpType type, Launch l) {
    auto work = c10::make_intrusive<ChorusWork>(getRank(), type, std::move(l.outputs));
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::erase_if(in_flight_, [](const auto& w) { return w->isCompleted(); });
      in_flight_.push_back(work);
    }
    completion_.add(work, std::move(l.finish));
    return work;
  }

  std::vector<c10::intrusive_ptr<ChorusWork>> in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_flight_;
  }

  const ProcessSet set_;
  const std::vector<int> members_;
  const std::string prefix_;
  std::atomic<uint64_t> sequence_{0};
  std::mutex mu_;
  std::vector<c10::intrusive_ptr<ChorusWork>> in_flight_;  // guarded by mu_; for barrier
  // Guarded by mu_: the sets of this rank and each peer (pair()), and the messages so far
  // per sender, receiver and tag.
  std::map<int, Handle> pairs_;
  std::map<std::tuple<int, int, int>, uint64_t> messages_;
  CompletionThreads completion_;
};

}  // namespace

c10::intrusive_ptr<C10dBackend> make_process_group(const ProcessGroupOptions& options) {
  if (!is_initialized()) {
    throw Error(Status(StatusCode::kNotInitialized,
                       "chorus process group: Chorus is not initialized (chorus::init() first)"));
  }
  const std::vector<int>& members = options.global_ranks;
  const bool whole_job = members.empty() || static_cast<int>(members.size()) == size();
  for (std::size_t i = 1; i < members.size(); ++i) {
    if (members[i] <= members[i - 1]) refuse("a group whose ranks are not in increasing order");
  }
  ProcessSet set = ProcessSet::global();
  if (!whole_job) {
    // torch.distributed makes a group on its members alone.
    StatusOr<ProcessSet> made = add_process_set_of_members(members);
    if (!made.ok()) throw Error(made.status());
    set = *made;
  }
  const int rank_in_set = process_set_rank(set);
  const int set_size = process_set_size(set);
  if (options.rank != rank_in_set || options.size != set_size) {
    refuse("torch.distributed gave rank " + std::to_string(options.rank) + " of " +
           std::to_string(options.size) + ", where Chorus's " +
           (whole_job ? std::string("job") : "set of ranks " + ranks_text(members)) + " has rank " +
           std::to_string(rank_in_set) + " of " + std::to_string(set_size) +
           (whole_job && size() == 1
                ? ": Chorus started without an MPI launcher, as a job of one rank (launch with "
                  "mpirun or srun; a world without MPI is not built yet)"
                : ": the launcher's ranks and init_process_group's must be the same"));
  }
  // torch names each group alike on its members ("" for the default group): with the set,
  // that tells apart the groups over one set.
  std::vector<int> job_ranks = members;
  if (whole_job) {
    job_ranks.resize(size());
    for (int r = 0; r < size(); ++r) job_ranks[r] = r;
  }
  return c10::make_intrusive<ProcessGroup>(
      options.rank, options.size, set, std::move(job_ranks),
      "c10d." + std::to_string(set.id) + "." + options.group_name + ".");
}

}  // namespace chorus::torch
