#include "collectives/backend.h"

#include <string>

namespace chorus {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kReducescatter: return "reducescatter";
    case Collective::kAllgather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAlltoall: return "alltoall";
    case Collective::kBarrier: return "barrier";
  }
  return "unknown";
}

Status Backend::not_served(Collective c) const {
  return internal_error(std::string("the ") + name() + " backend does not serve " +
                        collective_name(c) + " (BackendChoice should have given it to another)");
}

Status Backend::allreduce(const void*, void*, int64_t, DataType, ReduceOp, kernels::Scale) {
  return not_served(Collective::kAllreduce);
}
Status Backend::reducescatter(const void*, void*, const std::vector<int64_t>&, DataType, ReduceOp,
                              kernels::Scale) {
  return not_served(Collective::kReducescatter);
}
Status Backend::allgatherv(const void*, void*, const std::vector<int64_t>&) {
  return not_served(Collective::kAllgather);
}
Status Backend::broadcast(void*, int64_t, int) { return not_served(Collective::kBroadcast); }
Status Backend::alltoallv(const void*, const std::vector<int64_t>&, void*,
                          const std::vector<int64_t>&) {
  return not_served(Collective::kAlltoall);
}
Status Backend::barrier() { return not_served(Collective::kBarrier); }

void even_blocks(int64_t count, int parts, std::vector<int64_t>* blocks) {
  blocks->assign(static_cast<std::size_t>(parts), count / parts);
  for (int64_t i = 0; i < count % parts; ++i) ++(*blocks)[static_cast<std::size_t>(i)];
}

}  // namespace chorus
