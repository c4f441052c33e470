#include "loop/handles.hpp"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <mutex>
#include <string>
#include <unordered_map>

namespace uvcl::loop {
namespace {

// Driver threads find the async handle through this registry, so a callback
// that fires after the engine is gone finds nothing instead of freed memory.
struct WakeRegistry {
  std::mutex mutex;
  std::unordered_map<std::uintptr_t, uv_async_t*> asyncs;
  std::uintptr_t next = 1;
};
WakeRegistry& registry() {
  static auto* r = new WakeRegistry;  // never destroyed: callbacks may outlive statics
  return *r;
}

Error uv_error(const char* call, int rc) {
  return Error{Status::Initialization, std::string(call) + ": " + uv_strerror(rc)};
}

}  // namespace

void wake(std::uintptr_t token) noexcept {
  WakeRegistry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.asyncs.find(token);
  if (it != r.asyncs.end()) uv_async_send(it->second);
}

Result<Handles*> Handles::open(uv_loop_t* loop, Hooks* hooks) {
  auto* h = new Handles;
  h->hooks_ = hooks;
  // In the order close() closes them: a failure closes those opened so far.
  const char* failed = nullptr;
  int rc = 0;
  auto opened = [&](const char* call, int r, void* handle) {
    if (r != 0) {
      failed = call;
      rc = r;
      return false;
    }
    static_cast<uv_handle_t*>(handle)->data = h;
    ++h->open_handles_;
    return true;
  };
  auto on_async = [](uv_async_t* a) { static_cast<Handles*>(a->data)->hooks_->on_poll(); };
  const bool all = opened("uv_prepare_init", uv_prepare_init(loop, &h->prepare_), &h->prepare_) &&
                   opened("uv_timer_init", uv_timer_init(loop, &h->timer_), &h->timer_) &&
                   opened("uv_async_init", uv_async_init(loop, &h->async_, on_async), &h->async_) &&
                   opened("uv_idle_init", uv_idle_init(loop, &h->idle_), &h->idle_) &&
                   opened("uv_idle_init", uv_idle_init(loop, &h->again_), &h->again_) &&
                   opened("uv_check_init", uv_check_init(loop, &h->check_), &h->check_);
  if (all) {
    h->soon_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (h->soon_fd_ < 0) {
      failed = "timerfd_create";
      rc = uv_translate_sys_error(errno);
    } else {
      opened("uv_poll_init", uv_poll_init(loop, &h->soon_, h->soon_fd_), &h->soon_);
    }
  }
  if (failed) {
    Error e = uv_error(failed, rc);
    h->close();
    return e;
  }
  uv_prepare_start(&h->prepare_, [](uv_prepare_t* p) { static_cast<Handles*>(p->data)->hooks_->on_prepare(); });
  uv_check_start(&h->check_, [](uv_check_t* c) { static_cast<Handles*>(c->data)->hooks_->on_check(); });
  rc = uv_poll_start(&h->soon_, UV_READABLE, [](uv_poll_t* p, int, int) {
    auto* self = static_cast<Handles*>(p->data);
    std::uint64_t expirations = 0;
    if (::read(self->soon_fd_, &expirations, sizeof expirations) != sizeof expirations) return;  // not due (re-armed)
    self->soon_pending_ = false;
    self->hooks_->on_poll();
  });
  if (rc != 0) {
    Error e = uv_error("uv_poll_start(timerfd)", rc);
    h->close();
    return e;
  }
  for (uv_handle_t* u : h->all_handles()) uv_unref(u);
  WakeRegistry& r = registry();
  std::lock_guard lock(r.mutex);
  h->token_ = r.next++;
  r.asyncs.emplace(h->token_, &h->async_);
  return h;
}

std::array<uv_handle_t*, Handles::kHandles> Handles::all_handles() {
  return {reinterpret_cast<uv_handle_t*>(&prepare_), reinterpret_cast<uv_handle_t*>(&timer_),
          reinterpret_cast<uv_handle_t*>(&async_),   reinterpret_cast<uv_handle_t*>(&idle_),
          reinterpret_cast<uv_handle_t*>(&again_),   reinterpret_cast<uv_handle_t*>(&check_),
          reinterpret_cast<uv_handle_t*>(&soon_)};
}

void Handles::set_busy(bool busy) {
  if (busy == busy_) return;
  busy_ = busy;
  auto* t = reinterpret_cast<uv_handle_t*>(&timer_);
  if (busy) {
    uv_timer_start(&timer_, [](uv_timer_t* t) { static_cast<Handles*>(t->data)->hooks_->on_poll(); }, kPollMs,
                   kPollMs);
    uv_ref(t);
  } else {
    uv_timer_stop(&timer_);
    uv_unref(t);
  }
}

void Handles::set_spinning(bool spinning) {
  if (spinning == spinning_) return;
  spinning_ = spinning;
  if (spinning) uv_idle_start(&idle_, [](uv_idle_t* i) { static_cast<Handles*>(i->data)->hooks_->on_poll(); });
  else uv_idle_stop(&idle_);
}

void Handles::submit_before_sleep() {
  uv_idle_start(&again_, [](uv_idle_t* i) {  // no-op while started
    uv_idle_stop(i);
    static_cast<Handles*>(i->data)->hooks_->on_late_work();
  });
}

void Handles::poll_in(std::uint64_t ns) {
  itimerspec when{};
  ns = std::max<std::uint64_t>(ns, 1);  // 0 would disarm it
  when.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
  when.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
  soon_pending_ = ::timerfd_settime(soon_fd_, 0, &when, nullptr) == 0;
}

void Handles::close() {
  if (token_ != 0) {
    WakeRegistry& r = registry();
    std::lock_guard lock(r.mutex);
    r.asyncs.erase(token_);
    token_ = 0;
  }
  hooks_ = nullptr;
  if (open_handles_ == 0) {
    delete this;
    return;
  }
  const auto all = all_handles();  // in the order opened: the first open_handles_ of them are
  for (int i = 0; i < open_handles_; ++i) uv_close(all[static_cast<std::size_t>(i)], &Handles::on_close);
}

void Handles::on_close(uv_handle_t* h) {
  auto* self = static_cast<Handles*>(h->data);
  if (--self->open_handles_ == 0) delete self;
}

Handles::~Handles() {
  if (soon_fd_ >= 0) ::close(soon_fd_);
}

}  // namespace uvcl::loop
