#include "sched/queue_choice.hpp"

#include <algorithm>
#include <cassert>

namespace uvcl::sched {
namespace {

struct Candidate {
  std::uint64_t finish_ns = 0;
  std::uint64_t score_ns = 0;  // finish, plus what its waits cost the host
  std::size_t cross_waits = 0;
  CommandId newest_here = 0;  // the newest of the command's deps on this queue
};

Candidate on_queue(std::uint64_t free_ns, QueueIndex q, std::span<const Dep> deps, const Estimate& est) {
  Candidate c;
  std::uint64_t start = std::max(est.now_ns, free_ns);
  for (const Dep& d : deps) {
    const bool cross = d.queue != q || d.queue == kNoQueue;
    c.cross_waits += cross ? 1 : 0;
    if (!cross) c.newest_here = std::max(c.newest_here, d.id);
    start = std::max(start, d.finish_ns + (cross ? est.wait_ns : 0));
  }
  c.finish_ns = start + est.cost_ns;
  c.score_ns = c.finish_ns + c.cross_waits * est.wait_ns;
  return c;
}

// Ties: fewer waits; then the queue of the newest dep (estimates that have
// passed while their commands still run all read "now": of those, the one
// submitted last is expected to end last); then fewer commands in flight;
// then the lower index (the caller's order).
bool better(const Candidate& a, std::uint32_t a_load, const Candidate& b, std::uint32_t b_load) {
  if (a.score_ns != b.score_ns) return a.score_ns < b.score_ns;
  if (a.cross_waits != b.cross_waits) return a.cross_waits < b.cross_waits;
  if (a.newest_here != b.newest_here) return a.newest_here > b.newest_here;
  return a_load < b_load;
}

Candidate best_on(const Timelines& t, std::span<const Dep> deps, const Estimate& est, QueueIndex& queue) {
  assert(!t.free_ns.empty() && t.free_ns.size() == t.load.size());
  Candidate best;
  for (QueueIndex q = 0; q < t.free_ns.size(); ++q) {
    const Candidate c = on_queue(t.free_ns[q], q, deps, est);
    if (q == 0 || better(c, t.load[q], best, t.load[queue])) {
      best = c;
      queue = q;
    }
  }
  return best;
}

}  // namespace

void pending_deps(std::span<const AccessView> accesses, const EventRefs& refs, Deps& out) {
  const auto add = [&](const Slot& s) {
    if (std::any_of(out.begin(), out.end(), [&](const Dep& d) { return d.id == s.id; })) return;
    if (!refs.is_complete(s.id)) out.push_back(Dep{s.id, s.queue, s.finish_ns});
  };
  for (const AccessView& a : accesses) {
    if (a.hazards->writer) add(*a.hazards->writer);
    if (a.write)
      for (const Slot& r : a.hazards->readers) add(r);
  }
}

Placement earliest_finish(const Timelines& t, std::span<const Dep> deps, const Estimate& est) {
  QueueIndex q = 0;
  const Candidate c = best_on(t, deps, est, q);
  return Placement{q, c.finish_ns};
}

Placement earliest_finish_for_consumer(const Timelines& t, const Estimate& est, std::span<const Dep> consumer_deps,
                                       std::uint64_t consumer_cost_ns) {
  assert(!t.free_ns.empty() && t.free_ns.size() == t.load.size());
  Deps deps;
  for (const Dep& d : consumer_deps) deps.push_back(d);
  deps.push_back(Dep{});  // this command, wherever it goes (not yet an id)
  const Estimate consumer{est.now_ns, consumer_cost_ns, est.wait_ns};
  Placement best;
  Candidate best_self, best_consumer;
  for (QueueIndex q = 0; q < t.free_ns.size(); ++q) {
    const Candidate self = on_queue(t.free_ns[q], q, {}, est);
    // The timelines once this command is on q.
    ScratchList<std::uint64_t, 16> after;
    after.assign(t.free_ns.begin(), t.free_ns.end());
    after[q] = self.finish_ns;
    ScratchList<std::uint32_t, 16> load;
    load.assign(t.load.begin(), t.load.end());
    ++load[q];
    deps[deps.size() - 1] = Dep{0, q, self.finish_ns};
    QueueIndex unused = 0;
    const Candidate next = best_on(Timelines{after.span(), load.span()}, deps.span(), consumer, unused);
    if (q == 0 || next.score_ns < best_consumer.score_ns ||
        (next.score_ns == best_consumer.score_ns && better(self, t.load[q], best_self, t.load[best.queue]))) {
      best = Placement{q, self.finish_ns};
      best_self = self;
      best_consumer = next;
    }
  }
  return best;
}

QueueIndex least_loaded(std::span<const std::uint32_t> load) {
  return static_cast<QueueIndex>(std::min_element(load.begin(), load.end()) - load.begin());
}

}  // namespace uvcl::sched
