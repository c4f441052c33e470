#include "sched/queue_choice.hpp"

#include <algorithm>

namespace uvcl::sched {
namespace {

QueueIndex least_loaded(std::span<const std::uint32_t> load) {
  return static_cast<QueueIndex>(std::min_element(load.begin(), load.end()) - load.begin());
}

bool has_reader_on(const BufferHazards& b, QueueIndex q) {
  return std::any_of(b.readers.begin(), b.readers.end(), [&](const Slot& r) { return r.queue == q; });
}

bool readers_pending_elsewhere(const BufferHazards& b, QueueIndex q, const EventRefs& refs) {
  return std::any_of(b.readers.begin(), b.readers.end(),
                     [&](const Slot& r) { return r.queue != q && !refs.is_complete(r.id); });
}

}  // namespace

QueueIndex choose_queue(std::span<const AccessView> accesses, std::span<const std::uint32_t> load,
                        const EventRefs& refs) {
  for (const AccessView& a : accesses) {
    const BufferHazards& b = *a.hazards;
    if (!b.writer || refs.is_complete(b.writer->id)) continue;
    const QueueIndex q = b.writer->queue;
    if (q >= load.size()) continue;  // not a compute queue: nothing to continue
    // First consumer on the producer's queue: continue the chain there. An
    // in-place update (write) continues it too unless readers elsewhere are
    // still running, which it would wait for anyway.
    if (!a.write && !has_reader_on(b, q)) return q;
    if (a.write && !readers_pending_elsewhere(b, q, refs)) return q;
  }
  return least_loaded(load);
}

}  // namespace uvcl::sched
