#include "optimizer_archive.h"

#include <string>

namespace chorus::torch {

void load_optimizer(::torch::optim::Optimizer& optimizer,
                    ::torch::serialize::InputArchive& archive) {
  optimizer.state().clear();
  optimizer.load(archive);
  ::torch::serialize::InputArchive groups;
  archive.read("param_groups", groups);
  for (std::size_t i = 0; i < optimizer.param_groups().size(); ++i) {
    ::torch::serialize::InputArchive group, options;
    groups.read("param_groups/" + std::to_string(i), group);
    group.read("options", options);
    optimizer.param_groups()[i].options().serialize(options);
  }
}

}  // namespace chorus::torch
