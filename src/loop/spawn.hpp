// spawn.hpp — start a child program with pipes on its stdin and stdout,
// without copying the caller's address space.
//
// libuv's uv_spawn (1.44) forks before exec; the fork copies the page
// tables of the whole process, and a process with a GPU driver loaded maps
// enough that the copy holds the loop for milliseconds. posix_spawn (glibc:
// clone with CLONE_VM | CLONE_VFORK) copies nothing. The child's exit is
// seen through SIGCHLD on a uv_signal handle (ChildWatch below), so the
// child is still driven entirely from the loop.
//
// Contract:
// - spawn_piped returns the child's pid, or a negative errno when nothing
//   was started (the program missing or not executable is such an error:
//   glibc's posix_spawn reports a failed exec); `in` and `out` are then left
//   unopened.
// - The child starts with every signal at its default disposition and none
//   blocked, whatever the caller ignores (SIGPIPE) or blocks.
// - Only fds 0, 1 and 2 are passed on deliberately; descriptors the caller
//   opened without O_CLOEXEC are inherited, as with uv_spawn.
// - The child starts with fds 0, 1 and 2 open whatever the caller's are:
//   its fd 2 is the caller's fd 2 where that is open for writing, even when
//   it is close-on-exec (Node.js marks it so), else /dev/null. A closed fd 2
//   would be taken by the child's first new descriptor, and what the child
//   writes to stderr would go there.
// - A ChildWatch is started before the spawn, so no exit is missed; it
//   reaps only its own pid (waitpid of that pid), never another child.
#pragma once

#include <uv.h>

namespace uvcl::loop {

// Starts `file` (searched in PATH when it has no slash) with `argv`
// (argv[0] first, null-terminated) and the caller's environment: its stdin
// reads from `in`, its stdout writes to `out` (both uv_pipe_init-ed, not yet
// opened; opened here on the parent's ends), its stderr is the caller's (or
// /dev/null: see the contract). The caller's fds 0-2 may be anything:
// closed, close-on-exec, sockets.
int spawn_piped(const char* file, char* const argv[], uv_pipe_t* in, uv_pipe_t* out);

// How a child ended.
struct ChildExit {
  int status = 0;  // the exit status when `signal` is 0
  int signal = 0;  // the signal that ended it (0: it exited)
  bool unknown = false;  // reaped by someone else (a waitpid(-1) elsewhere): status and signal unknown
};

// The end of one child, heard from the loop: a uv_signal handle on SIGCHLD
// that reaps `pid` when it has exited. Every SIGCHLD of the process wakes
// it; waitpid(pid, WNOHANG) says whether the signal was this child's.
class ChildWatch {
 public:
  using OnExit = void (*)(void* owner, const ChildExit& exit);
  // Initialises and starts the handle, before the spawn (see the contract).
  // A negative libuv error when it cannot; the handle must be closed when
  // initialised(), even then. The handle's data is this ChildWatch.
  int start(uv_loop_t* loop, void* owner, OnExit on_exit);
  void* owner() const { return owner_; }
  bool initialised() const { return initialised_; }
  // The pid to reap, once spawned. Its exit is heard from the loop, never
  // during this call: the SIGCHLD callback runs in a later loop step.
  void watch(int pid) { pid_ = pid; }
  // Whether the child has been reaped (on_exit ran).
  bool reaped() const { return reaped_; }
  // Sends `sig` unless the child has been reaped (its pid may be reused).
  void kill(int sig) const;
  uv_handle_t* handle() { return reinterpret_cast<uv_handle_t*>(&signal_); }
  int pid() const { return pid_; }

 private:
  // Reaps the child if it has exited; runs on_exit then.
  void check();
  static void on_signal(uv_signal_t* s, int signum);
  uv_signal_t signal_{};
  void* owner_ = nullptr;
  OnExit on_exit_ = nullptr;
  int pid_ = 0;
  bool initialised_ = false;
  bool reaped_ = false;
};

}  // namespace uvcl::loop
