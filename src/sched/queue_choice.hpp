// queue_choice.hpp — which in-order queue a command goes to: list
// scheduling, the queue-selection step of HEFT.
//
// Commands are placed one at a time, in program order: the window's order is
// a topological order of its hazards, and on in-order queues submitting in
// another order would change the hazards themselves. Every compute queue q
// is a candidate. On q the command can start once q has finished what it
// holds and every unfinished command it must wait for (hazards.hpp) has
// finished, plus `wait_ns` for each of those on another queue; it ends
// `cost_ns` later. A wait across queues costs twice: it delays the start
// (the device hands over between queues) and it costs the host a marker, a
// flush and a wait list. So a queue is judged by when the command would end
// there plus `wait_ns` per wait across queues; the lowest wins. Ties go to
// the queue with fewer such waits, then the queue of the newest command
// waited for (estimates that have passed while their commands still run all
// read "now"; the one submitted last is expected to end last), then fewer
// commands in flight, then the lowest index. A chain stays on its queue (elsewhere it would wait), fan-out of
// work longer than a wait spreads (the producer's queue is busy with the
// first consumer), a writer of what one queue still reads follows the
// readers. Times are the engine's estimates on its own clock (ns); the same
// inputs give the same choice, so a schedule can be tested and replayed.
#pragma once

#include <cstdint>
#include <span>

#include "sched/hazards.hpp"
#include "sched/scratch_list.hpp"

namespace uvcl::sched {

struct AccessView {
  const BufferHazards* hazards;
  bool write;
};

// An unfinished command another one must wait for, wherever it goes.
struct Dep {
  CommandId id = 0;
  QueueIndex queue = 0;
  std::uint64_t finish_ns = 0;  // estimated
};
using Deps = ScratchList<Dep, 8>;

struct Estimate {
  std::uint64_t now_ns = 0;
  std::uint64_t cost_ns = 0;
  std::uint64_t wait_ns = 0;  // what a wait across queues adds
};

struct Placement {
  QueueIndex queue = 0;
  std::uint64_t finish_ns = 0;
};

// Adds to `out` what a command with `accesses` must wait for on any queue,
// each command once: the unfinished writer of each buffer, and for a write
// each unfinished reader since. (Hazards::collect_waits then drops those of
// its own queue.)
void pending_deps(std::span<const AccessView> accesses, const EventRefs& refs, Deps& out);

// Per compute queue: when it is expected to have finished what it holds (0
// or anything before now: idle), and how many commands it has in flight.
struct Timelines {
  std::span<const std::uint64_t> free_ns;
  std::span<const std::uint32_t> load;
};

Placement earliest_finish(const Timelines& t, std::span<const Dep> deps, const Estimate& est);

// For a command with nothing to wait for whose output `consumer` reads next:
// placed where the consumer, placed in turn, would end first (on the
// consumer's chain, so that it waits for nothing across queues), ties to
// where the command itself ends first. `consumer_deps`: what the consumer
// waits for besides this command.
Placement earliest_finish_for_consumer(const Timelines& t, const Estimate& est,
                                       std::span<const Dep> consumer_deps, std::uint64_t consumer_cost_ns);

QueueIndex least_loaded(std::span<const std::uint32_t> load);

}  // namespace uvcl::sched
