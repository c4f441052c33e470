// queue_choice.hpp — which in-order queue a command goes to.
//
// Seed: the queue that last wrote the command's FIRST input, else the least
// loaded. Fan-out from one weight buffer then lands on one queue, so 8
// queues behave like 1.
//
// Continuation (uvcl's default): a command follows a producer only when it
// is the first consumer of that producer's output on the producer's queue —
// it continues a chain, and the wait it would need disappears. Every other
// command (second and later readers of the same version, fresh work) goes to
// the least loaded queue, where it waits on the producer's event. Chains stay
// on one queue; fan-out spreads. Ties go to the lowest index.
#pragma once

#include <span>
#include <vector>

#include "sched/hazards.hpp"

namespace uvcl::sched {

enum class QueuePolicy { Seed, Continuation };

struct AccessView {
  const BufferHazards* hazards;
  bool write;
};

// `load[q]`: commands in flight or assigned in this window on queue q.
QueueIndex choose_queue(QueuePolicy policy, std::span<const AccessView> accesses,
                        std::span<const std::uint32_t> load, const EventRefs& refs);

}  // namespace uvcl::sched
