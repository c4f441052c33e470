// queue_choice.hpp — which in-order queue a command goes to.
//
// The seed chose the queue that last wrote the command's FIRST input: fan-out
// from one weight buffer then landed on one queue, so 8 queues behaved like 1.
//
// Continuation: a command follows a producer only when it
// is the first consumer of that producer's output on the producer's queue —
// it continues a chain, and the wait it would need disappears. Every other
// command (second and later readers of the same version, fresh work) goes to
// the least loaded queue, where it waits on the producer's event. Chains stay
// on one queue; fan-out spreads. A command that overwrites a buffer whose
// writer has completed but whose readers, all on one queue, still run goes
// to that queue (the next pass of a model reusing its buffers). Ties go to
// the lowest index. (The engine may place fresh work — no chain of its own —
// on its consumer's chain instead, looking ahead in its window.)
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "sched/hazards.hpp"

namespace uvcl::sched {

struct AccessView {
  const BufferHazards* hazards;
  bool write;
};

// `load[q]`: commands in flight or assigned in this window on queue q.
QueueIndex choose_queue(std::span<const AccessView> accesses,
                        std::span<const std::uint32_t> load, const EventRefs& refs);
// The chain a command continues, if any (choose_queue without its fallback
// to the least loaded of `queues` compute queues).
std::optional<QueueIndex> continued_queue(std::span<const AccessView> accesses, std::size_t queues,
                                          const EventRefs& refs);
QueueIndex least_loaded(std::span<const std::uint32_t> load);

}  // namespace uvcl::sched
