// answer_budget.hpp — the server-wide bound on memory held for answers not
// yet sent (uvcl serve --answer-budget).
//
// A job reserves its outputs' bytes (job_answer.hpp: output_bytes) plus a
// piece's worth before it starts; the reservation lives with the job, then
// with its streamed answer, and is released when the answer's last piece
// was written, or its connection closed, or the job failed. A job that does
// not fit is refused (503, Retry-After) instead of waiting: the loop holds
// no queue of parsed jobs, and a client retries as it would on 429.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

namespace uvcl::cli {

class AnswerBudget {
 public:
  explicit AnswerBudget(std::uint64_t limit) : state_(std::make_shared<State>(State{limit, 0})) {}

  // A reservation of `bytes`, released when the last copy of it goes; null
  // if it would take the bytes held past the limit.
  std::shared_ptr<void> reserve(std::uint64_t bytes) {
    State& s = *state_;
    if (bytes > s.limit || s.held > s.limit - bytes) return nullptr;
    s.held += bytes;
    return std::make_shared<Reservation>(state_, bytes);
  }
  std::uint64_t held() const { return state_->held; }
  std::uint64_t limit() const { return state_->limit; }

 private:
  struct State {
    std::uint64_t limit, held;
  };
  // Holds the state, not the budget: an answer may outlive the server's
  // objects by a close callback.
  struct Reservation {
    Reservation(std::shared_ptr<State> s, std::uint64_t b) : state(std::move(s)), bytes(b) {}
    ~Reservation() { state->held -= bytes; }
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    std::shared_ptr<State> state;
    std::uint64_t bytes;
  };
  std::shared_ptr<State> state_;
};

}  // namespace uvcl::cli
