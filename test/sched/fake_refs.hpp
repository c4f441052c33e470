// A counting EventRefs for scheduler tests: every retain and release is
// tracked per id, so tests can assert each event is released exactly once.
#pragma once

#include <map>
#include <set>

#include "sched/ids.hpp"

namespace uvcl::sched::testing {

class FakeRefs final : public EventRefs {
 public:
  void retain(CommandId id) override { ++refs[id]; ++retains; }
  void release(CommandId id) override {
    --refs[id];
    ++releases;
    if (refs[id] < 0) negative = true;
  }
  bool is_complete(CommandId id) const override { return complete.count(id) != 0; }

  int live(CommandId id) const {
    auto it = refs.find(id);
    return it == refs.end() ? 0 : it->second;
  }
  int total_live() const {
    int n = 0;
    for (auto& [id, r] : refs) n += r;
    return n;
  }

  std::map<CommandId, int> refs;
  std::set<CommandId> complete;
  int retains = 0, releases = 0;
  bool negative = false;
};

}  // namespace uvcl::sched::testing
