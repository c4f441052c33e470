// program_memo.cpp — the in-memory LRU of built programs.
#include "engine/program_memo.hpp"

namespace uvcl {

std::string ProgramMemo::make_key(std::uint32_t device, const std::string& options, const std::string& source) {
  // Lengths first, so no options/source split can collide with another.
  std::string k = std::to_string(device) + ':' + std::to_string(options.size()) + ':' + options + ':';
  k += source;
  return k;
}

std::optional<ProgramMemo::Hit> ProgramMemo::find(std::uint32_t device, const std::string& options,
                                                  const std::string& source) {
  auto it = index_.find(make_key(device, options, source));
  if (it == index_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, it->second);
  return Hit{it->second->program, &it->second->kernels};
}

void ProgramMemo::insert(std::uint32_t device, const std::string& options, const std::string& source,
                         Handle program, std::vector<CachedKernel> kernels) {
  std::string key = make_key(device, options, source);
  if (capacity_ == 0 || index_.count(key)) {
    release_(program);
    return;
  }
  while (order_.size() >= capacity_) {
    Entry& last = order_.back();
    release_(last.program);
    index_.erase(last.key);
    order_.pop_back();
  }
  order_.push_front(Entry{key, program, std::move(kernels)});
  index_.emplace(std::move(key), order_.begin());
}

void ProgramMemo::clear() {
  for (Entry& e : order_) release_(e.program);
  order_.clear();
  index_.clear();
}

}  // namespace uvcl
