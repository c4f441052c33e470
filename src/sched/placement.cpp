#include "sched/placement.hpp"

#include <algorithm>
#include <cassert>

namespace uvcl::sched {

std::uint64_t device_finish_ns(const DeviceEstimate& d, std::uint64_t now_ns) {
  const std::uint64_t device_ready = std::max(now_ns, d.free_ns) + d.backlog_ns;
  const std::uint64_t inputs_ready = now_ns + d.transfer_ns;
  return std::max(device_ready, inputs_ready) + d.cost_ns;
}

std::size_t earliest_device(std::span<const DeviceEstimate> candidates, std::uint64_t now_ns) {
  assert(!candidates.empty());
  std::size_t best = 0;
  std::uint64_t best_finish = device_finish_ns(candidates[0], now_ns);
  for (std::size_t i = 1; i < candidates.size(); ++i) {
    const std::uint64_t finish = device_finish_ns(candidates[i], now_ns);
    if (finish < best_finish || (finish == best_finish && candidates[i].transfer_ns < candidates[best].transfer_ns)) {
      best = i;
      best_finish = finish;
    }
  }
  return best;
}

}  // namespace uvcl::sched
