#include "sched/cost_table.hpp"

namespace uvcl::sched {

std::uint64_t CostTable::estimate(std::uint64_t kind) const {
  if (auto it = ns_.find(kind); it != ns_.end()) return it->second;
  return any_ns_ != 0 ? any_ns_ : default_ns_;
}

void CostTable::learn(std::uint64_t kind, std::uint64_t ns) {
  if (ns == 0) ns = 1;  // 0 means "nothing measured"
  any_ns_ = any_ns_ == 0 ? ns : moved_toward(any_ns_, ns);
  if (auto it = ns_.find(kind); it != ns_.end()) {
    it->second = moved_toward(it->second, ns);
    return;
  }
  if (ns_.size() < capacity_) ns_.emplace(kind, ns);
}

}  // namespace uvcl::sched
