// chorus._ext: the pybind11 module under the Python package `chorus`. It is a thin layer over
// the public C++ API and Chorus::torch: tensors go to the LibTorch adapter as they are, the
// gradient hooks of DistributedOptimizer live in the C++ GradientReducer, and every call that
// can block (wait, barrier, join, the collective constructor of the reducer) releases the GIL
// so that other Python threads keep running while this one waits for the network.
//
// Names and defaults that users see (Horovod's) are decided in the Python package; this
// module takes every argument explicitly.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "chorus/elastic.h"
#include "chorus/torch.h"
#ifdef CHORUS_TORCH_C10D
#include "chorus/torch/process_group.h"
#endif

namespace py = pybind11;
namespace ct = chorus::torch;

namespace {

using chorus::ProcessSet;
using chorus::ReduceOp;

ReduceOp to_op(int op) {
  if (op < 0 || op >= chorus::kNumReduceOps) {
    throw chorus::Error(chorus::invalid_argument("unknown reduction op " + std::to_string(op)));
  }
  return static_cast<ReduceOp>(op);
}

ProcessSet to_set(int id) { return ProcessSet{id}; }

// AllreduceOptions or ReducescatterOptions: the fields they share.
template <class Options>
Options reduction(int op, double prescale, double postscale, int set) {
  Options o;
  o.op = to_op(op);
  o.prescale = prescale;
  o.postscale = postscale;
  o.process_set = to_set(set);
  return o;
}

chorus::AllreduceOptions allreduce_options(int op, double prescale, double postscale, int set) {
  return reduction<chorus::AllreduceOptions>(op, prescale, postscale, set);
}

chorus::ReducescatterOptions reducescatter_options(int op, double prescale, double postscale,
                                                   int set) {
  return reduction<chorus::ReducescatterOptions>(op, prescale, postscale, set);
}

void throw_if_error(const chorus::Status& status) {
  if (!status.ok()) throw chorus::Error(status);
}

ct::Compression to_compression(int c) {
  switch (c) {
    case 0: return ct::Compression::kNone;
    case 1: return ct::Compression::kFloat16;
    case 2: return ct::Compression::kBFloat16;
    default:
      throw chorus::Error(chorus::invalid_argument("unknown compression " + std::to_string(c)));
  }
}

// The holder of the Python objects whose destruction can wait for a collective: dropping the
// last copy of a TensorHandle waits for it (the core writes into its tensors until then), and
// a GradientReducer finishes its reductions. Python drops an object with the GIL held; the
// wait runs without it, as wait() does, so that the trainer's other Python threads go on
// meanwhile and nothing that completes the collective can be held up behind the GIL.
struct DeleteWithoutGil {
  template <typename T>
  void operator()(T* object) const {
    py::gil_scoped_release release;
    delete object;
  }
};

}  // namespace

PYBIND11_MODULE(_ext, m) {
  m.doc() = "Chorus runtime bindings (use the chorus.torch package, not this module)";
  m.attr("torch_version") = TORCH_VERSION;
  // What libchorus was built with, for Horovod's nccl_built() and cuda_built().
  const chorus::BuildInfo built = chorus::build_info();
  py::dict build_info;
  build_info["cuda"] = built.cuda;
  build_info["nccl_version_code"] = built.nccl_version_code;
  build_info["gloo"] = built.gloo;
  m.attr("build_info") = build_info;

  // Every failure of the core reaches Python as CollectiveError (a RuntimeError, like
  // Horovod's HorovodInternalError); its message starts with the status code ("MISMATCH:
  // ..."). Bad arguments (INVALID_ARGUMENT: refused at the call on the rank that made them)
  // and arguments the ranks disagree on (MISMATCH: on every rank) raise ArgumentError,
  // which is also a ValueError, what Horovod scripts catch for argument errors.
  static py::exception<chorus::Error> collective_error(m, "CollectiveError", PyExc_RuntimeError);
  static py::handle argument_error = [&] {
    py::object bases = py::make_tuple(collective_error, py::handle(PyExc_ValueError));
    py::object type = py::reinterpret_steal<py::object>(
        PyErr_NewException("chorus._ext.ArgumentError", bases.ptr(), nullptr));
    m.attr("ArgumentError") = type;
    return type.release();
  }();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const chorus::Error& e) {
      const chorus::StatusCode code = e.status().code();
      const bool argument =
          code == chorus::StatusCode::kInvalidArgument || code == chorus::StatusCode::kMismatch;
      PyErr_SetString(argument ? argument_error.ptr() : collective_error.ptr(), e.what());
    }
  });

  // Settings come from the environment (CHORUS_* and HOROVOD_* variables), as in Horovod.
  m.def("init", [] {
    py::gil_scoped_release release;
    throw_if_error(chorus::init());
  });
  m.def("shutdown", [] {
    py::gil_scoped_release release;
    throw_if_error(chorus::shutdown());
  });
  m.def("is_initialized", &chorus::is_initialized);
  m.def("controller", &chorus::controller);
  m.def("rank", &chorus::rank);
  m.def("size", &chorus::size);
  m.def("local_rank", &chorus::local_rank);
  m.def("local_size", &chorus::local_size);
  m.def("cross_rank", &chorus::cross_rank);
  m.def("cross_size", &chorus::cross_size);

  m.def("add_process_set", [](const std::vector<int>& ranks) {
    chorus::StatusOr<ProcessSet> set = [&] {
      py::gil_scoped_release release;
      return chorus::add_process_set(ranks);
    }();
    throw_if_error(set.status());
    return set->id;
  });
  m.def("remove_process_set", [](int id) {
    py::gil_scoped_release release;
    throw_if_error(chorus::remove_process_set(to_set(id)));
  });
  // Not collective; they wait for the background thread (a cycle at most), GIL released.
  m.def(
      "start_timeline",
      [](const std::string& path, bool mark_cycles) {
        py::gil_scoped_release release;
        throw_if_error(chorus::start_timeline(path, mark_cycles));
      },
      py::arg("path"), py::arg("mark_cycles") = false);
  m.def("stop_timeline", [] {
    py::gil_scoped_release release;
    throw_if_error(chorus::stop_timeline());
  });
  m.def(
      "mark_step", [] { chorus::mark_step(); },
      "Marks the end of a training step on this rank's timeline (chorus::mark_step).");
  m.def("process_set_rank", [](int id) { return chorus::process_set_rank(to_set(id)); });
  m.def("process_set_size", [](int id) { return chorus::process_set_size(to_set(id)); });

  py::class_<ct::TensorHandle, std::unique_ptr<ct::TensorHandle, DeleteWithoutGil>>(m,
                                                                                    "TensorHandle")
      .def("poll", &ct::TensorHandle::poll)
      .def("wait", &ct::TensorHandle::wait, py::call_guard<py::gil_scoped_release>())
      .def("wait_all", &ct::TensorHandle::wait_all, py::call_guard<py::gil_scoped_release>())
      .def("received_splits", &ct::TensorHandle::received_splits);

  // Collectives. Each returns a TensorHandle at once; `inplace` writes into the argument.
  m.def("allreduce_async", [](torch::Tensor tensor, const std::string& name, int op,
                              double prescale, double postscale, int set, bool inplace) {
    auto o = allreduce_options(op, prescale, postscale, set);
    return inplace ? ct::allreduce_async_(tensor, name, o) : ct::allreduce_async(tensor, name, o);
  });
  m.def("grouped_allreduce_async",
        [](std::vector<torch::Tensor> tensors, const std::vector<std::string>& names, int op,
           double prescale, double postscale, int set, bool inplace) {
          auto o = allreduce_options(op, prescale, postscale, set);
          return inplace ? ct::grouped_allreduce_async_(tensors, names, o)
                         : ct::grouped_allreduce_async(tensors, names, o);
        });
  m.def("sparse_allreduce_async",
        [](const torch::Tensor& tensor, const std::string& name, int op, int set) {
          return ct::sparse_allreduce_async(tensor, name, allreduce_options(op, 1.0, 1.0, set));
        });
  m.def("allgather_async", [](const torch::Tensor& tensor, const std::string& name, int set) {
    return ct::allgather_async(tensor, name, to_set(set));
  });
  m.def("broadcast_async",
        [](torch::Tensor tensor, int root, const std::string& name, int set, bool inplace) {
          return inplace ? ct::broadcast_async_(tensor, root, name, to_set(set))
                         : ct::broadcast_async(tensor, root, name, to_set(set));
        });
  m.def("reduce_async", [](torch::Tensor tensor, int root, const std::string& name, int op,
                           double prescale, double postscale, int set, bool inplace) {
    auto o = allreduce_options(op, prescale, postscale, set);
    return inplace ? ct::reduce_async_(tensor, root, name, o)
                   : ct::reduce_async(tensor, root, name, o);
  });
  m.def("alltoall_async",
        [](const torch::Tensor& tensor, const std::vector<int64_t>& splits, const std::string& name,
           int set) { return ct::alltoall_async(tensor, splits, name, to_set(set)); });
  m.def("reducescatter_async", [](const torch::Tensor& tensor, const std::string& name, int op,
                                  double prescale, double postscale, int set) {
    return ct::reducescatter_async(tensor, name,
                                   reducescatter_options(op, prescale, postscale, set));
  });
  m.def("grouped_allgather_async",
        [](const std::vector<torch::Tensor>& tensors, const std::vector<std::string>& names,
           int set) { return ct::grouped_allgather_async(tensors, names, to_set(set)); });
  m.def("grouped_reducescatter_async",
        [](const std::vector<torch::Tensor>& tensors, const std::vector<std::string>& names, int op,
           double prescale, double postscale, int set) {
          return ct::grouped_reducescatter_async(
              tensors, names, reducescatter_options(op, prescale, postscale, set));
        });
#ifdef CHORUS_TORCH_C10D
  // The torch.distributed backend's process group (chorus/torch/distributed.py registers it).
  // Without the GIL: a subgroup's process set is made with the other members.
  m.def(
      "process_group",
      [](int rank, int size, const std::vector<int>& global_ranks, const std::string& name) {
        return ct::make_process_group({rank, size, global_ranks, name});
      },
      py::call_guard<py::gil_scoped_release>());
  // chorus::init() for a job that no MPI launcher started: its ranks meet in torch's store.
  m.def(
      "init_in_store",
      [](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size) {
        chorus::Options options;
        options.rendezvous = ct::store_rendezvous(store, rank, size);
        throw_if_error(chorus::init(options));
      },
      py::call_guard<py::gil_scoped_release>());
#endif
  m.def("barrier", [](int set) {
    py::gil_scoped_release release;
    throw_if_error(chorus::barrier(to_set(set)).wait());
  });
  m.def("join", [] {
    py::gil_scoped_release release;
    chorus::Handle h = chorus::join();
    throw_if_error(h.wait());
    return h.last_joined_rank();
  });

  // The node-local commits of chorus.torch.elastic (include/chorus/elastic.h); the state is
  // the bytes Python serialized.
  m.def("elastic_commit_dir", [] {
    chorus::StatusOr<std::string> dir = chorus::elastic::commit_dir();
    throw_if_error(dir.status());
    return *dir;
  });
  // The commit's bytes come later, from `bytes()` (None on ranks that write nothing), which
  // the writer thread calls under the GIL; the training thread only hands it over.
  m.def("elastic_store_commit_async",
        [](const std::string& dir, uint64_t number, py::object bytes) {
          std::function<std::string()> make;
          // Set once this thread holds the GIL again: the writer takes the GIL after it, so
          // that the commit returns at once instead of waiting for the writer's pickling (a
          // switch interval). Bounded, for the hand-overs that wait for the write themselves
          // (the test fault flushes before it returns).
          auto back = std::make_shared<std::promise<void>>();
          if (!bytes.is_none()) {
            // Dropped by whichever thread lets it go (the writer, or a newer commit that
            // replaced it), under the GIL.
            std::shared_ptr<py::object> call(new py::object(std::move(bytes)), [](py::object* o) {
              py::gil_scoped_acquire gil;
              delete o;
            });
            make = [call, handed = back->get_future().share()] {
              handed.wait_for(std::chrono::milliseconds(50));
              py::gil_scoped_acquire gil;
              return static_cast<std::string>((*call)().cast<py::bytes>());
            };
          }
          chorus::Status s;
          {
            py::gil_scoped_release release;
            s = chorus::elastic::store_commit_async(dir, number, std::move(make));
          }
          back->set_value();
          throw_if_error(s);
        });
  m.def("elastic_flush_commits", [] {
    py::gil_scoped_release release;
    throw_if_error(chorus::elastic::flush_commits());
  });
  m.def("elastic_commits_replaced", &chorus::elastic::commits_replaced);
  m.def("elastic_newest_commit", [](const std::string& dir) -> py::object {
    chorus::StatusOr<std::optional<chorus::elastic::CommittedState>> newest = [&] {
      py::gil_scoped_release release;
      return chorus::elastic::newest_commit(dir);
    }();
    throw_if_error(newest.status());
    if (!*newest) return py::none();
    return py::make_tuple((*newest)->number, py::bytes((*newest)->bytes));
  });
  m.def("elastic_hosts_added", [] {
    py::gil_scoped_release release;
    chorus::StatusOr<bool> added = chorus::elastic::hosts_added();
    throw_if_error(added.status());
    return *added;
  });
  // A reset in place (chorus.torch.elastic's run on the Gloo world): None, or why chorusrun
  // dropped this worker from the job.
  m.def("elastic_resets_in_place", &chorus::elastic::resets_in_place);
  m.def("elastic_start_number", &chorus::elastic::start_number);
  m.def("elastic_reset", []() -> py::object {
    chorus::Status s;
    {
      py::gil_scoped_release release;
      s = chorus::elastic::reset();
    }
    if (s.code() == chorus::StatusCode::kFailedPrecondition) return py::str(s.message());
    throw_if_error(s);
    return py::none();
  });
  // After a reset in place: (number, bytes) of the newest commit some rank holds in memory,
  // the bytes empty where this rank holds it; `bytes()` serializes this rank's where it sends.
  m.def("elastic_newest_held_commit", [](uint64_t mine, const py::function& bytes) {
    chorus::StatusOr<chorus::elastic::CommittedState> held = [&] {
      py::gil_scoped_release release;
      return chorus::elastic::newest_held_commit(mine, [&bytes] {
        py::gil_scoped_acquire acquire;
        return bytes().cast<std::string>();
      });
    }();
    throw_if_error(held.status());
    return py::make_tuple(held->number, py::bytes(held->bytes));
  });
  // remove_commits waits for the writer, which takes the GIL to pickle a waiting commit.
  m.def("elastic_remove_commits", [](const std::string& dir) {
    py::gil_scoped_release release;
    throw_if_error(chorus::elastic::remove_commits(dir));
  });

  // PowerSGD's settings (chorus.torch.PowerSGD builds them with torch's names).
  py::class_<ct::PowerSgdOptions>(m, "PowerSgdOptions")
      .def(py::init([](int rank, int64_t start_iter, double min_rate, bool error_feedback,
                       bool warm_start, double epsilon, uint64_t seed) {
             ct::PowerSgdOptions o;
             o.matrix_approximation_rank = rank;
             o.start_iter = start_iter;
             o.min_compression_rate = min_rate;
             o.error_feedback = error_feedback;
             o.warm_start = warm_start;
             o.orthogonalization_epsilon = epsilon;
             o.seed = seed;
             return o;
           }),
           py::arg("matrix_approximation_rank"), py::arg("start_iter"),
           py::arg("min_compression_rate"), py::arg("error_feedback"), py::arg("warm_start"),
           py::arg("orthogonalization_epsilon"), py::arg("seed"));

  // The engine of the Python DistributedOptimizer: C++ hooks on every parameter's gradient
  // accumulator start its allreduce during backward, without entering Python.
  py::class_<ct::GradientReducer, std::unique_ptr<ct::GradientReducer, DeleteWithoutGil>>(
      m, "GradientReducer")
      .def(py::init([](const std::vector<std::pair<std::string, torch::Tensor>>& params, int op,
                       double predivide, int passes, int compression, int set,
                       const std::string& prefix,
                       const std::vector<std::vector<std::size_t>>& groups, bool sparse_as_dense,
                       const ct::PowerSgdOptions& powersgd) {
             ct::DistributedOptimizerOptions o;
             o.powersgd = powersgd;
             o.op = to_op(op);
             o.gradient_predivide_factor = predivide;
             o.backward_passes_per_step = passes;
             o.compression = to_compression(compression);
             o.process_set = to_set(set);
             o.name_prefix = prefix;
             o.groups = groups;
             o.sparse_as_dense = sparse_as_dense;
             py::gil_scoped_release release;
             return new ct::GradientReducer(params, o);  // owned by the DeleteWithoutGil holder
           }),
           py::arg("params"), py::arg("op"), py::arg("gradient_predivide_factor"),
           py::arg("backward_passes_per_step"), py::arg("compression"), py::arg("process_set"),
           py::arg("name_prefix"), py::arg("groups"), py::arg("sparse_as_dense"),
           py::arg("powersgd") = ct::PowerSgdOptions())
      .def("synchronize", &ct::GradientReducer::synchronize,
           py::call_guard<py::gil_scoped_release>())
      // PowerSGD's step count and Qs, as copies: (iteration, [(name, q), ...]).
      .def("powersgd_state",
           [](const ct::GradientReducer& r) {
             ct::GradientReducer::PowerSgdState s = r.powersgd_state();
             for (auto& [name, q] : s.qs) q = q.clone();
             return std::make_pair(s.iteration, s.qs);
           })
      .def(
          "load_powersgd_state",
          [](ct::GradientReducer& r, int64_t iteration,
             const std::vector<std::pair<std::string, torch::Tensor>>& qs) {
            r.load_powersgd_state({iteration, qs});
          },
          py::arg("iteration"), py::arg("qs"))
      .def("reductions_started", &ct::GradientReducer::reductions_started);

  // The engine of ShardedOptimizer and of DistributedOptimizer's gradient buckets (stage 0):
  // the buckets, their hooks and collectives are C++; the wrapped optimizer steps in Python
  // on the shards it returns.
  using Reducer = ct::ShardedReducer;
  py::class_<Reducer, std::unique_ptr<Reducer, DeleteWithoutGil>>(m, "ShardedReducer")
      .def(py::init([](const std::vector<std::pair<std::string, torch::Tensor>>& params,
                       const std::vector<int>& group_of, int stage, int64_t bucket_bytes, int op,
                       double predivide, int passes, int compression, int set,
                       const std::string& prefix) {
             ct::ShardedOptions o;
             o.stage = stage;
             o.bucket_bytes = bucket_bytes;
             o.op = to_op(op);
             o.gradient_predivide_factor = predivide;
             o.backward_passes_per_step = passes;
             o.compression = to_compression(compression);
             o.process_set = to_set(set);
             o.name_prefix = prefix;
             py::gil_scoped_release release;
             return new Reducer(params, group_of, o);
           }),
           py::arg("params"), py::arg("group_of"), py::arg("stage"), py::arg("bucket_bytes"),
           py::arg("op"), py::arg("gradient_predivide_factor"), py::arg("backward_passes_per_step"),
           py::arg("compression"), py::arg("process_set"), py::arg("name_prefix"))
      .def("synchronize", &Reducer::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("zero_grad", &Reducer::zero_grad)
      .def("gather_parameters", &Reducer::gather_parameters,
           py::call_guard<py::gil_scoped_release>())
      .def("clip_grad_norm", &Reducer::clip_grad_norm, py::arg("max_norm"), py::arg("norm_type"),
           py::call_guard<py::gil_scoped_release>())
      .def("gather_to_parameters", &Reducer::gather_to_parameters,
           py::call_guard<py::gil_scoped_release>())
      .def("shard_from_parameters", &Reducer::shard_from_parameters)
      .def("shards", &Reducer::shards)
      .def("bucket_count", &Reducer::bucket_count)
      .def("group_of_bucket", &Reducer::group_of_bucket)
      .def("slots",
           [](const Reducer& r, std::size_t bucket) {
             std::vector<std::tuple<std::size_t, int64_t, int64_t>> out;
             for (const ct::ShardSlot& s : r.slots(bucket)) {
               out.emplace_back(s.parameter, s.offset, s.numel);
             }
             return out;
           })
      .def("shard_count", &Reducer::shard_count)
      .def("reductions_started", &Reducer::reductions_started)
      .def("gradient_bytes", &Reducer::gradient_bytes);
}
