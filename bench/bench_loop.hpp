// bench_loop.hpp — instruments for the event loop.
//
// LagMeter: a repeating uv_timer whose lateness is the loop's lag. The lag
// of one tick is (interval since the previous tick) - period, as Node's
// monitorEventLoopDelay measures it; negative values (libuv timers run on a
// millisecond clock and can fire early) count as 0.
//
// Probe: times every callback the engine's own libuv handles run (its
// prepare handle, its poll timer and its async wake-up), by swapping the
// callback pointers stored in those handles for timing trampolines. The
// fields are libuv's documented-private `prepare_cb`, `timer_cb` and
// `async_cb` (uv/unix.h); uv_timer_start stores the callback again each
// time the engine restarts its timer, so the prepare trampoline re-wraps it
// every iteration (before the loop can next run timers). Measurement only:
// the engine's behaviour is unchanged. Explicit engine calls made by the
// benchmark are timed with Probe::call().
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <uv.h>

#include "bench_util.hpp"

namespace bench {

class LagMeter {
 public:
  explicit LagMeter(std::uint64_t period_ms = 1) : period_ms_(period_ms) {}
  LagMeter(const LagMeter&) = delete;
  LagMeter& operator=(const LagMeter&) = delete;

  void start(uv_loop_t* loop) {
    uv_timer_init(loop, &timer_);
    timer_.data = this;
    open_ = true;
    prev_ = 0;
    uv_timer_start(&timer_, &LagMeter::on_tick, period_ms_, period_ms_);
  }
  // Stops and closes the timer; the close completes on the loop's next run.
  void stop() {
    if (!open_) return;
    uv_timer_stop(&timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
    open_ = false;
  }
  bool recording = true;  // ticks while false only advance the reference
  std::vector<double> lag_us;
  std::function<void()> on_each;  // called after each tick (for samplers)

 private:
  static void on_tick(uv_timer_t* t) {
    auto* self = static_cast<LagMeter*>(t->data);
    const std::uint64_t now = uv_hrtime();
    if (self->prev_ != 0 && self->recording) {
      const double lag = (static_cast<double>(now - self->prev_) - static_cast<double>(self->period_ms_) * 1e6) / 1e3;
      self->lag_us.push_back(lag > 0 ? lag : 0.0);
    }
    self->prev_ = now;
    if (self->on_each) self->on_each();
  }
  std::uint64_t period_ms_;
  uv_timer_t timer_{};
  std::uint64_t prev_ = 0;
  bool open_ = false;
};

struct CallStat {
  std::uint64_t n = 0;
  std::uint64_t total_ns = 0;
  std::uint64_t max_ns = 0;
  void add(std::uint64_t ns) {
    ++n;
    total_ns += ns;
    if (ns > max_ns) max_ns = ns;
  }
  Json json() const {
    Json j = Json::object();
    j["count"] = n;
    j["total_ms"] = static_cast<double>(total_ns) / 1e6;
    j["max_us"] = static_cast<double>(max_ns) / 1e3;
    j["mean_us"] = n ? static_cast<double>(total_ns) / 1e3 / static_cast<double>(n) : 0.0;
    return j;
  }
};

class Probe {
 public:
  // Wraps the callbacks of every handle now on `loop` (call it right after
  // creating the engine on its own loop, before adding handles of ours).
  static void attach(uv_loop_t* loop) {
    detach();
    uv_walk(
        loop,
        [](uv_handle_t* h, void*) {
          switch (h->type) {
            case UV_PREPARE: {
              auto* p = reinterpret_cast<uv_prepare_t*>(h);
              s().prepare = p;
              s().prepare_cb = p->prepare_cb;
              p->prepare_cb = &Probe::on_prepare;
              break;
            }
            case UV_TIMER:
              // The engine's poll timer is the loop's first: a compiler
              // process's timer comes later (compile_timeout_ms, idle).
              if (s().timer) break;
              s().timer = reinterpret_cast<uv_timer_t*>(h);
              s().timer_cb = nullptr;
              rewrap_timer();
              break;
            case UV_ASYNC: {
              auto* a = reinterpret_cast<uv_async_t*>(h);
              s().async = a;
              s().async_cb = a->async_cb;
              a->async_cb = &Probe::on_async;
              break;
            }
            default: break;
          }
        },
        nullptr);
  }
  // Restores the engine's callbacks (before the engine is destroyed).
  static void detach() {
    State& st = s();
    if (st.prepare && st.prepare_cb) st.prepare->prepare_cb = st.prepare_cb;
    if (st.async && st.async_cb) st.async->async_cb = st.async_cb;
    if (st.timer && st.timer_cb && st.timer->timer_cb == &Probe::on_timer) st.timer->timer_cb = st.timer_cb;
    st.prepare = nullptr;
    st.timer = nullptr;
    st.async = nullptr;
    st.prepare_cb = nullptr;
    st.timer_cb = nullptr;
    st.async_cb = nullptr;
  }
  static void reset() {
    s().prepare_stat = {};
    s().timer_stat = {};
    s().async_stat = {};
    s().calls.clear();
    s().engine_only_max_ns = 0;
    s().user_total_ns = 0;
  }
  // Times one explicit engine call made by the benchmark.
  template <class F>
  static auto call(const char* name, F&& f) {
    const std::uint64_t t0 = uv_hrtime();
    struct Done {
      const char* name;
      std::uint64_t t0;
      ~Done() {
        s().calls[name].add(uv_hrtime() - t0);
        rewrap_timer();
      }
    } done{name, t0};
    return f();
  }
  // The longest time the loop spent inside one engine callback or call.
  static double max_us() {
    std::uint64_t m = std::max({s().prepare_stat.max_ns, s().timer_stat.max_ns, s().async_stat.max_ns});
    for (const auto& [name, st] : s().calls) m = std::max(m, st.max_ns);
    return static_cast<double>(m) / 1e3;
  }
  static double max_callback_us() {
    return static_cast<double>(std::max({s().prepare_stat.max_ns, s().timer_stat.max_ns, s().async_stat.max_ns})) /
           1e3;
  }
  // Time spent in the benchmark's own code inside engine callbacks (a user
  // callback issuing new work): subtracted for the engine-only figure.
  struct User {
    std::uint64_t t0 = uv_hrtime();
    ~User() { s().user_ns += uv_hrtime() - t0; }
  };
  static double max_engine_only_us() { return static_cast<double>(s().engine_only_max_ns) / 1e3; }
  static double user_total_ms() { return static_cast<double>(s().user_total_ns) / 1e6; }
  static std::uint64_t callbacks() { return s().prepare_stat.n + s().timer_stat.n + s().async_stat.n; }
  static std::uint64_t wakeups() { return s().timer_stat.n + s().async_stat.n; }
  static Json json() {
    Json j = Json::object();
    j["prepare"] = s().prepare_stat.json();
    j["poll_timer"] = s().timer_stat.json();
    j["async"] = s().async_stat.json();
    Json calls = Json::object();
    for (const auto& [name, st] : s().calls) calls[name] = st.json();
    j["calls"] = std::move(calls);
    j["max_us"] = max_us();
    j["max_callback_us"] = max_callback_us();
    j["max_engine_only_us"] = max_engine_only_us();
    j["user_code_total_ms"] = user_total_ms();
    return j;
  }

 private:
  struct State {
    uv_prepare_t* prepare = nullptr;
    uv_prepare_cb prepare_cb = nullptr;
    uv_timer_t* timer = nullptr;
    uv_timer_cb timer_cb = nullptr;
    uv_async_t* async = nullptr;
    uv_async_cb async_cb = nullptr;
    CallStat prepare_stat, timer_stat, async_stat;
    std::map<std::string, CallStat> calls;
    std::uint64_t user_ns = 0;  // running total, read around each callback
    std::uint64_t engine_only_max_ns = 0, user_total_ns = 0;
  };
  // Times one callback: total, and total minus the user code inside it.
  template <class F>
  static std::uint64_t timed(F&& f) {
    const std::uint64_t u0 = s().user_ns;
    const std::uint64_t t0 = uv_hrtime();
    f();
    const std::uint64_t dt = uv_hrtime() - t0;
    const std::uint64_t user = s().user_ns - u0;
    s().user_total_ns += user;
    const std::uint64_t own = dt > user ? dt - user : 0;
    if (own > s().engine_only_max_ns) s().engine_only_max_ns = own;
    return dt;
  }
  static State& s() {
    static State st;
    return st;
  }
  static void rewrap_timer() {
    State& st = s();
    if (st.timer && st.timer->timer_cb != nullptr && st.timer->timer_cb != &Probe::on_timer) {
      st.timer_cb = st.timer->timer_cb;
      st.timer->timer_cb = &Probe::on_timer;
    }
  }
  static void on_prepare(uv_prepare_t* h) {
    s().prepare_stat.add(timed([&] { s().prepare_cb(h); }));
    rewrap_timer();
  }
  static void on_timer(uv_timer_t* h) {
    s().timer_stat.add(timed([&] {
      if (s().timer_cb) s().timer_cb(h);
    }));
    rewrap_timer();
  }
  static void on_async(uv_async_t* h) {
    s().async_stat.add(timed([&] { s().async_cb(h); }));
    rewrap_timer();
  }
};

}  // namespace bench
