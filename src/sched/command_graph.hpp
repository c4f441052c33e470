// command_graph.hpp — command states, and failure that follows the data.
//
// Every command is a node from the moment it enters a window until its
// outcome is final. A command's outcome is success only when its own event
// completed without error AND every producer of data it read (its RAW
// upstreams) succeeded: a result computed from a failed command's output is
// not a result. A failure is passed on to every dependent, transitively, so
// a read-back of anything downstream of a failed launch reports that failure
// instead of stale data.
//
// Outcomes are queued, not called back: the engine drains them after each
// batch of completions (no re-entrancy). Each command yields exactly one
// outcome. No recursion: long chains settle with a worklist.
#pragma once

#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "sched/ids.hpp"
#include "sched/scratch_list.hpp"
#include "sched/states.hpp"
#include "uvcl/status.hpp"

namespace uvcl::sched {

// Told of every failure in the step that fails the command, transitive ones
// included, before any outcome is taken: what the command wrote must be
// marked invalid before user code that could read it runs.
class FailureSink {
 public:
  virtual void on_failed(CommandId id, const Error& error) = 0;
  // A command's own event failed and no producer's failure explains it: the
  // failure starts here (event_done's Report::IfOwn). Told once per failure,
  // before on_failed; the failures it causes downstream are not told here.
  virtual void on_own_failure(CommandId id, const Error& error) = 0;

 protected:
  ~FailureSink() = default;
};

// A command's place in the graph. The graph keeps none of these itself: its
// owner gives one per command id (the engine keeps it in the command's
// record, so a command costs no map node), valid from add() until retired.
struct GraphNode {
  DependencyState state = DependencyState::Pending;
  bool live = false;  // between add() and retirement
  // Complete with an error its producers or waits may explain: held (see
  // event_done) until they settle.
  bool held_failure = false;
  std::uint32_t pending_producers = 0;
  std::uint32_t pending_waits = 0;  // waits_for commands not settled yet
  // RAW dependents, and (tagged kOrderEdge) the commands that wait for this
  // one only for the order.
  ScratchList<CommandId, 4> dependents;
  CommandId failed_wait = 0;  // a failed command it waits for (waits_for), or the failure that failed it
};

// Tags an entry of GraphNode::dependents as an order edge (waits_for); ids
// never reach the top bit.
inline constexpr CommandId kOrderEdge = CommandId{1} << 63;
constexpr bool is_order_edge(CommandId entry) noexcept { return (entry & kOrderEdge) != 0; }
constexpr CommandId edge_target(CommandId entry) noexcept { return entry & ~kOrderEdge; }

class GraphNodes {
 public:
  // The node of `id`; nullptr for an id whose node is gone (its command is
  // long settled) or was never made.
  virtual GraphNode* find(CommandId id) = 0;

 protected:
  ~GraphNodes() = default;
};

class CommandGraph {
 public:
  explicit CommandGraph(GraphNodes& nodes, FailureSink* sink = nullptr) : nodes_(nodes), sink_(sink) {}

  struct Outcome {
    CommandId id = 0;
    std::optional<Error> error;  // nullopt: success
  };

  // A new Pending command reading data produced by `producers` (unknown or
  // already settled ids are ignored). False when it is not in the graph
  // after: a Failed producer failed it at once, or its owner gave no node.
  bool add(CommandId id, std::span<const CommandId> producers);
  // The same with the node its owner already holds for `id`.
  bool add(CommandId id, GraphNode& n, std::span<const CommandId> producers);
  // Pending -> Submitted.
  void submitted(CommandId id);
  void submitted(GraphNode& n);  // the same with its node
  // The Submitted command waits on the device for `waits` (commands on
  // other queues it must follow) beside its producers: a driver fails a
  // command whose wait failed, so a failure of one of them explains its own
  // failure, though not its data (a success stays one).
  void waits_for(CommandId id, GraphNode& n, std::span<const CommandId> waits);
  // Whether a failed event is told to the sink's on_own_failure when it
  // turns out to be the command's own: Never when the caller knows it
  // follows from a failure told already (one before it on an in-order
  // queue, a part of the command that failed on its own).
  enum class Report { IfOwn, Never };
  // The command's own event finished, with an error or not. An error while
  // a producer has not settled may be that producer's failure passed on by
  // the driver (a command waiting on a failed event fails), and the
  // producer's event may merely not have been read yet: the error is held
  // until the producers and waits settle. One of them failing fails this
  // command as its downstream; all of them succeeding makes the error its
  // own.
  void event_done(CommandId id, std::optional<Error> error, Report report = Report::IfOwn);
  // event_done's common case, for an owner that holds the node: the event
  // of a Submitted command finished without error. True when the
  // command settled at once (every producer had succeeded): it is retired
  // and its outcome, success, is the caller's to give — none is queued for
  // it. Its dependents settle as event_done settles them. False: it waits
  // for a producer, and its outcome comes through the queue as usual.
  bool complete(GraphNode& n);
  // The command failed before or after submission (enqueue error, poisoned
  // input, lost device). Ignored for a command that already failed.
  void fail(CommandId id, Error error);

  // Moves the queued outcomes into `into` (cleared first) and gives the graph
  // `into`'s storage for the next ones: callers that alternate two vectors
  // allocate nothing. False when there were none.
  bool take_outcomes(std::vector<Outcome>& into);
  // An outcome taken before and held back by its owner (a command whose
  // outcome was known while its work still ran), queued again to be taken
  // with the others, after those queued before it.
  void requeue(Outcome o) { outcomes_.push_back(std::move(o)); }
  std::vector<Outcome> take_outcomes();
  bool has_outcomes() const { return !outcomes_.empty(); }

  std::optional<DependencyState> state(CommandId id) const;
  std::size_t size() const { return live_; }  // nodes added and not retired

 private:
  GraphNode* live(CommandId id) const;
  void transition(GraphNode& n, DependencyEvent e);
  void settle_from(CommandId first, GraphNode& node);
  static bool ready_to_settle(const GraphNode& n);
  // Each live dependent of `n` has one producer less to wait for; those
  // that settle now (complete, none left) go to settles(id, node).
  template <class Settles>
  void count_down_dependents(const GraphNode& n, Settles&& settles);
  void fail_from(CommandId first, Error error);
  void fail_own(CommandId id, Error error, Report report);
  void retire(GraphNode& n);
  // event_done's errors held while producers settle (GraphNode::held_failure).
  struct HeldFailure {
    CommandId id = 0;
    Error error;
    Report report = Report::IfOwn;
  };
  HeldFailure take_held(CommandId id);

  GraphNodes& nodes_;
  FailureSink* sink_ = nullptr;
  std::size_t live_ = 0;
  std::vector<Outcome> outcomes_;
  // Worklists, kept between calls.
  std::vector<std::pair<CommandId, GraphNode*>> settle_work_;
  std::vector<CommandId> fail_work_;
  std::vector<HeldFailure> held_;
};

}  // namespace uvcl::sched
