// handles.hpp — the engine's libuv handles and their lifetimes.
//
//   prepare  submits every non-empty window once per loop iteration, right
//            before the loop would block: work never waits for a full window
//            while the loop sleeps. Always active, never keeps the loop alive.
//   timer    polls completion status while work is in flight (the fallback
//            for drivers that skip callbacks, e.g. PoCL on failed commands).
//            Started and ref'd only while busy: an idle engine costs no CPU
//            and uv_run returns.
//   async    woken by OpenCL callbacks on driver threads (wake()); unref'd.
//   idle     while spinning (Config::spin_us), or while work is left over
//            from an iteration that spent its budget (Config::loop_budget_us):
//            the loop does not sleep and every iteration runs on_poll; unref'd.
//   again    runs on_late_work, when work was issued after the
//            prepare step of this iteration (submit_before_sleep()): by a
//            prepare handle of the caller's that runs after the engine's.
//            An idle handle, so the loop does not block until it ran; it
//            stops itself; unref'd.
//   check    ends each loop iteration (on_check: the budget starts anew);
//            always active, unref'd.
//   soon     a one-shot timer finer than uv_timer's milliseconds (a timerfd
//            under a uv_poll): runs on_poll once, after poll_in(ns), where
//            completion is polled for instead of driver callbacks
//            (Config::completion); unref'd.
//
// The handles live in one heap block that frees itself in the last close
// callback, so closing works on a caller's loop that runs later.
#pragma once

#include <array>
#include <cstdint>

#include <uv.h>

#include "uvcl/status.hpp"

namespace uvcl::loop {

class Hooks {
 public:
  virtual void on_prepare() = 0;    // submit windows
  virtual void on_late_work() = 0;  // the same for work issued after on_prepare, in the same iteration
  virtual void on_poll() = 0;     // timer tick or wake-up: collect completions
  virtual void on_check() = 0;    // the loop iteration's end

 protected:
  ~Hooks() = default;
};

class Handles {
 public:
  // Poll period while busy. uv_timer counts milliseconds; callbacks carry
  // the latency-critical completions (docs/architecture.md has the figures).
  static constexpr std::uint64_t kPollMs = 1;

  static Result<Handles*> open(uv_loop_t* loop, Hooks* hooks);
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
  // Busy: the timer runs and keeps the loop alive.
  void set_busy(bool busy);
  bool busy() const { return busy_; }
  // Spinning: the loop does not sleep; on_poll runs every iteration.
  void set_spinning(bool spinning);
  bool spinning() const { return spinning_; }
  // Runs on_poll once, `ns` from now (replacing an earlier poll_in not yet
  // due); soon_pending() until it has run.
  void poll_in(std::uint64_t ns);
  bool soon_pending() const { return soon_pending_; }
  // The prepare step of this iteration has run and work was issued since:
  // on_late_work runs before the loop may block.
  void submit_before_sleep();
  // The token driver callbacks pass to wake().
  std::uintptr_t wake_token() const { return token_; }
  // Unregisters the wake token, closes the handles; `this` is freed once
  // their close callbacks ran.
  void close();

 private:
  Handles() = default;
  ~Handles();  // closes the timerfd: only once every handle is closed
  static void on_close(uv_handle_t* h);
  static constexpr std::size_t kHandles = 7;
  std::array<uv_handle_t*, kHandles> all_handles();  // in the order opened

  uv_prepare_t prepare_{};
  uv_timer_t timer_{};
  uv_async_t async_{};
  uv_idle_t idle_{};
  uv_idle_t again_{};
  uv_check_t check_{};
  uv_poll_t soon_{};
  int soon_fd_ = -1;  // the timerfd under soon_
  bool soon_pending_ = false;
  Hooks* hooks_ = nullptr;
  std::uintptr_t token_ = 0;
  bool busy_ = false;
  bool spinning_ = false;
  int open_handles_ = 0;
};

// Safe from any thread: wakes the loop registered under `token`, if it still
// is. Several wakes before the loop runs coalesce into one on_poll.
void wake(std::uintptr_t token) noexcept;

}  // namespace uvcl::loop
