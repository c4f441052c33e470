// compiler_process.hpp — one uvcl-compiler child process, started and
// watched through libuv.
//
// PoCL builds inside clBuildProgram on the calling thread, for seconds, and
// a pathological source crashes it; the engine's loop must do neither. So
// the engine builds in a child process (src/compiler/uvcl_compiler.cpp):
// loop::spawn_piped starts it (posix_spawn, not uv_spawn's fork: see
// loop/spawn.hpp), one uv_pipe carries Build frames to its stdin, another
// carries Result frames back from its stdout (compiler/protocol.hpp), a
// uv_timer bounds each build (opencl.compile_timeout_ms) and ends the
// process after it has been idle for opencl.compiler_idle_ms, and a SIGCHLD
// handle (loop::ChildWatch) says how it ended. Nothing here waits: write,
// read, kill and reap are libuv requests and callbacks, and the spawn
// returns once the child has exec'd.
//
// One build at a time per process. The owner hears of each result
// (on_result) and, exactly once, of the end of the process as far as it is
// concerned (on_lost): then it drops its pointer, and the object ends the
// process and frees itself once every handle is closed — after the exit has
// been reaped, so no zombie is left, and a caller's uv_loop_close succeeds.
//
// Handles are unref'd while the owner holds the process: the engine's own
// busy timer keeps the loop turning while a build is in flight. After
// close() the SIGCHLD handle is ref'd, so the loop stays up until the
// killed child is reaped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <uv.h>

#include "compiler/protocol.hpp"
#include "loop/spawn.hpp"
#include "uvcl/status.hpp"

namespace uvcl {

class CompilerProcess {
 public:
  // How a process ended for its owner.
  enum class Lost {
    Unavailable,  // refused the device, or exited before it was ready: build inline instead
    Failed,       // crashed, exited, was killed after the timeout, or broke the protocol
    Idle,         // idle for its idle timeout, or gone while idle: nothing was lost
  };
  class Owner {
   public:
    // The result of the build that build() started; the process is idle again.
    virtual void on_result(CompilerProcess& c, compiler::BuildResult result) = 0;
    // The process is gone for the owner, which must not use `c` again.
    // program: the build it took down (0: none); why: what happened.
    virtual void on_lost(CompilerProcess& c, Lost how, std::uint64_t program, const Error& why) = 0;

   protected:
    ~Owner() = default;
  };
  struct Settings {
    std::string path;               // the uvcl-compiler program
    std::vector<std::string> args;  // after argv[0]
    std::uint64_t timeout_ms = 60000;
    std::uint64_t idle_ms = 10000;
  };

  // Starts the process. An error (the program missing, not executable) is
  // returned at once and the owner never hears of this process.
  static Result<CompilerProcess*> spawn(uv_loop_t* loop, const Settings& settings, Owner* owner);

  // Starts a build; only when !busy(). It is written once the process has
  // said it is ready; the timeout runs from now.
  void build(compiler::BuildRequest request);
  bool busy() const { return program_ != 0; }
  int pid() const { return child_.pid(); }
  // Detaches the owner (no more calls to it) and ends the process: SIGKILL,
  // pipes and timer closed, the SIGCHLD handle closed once the exit is
  // reaped; then the object frees itself.
  void close();

  CompilerProcess(const CompilerProcess&) = delete;
  CompilerProcess& operator=(const CompilerProcess&) = delete;

 private:
  explicit CompilerProcess(Settings settings, Owner* owner) : settings_(std::move(settings)), owner_(owner) {}
  ~CompilerProcess() = default;

  void send_build();
  void on_frame(const compiler::Frame& frame);
  void violation(const std::string& what);
  // Tells the owner (once) and closes.
  void lose(Lost how, const Error& why);
  void start_idle_timer();
  void close_handle(uv_handle_t* h);
  void close_child_handle();
  void handle_closed();  // frees the object after the last one
  void on_exit(const loop::ChildExit& exit);
  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf);
  static void on_timer(uv_timer_t* t);
  static void on_closed(uv_handle_t* h);

  Settings settings_;
  Owner* owner_;
  loop::ChildWatch child_;  // its pid and SIGCHLD handle
  uv_pipe_t to_child_{};    // its stdin
  uv_pipe_t from_child_{};  // its stdout
  uv_timer_t timer_{};
  int open_handles_ = 0;
  bool ready_ = false;    // the Ready frame came
  bool closing_ = false;  // close() ran: the owner is detached
  std::uint64_t program_ = 0;  // the build in flight (0: none)
  std::optional<compiler::BuildRequest> unsent_;  // waiting for Ready
  compiler::FrameReader frames_;
  char read_buffer_[64 * 1024]{};
};

// "SIGSEGV", "SIGABRT", ... ("signal N" for one without a name here).
std::string signal_name(int sig);

}  // namespace uvcl
