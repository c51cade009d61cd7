#include "chorus/torch/state.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include <filesystem>
#include <sstream>

#include "chorus/chorus.h"
#include "chorus/torch/tensor_ops.h"
#include "optimizer_archive.h"

namespace chorus::torch {

using ::torch::Tensor;
using ::torch::serialize::InputArchive;
using ::torch::serialize::OutputArchive;

namespace {

std::string serialized(::torch::optim::Optimizer& optimizer) {
  OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

}  // namespace

void broadcast_parameters(::torch::nn::Module& module, int root, ProcessSet process_set) {
  std::vector<TensorHandle> handles;
  for (auto& item : module.named_parameters(/*recurse=*/true)) {
    handles.push_back(
        broadcast_async_(item.value(), root, "bcast.param." + item.key(), process_set));
  }
  for (auto& item : module.named_buffers(/*recurse=*/true)) {
    handles.push_back(
        broadcast_async_(item.value(), root, "bcast.buffer." + item.key(), process_set));
  }
  for (auto& h : handles) h.wait();
}

void broadcast_optimizer_state(::torch::optim::Optimizer& optimizer, int root,
                               ProcessSet process_set) {
  const bool is_root = process_set_rank(process_set) == root;
  std::string bytes = is_root ? serialized(optimizer) : std::string();
  Tensor length = ::torch::tensor({static_cast<int64_t>(bytes.size())}, ::torch::kInt64);
  broadcast_(length, root, "bcast.optimizer.length", process_set);
  bytes.resize(static_cast<std::size_t>(length.item<int64_t>()));
  Tensor data =
      ::torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, ::torch::kUInt8);
  broadcast_(data, root, "bcast.optimizer", process_set);
  if (is_root) return;
  std::istringstream in(bytes);
  InputArchive archive;
  archive.load_from(in);
  load_optimizer(optimizer, archive);
}

namespace {

// Written aside and renamed, so a reader never sees half a file.
void write_whole(OutputArchive& archive, const std::string& path) {
  const std::string partial = path + ".partial";
  archive.save_to(partial);
  std::filesystem::rename(partial, path);
}

void write_checkpoint(const std::string& path, ::torch::nn::Module& module,
                      OutputArchive& optimizer, int64_t epoch) {
  OutputArchive archive, model;
  module.save(model);
  archive.write("model", model);
  archive.write("optimizer", optimizer);
  archive.write("epoch", ::torch::tensor(epoch));
  write_whole(archive, path);
}

// Reads the model of a checkpoint at `path` into `module` (on its own device); returns the
// archive, with the optimizer's part in `optimizer`, and the epoch.
int64_t read_checkpoint(const std::string& path, ::torch::nn::Module& module,
                        InputArchive& optimizer) {
  c10::optional<::torch::Device> device;  // std::optional in LibTorch 2, c10 in 1.13
  for (const auto& p : module.parameters()) {
    device = p.device();
    break;
  }
  InputArchive archive, model;
  archive.load_from(path, device);
  archive.read("model", model);
  archive.read("optimizer", optimizer);
  module.load(model);
  Tensor epoch;
  archive.read("epoch", epoch);
  return epoch.item<int64_t>();
}

}  // namespace

void save_checkpoint(const std::string& path, ::torch::nn::Module& module,
                     ::torch::optim::Optimizer& optimizer, int64_t epoch) {
  if (rank() == 0) {
    OutputArchive state;
    optimizer.save(state);
    write_checkpoint(path, module, state, epoch);
  }
  throw_if_error(barrier().wait());
}

std::optional<int64_t> load_checkpoint(const std::string& path, ::torch::nn::Module& module,
                                       ::torch::optim::Optimizer& optimizer) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  InputArchive state;
  const int64_t epoch = read_checkpoint(path, module, state);
  load_optimizer(optimizer, state);
  return epoch;
}

std::string shard_path(const std::string& path, int rank, int count) {
  return path + ".shard" + std::to_string(rank) + "-of-" + std::to_string(count);
}

void save_checkpoint(const std::string& path, ::torch::nn::Module& module,
                     ShardedOptimizer& optimizer, int64_t epoch, bool consolidated) {
  OutputArchive state;
  optimizer.save(state, consolidated);
  const int me = optimizer.reducer().shard_rank();
  if (!consolidated) {
    write_checkpoint(shard_path(path, me, optimizer.reducer().shard_count()), module, state, epoch);
  } else if (me == 0) {
    write_checkpoint(path, module, state, epoch);
  }
  throw_if_error(barrier(optimizer.reducer().process_set()).wait());
}

std::optional<int64_t> load_checkpoint(const std::string& path, ::torch::nn::Module& module,
                                       ShardedOptimizer& optimizer) {
  std::string file = path;
  if (!std::filesystem::exists(file)) {
    file = shard_path(path, optimizer.reducer().shard_rank(), optimizer.reducer().shard_count());
    if (!std::filesystem::exists(file)) return std::nullopt;
  }
  InputArchive state;
  const int64_t epoch = read_checkpoint(file, module, state);
  optimizer.load(state);
  return epoch;
}

}  // namespace chorus::torch
