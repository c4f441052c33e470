// An EventRefs for scheduler tests: the ids in `complete` have completed.
#pragma once

#include <set>

#include "sched/ids.hpp"

namespace uvcl::sched::testing {

class FakeRefs final : public EventRefs {
 public:
  bool is_complete(CommandId id) const override { return complete.count(id) != 0; }
  std::set<CommandId> complete;
};

}  // namespace uvcl::sched::testing
