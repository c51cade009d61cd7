#include "collectives/gpu_agree.h"

#include <vector>

namespace chorus {

Status agree_on_success(Backend& host, const Status& local, const std::string& step) {
  const int n = host.size();
  std::vector<char> ok(static_cast<std::size_t>(n), 0);
  char mine = local.ok() ? 1 : 0;
  if (Status s = host.allgatherv(&mine, ok.data(), std::vector<int64_t>(n, 1)); !s.ok()) return s;
  if (!local.ok()) return local;
  std::string failed;
  for (int r = 0; r < n; ++r) {
    if (ok[static_cast<std::size_t>(r)] == 1) continue;
    failed += (failed.empty() ? "" : ", ") + std::to_string(r);
  }
  if (failed.empty()) return {};
  return internal_error(step + " failed on rank(s) " + failed +
                        " of the set (their logs say why); every member gives it up");
}

}  // namespace chorus
