// compiler_process.cpp — one uvcl-compiler child process on the loop.
#include "engine/compiler_process.hpp"

#include <csignal>

#include "compiler/wire.hpp"

namespace uvcl {

namespace {

// One uv_write and the bytes it writes, freed by its callback (which libuv
// runs, with UV_ECANCELED, also for a write still queued when the pipe
// closes).
struct WriteReq {
  uv_write_t req{};
  std::string bytes;
};

// A child that dies while the engine writes to it must be an error code
// (EPIPE), not a signal that kills the engine's process. Only the default
// disposition is changed: a program that handles SIGPIPE keeps its handler.
void ignore_sigpipe_once() {
  static const bool done = [] {
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
    return true;
  }();
  (void)done;
}

std::string build_name(std::uint64_t program) { return "program " + std::to_string(program); }

}  // namespace

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    default: return "signal " + std::to_string(sig);
  }
}

Result<CompilerProcess*> CompilerProcess::spawn(uv_loop_t* loop, const Settings& settings, Owner* owner) {
  ignore_sigpipe_once();
  auto* c = new CompilerProcess(settings, owner);
  uv_pipe_init(loop, &c->to_child_, 0);
  uv_pipe_init(loop, &c->from_child_, 0);
  uv_timer_init(loop, &c->timer_);
  c->to_child_.data = c->from_child_.data = c->timer_.data = c;
  c->open_handles_ = 3;

  std::vector<char*> argv;
  argv.push_back(c->settings_.path.data());
  for (std::string& a : c->settings_.args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = c->child_.start(loop, c, [](void* self, const loop::ChildExit& e) {
    static_cast<CompilerProcess*>(self)->on_exit(e);
  });
  if (c->child_.initialised()) ++c->open_handles_;
  const char* what = "uv_signal_start(SIGCHLD)";
  if (rc == 0) {
    what = "posix_spawn";
    rc = loop::spawn_piped(c->settings_.path.c_str(), argv.data(), &c->to_child_, &c->from_child_);
  }
  if (rc < 0) {
    c->owner_ = nullptr;
    c->closing_ = true;
    for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(&c->to_child_), reinterpret_cast<uv_handle_t*>(&c->from_child_),
                           reinterpret_cast<uv_handle_t*>(&c->timer_)})
      c->close_handle(h);
    if (c->child_.initialised()) c->close_child_handle();
    return Error{Status::KernelCompilation, std::string(what) + "(" + settings.path + "): " + uv_strerror(rc)};
  }
  c->child_.watch(rc);
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&c->from_child_),
      [](uv_handle_t* h, std::size_t, uv_buf_t* buf) {
        auto* self = static_cast<CompilerProcess*>(h->data);
        *buf = uv_buf_init(self->read_buffer_, sizeof self->read_buffer_);
      },
      &CompilerProcess::on_read);
  for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(&c->to_child_), reinterpret_cast<uv_handle_t*>(&c->from_child_),
                         reinterpret_cast<uv_handle_t*>(&c->timer_), c->child_.handle()})
    uv_unref(h);
  return c;
}

void CompilerProcess::build(compiler::BuildRequest request) {
  program_ = request.program;
  unsent_ = std::move(request);
  // The timeout counts from here: a process that never gets ready is
  // bounded too.
  uv_timer_start(&timer_, &CompilerProcess::on_timer, settings_.timeout_ms, 0);
  if (ready_) send_build();
}

void CompilerProcess::send_build() {
  auto* w = new WriteReq;
  w->bytes = compiler::encode(*unsent_);
  unsent_.reset();
  uv_buf_t buf = uv_buf_init(w->bytes.data(), static_cast<unsigned>(w->bytes.size()));
  const int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&to_child_), &buf, 1,
                          [](uv_write_t* req, int) { delete reinterpret_cast<WriteReq*>(req); });
  if (rc != 0) {
    delete w;  // the callback is not called when uv_write fails
    lose(Lost::Failed, Error{Status::KernelCompilation, "the OpenCL compiler (pid " + std::to_string(pid()) +
                                                            ") could not be sent " + build_name(program_) + ": " +
                                                            uv_strerror(rc)});
  }
}

void CompilerProcess::on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
  auto* self = static_cast<CompilerProcess*>(s->data);
  if (nread < 0) {
    // End of its output: the exit callback says how it ended.
    uv_read_stop(s);
    return;
  }
  self->frames_.feed(buf->base, static_cast<std::size_t>(nread));
  while (!self->closing_) {
    auto frame = self->frames_.next();
    if (!frame) {
      self->violation(frame.error().message);
      return;
    }
    if (!*frame) return;
    self->on_frame(**frame);
  }
}

void CompilerProcess::on_frame(const compiler::Frame& frame) {
  using compiler::Type;
  switch (frame.type) {
    case Type::Ready:
      if (ready_ || !frame.payload.empty()) return violation("an unexpected Ready frame");
      ready_ = true;
      if (unsent_) send_build();
      else start_idle_timer();
      return;
    case Type::Refused: {
      wire::Reader r(frame.payload);
      std::string why;
      if (!r.str(why) || !r.at_end()) return violation("a Refused frame that does not decode");
      return lose(Lost::Unavailable, Error{Status::KernelCompilation, "uvcl-compiler refused: " + why});
    }
    case Type::Result: {
      auto result = compiler::decode_result(frame.payload);
      if (!result) return violation("a Result frame that does not decode");
      if (!busy() || unsent_ || result->program != program_)
        return violation("a result for program " + std::to_string(result->program) + " while building " +
                         (busy() ? build_name(program_) : std::string("nothing")));
      program_ = 0;
      uv_timer_stop(&timer_);
      owner_->on_result(*this, std::move(*result));
      if (!closing_ && !busy()) start_idle_timer();
      return;
    }
    case Type::Build: return violation("a Build frame (only the engine sends those)");
  }
}

void CompilerProcess::violation(const std::string& what) {
  lose(Lost::Failed, Error{Status::KernelCompilation,
                           "protocol violation by the OpenCL compiler (pid " + std::to_string(pid()) + ")" +
                               (busy() ? " while building " + build_name(program_) : std::string()) + ": " + what +
                               "; it was killed" + (busy() ? "; the source is not built" : "")});
}

void CompilerProcess::start_idle_timer() {
  uv_timer_start(&timer_, &CompilerProcess::on_timer, settings_.idle_ms, 0);
}

void CompilerProcess::on_timer(uv_timer_t* t) {
  auto* self = static_cast<CompilerProcess*>(t->data);
  if (!self->busy()) {
    self->lose(Lost::Idle, Error{Status::KernelCompilation, "idle for opencl.compiler_idle_ms"});
    return;
  }
  self->lose(Lost::Failed,
             Error{Status::KernelCompilation, "the OpenCL compiler took longer than opencl.compile_timeout_ms (" +
                                                  std::to_string(self->settings_.timeout_ms) + " ms) building " +
                                                  build_name(self->program_) +
                                                  ": it was killed; the source is not built"});
}

void CompilerProcess::on_exit(const loop::ChildExit& exit) {
  if (closing_) {
    close_child_handle();
    return;
  }
  const std::string how = exit.unknown  ? "ended (its exit was reaped elsewhere in the process)"
                          : exit.signal ? "crashed (" + signal_name(exit.signal) + ")"
                                        : "exited with status " + std::to_string(exit.status);
  if (!ready_) {
    lose(Lost::Unavailable, Error{Status::KernelCompilation, "uvcl-compiler " + how + " before it was ready"});
  } else if (busy()) {
    lose(Lost::Failed, Error{Status::KernelCompilation, "the OpenCL compiler " + how + " while building " +
                                                        build_name(program_) + "; the source is not built"});
  } else {
    lose(Lost::Idle, Error{Status::KernelCompilation, "uvcl-compiler " + how + " while idle"});
  }
}

void CompilerProcess::lose(Lost how, const Error& why) {
  if (closing_) return;
  Owner* owner = owner_;
  const std::uint64_t program = program_;
  close();
  owner->on_lost(*this, how, program, why);  // `this` lives until its handles' close callbacks
}

void CompilerProcess::close() {
  if (closing_) return;
  closing_ = true;
  owner_ = nullptr;
  if (!child_.reaped()) {
    child_.kill(SIGKILL);
    // Keep the loop up until the child is reaped: no zombie is left, and the
    // handle closes before a caller's uv_loop_close.
    uv_ref(child_.handle());
  }
  close_handle(reinterpret_cast<uv_handle_t*>(&to_child_));
  close_handle(reinterpret_cast<uv_handle_t*>(&from_child_));
  close_handle(reinterpret_cast<uv_handle_t*>(&timer_));
  if (child_.reaped()) close_child_handle();
}

void CompilerProcess::close_handle(uv_handle_t* h) {
  if (!uv_is_closing(h)) uv_close(h, &CompilerProcess::on_closed);
}

// The pipes' and the timer's data is the process; the SIGCHLD handle's is
// its ChildWatch, whose owner is the process.
void CompilerProcess::close_child_handle() {
  uv_handle_t* h = child_.handle();
  if (!uv_is_closing(h))
    uv_close(h, [](uv_handle_t* closed) {
      static_cast<CompilerProcess*>(static_cast<loop::ChildWatch*>(closed->data)->owner())->handle_closed();
    });
}

void CompilerProcess::on_closed(uv_handle_t* h) { static_cast<CompilerProcess*>(h->data)->handle_closed(); }

void CompilerProcess::handle_closed() {
  if (--open_handles_ == 0) delete this;
}

}  // namespace uvcl
