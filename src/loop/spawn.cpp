// spawn.cpp — posix_spawn with piped stdin and stdout and a valid stderr;
// exits seen through SIGCHLD.
#include "loop/spawn.hpp"

#include <cerrno>
#include <csignal>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>  // environ (_GNU_SOURCE)

namespace uvcl::loop {

namespace {

// A pipe whose two ends are close-on-exec and above fd 2, so that placing
// them on the child's fds 0 and 1 never meets an fd that is already there
// (dup2 of an fd onto itself would keep its close-on-exec flag).
int cloexec_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) return -errno;
  for (int i = 0; i < 2; ++i) {
    if (fds[i] > 2) continue;
    const int moved = ::fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
    const int err = errno;
    ::close(fds[i]);
    fds[i] = moved;
    if (moved < 0) {
      ::close(fds[1 - i]);
      return -err;
    }
  }
  return 0;
}

void close_pair(const int fds[2]) {
  ::close(fds[0]);
  ::close(fds[1]);
}

// The caller's stderr as the child's fd 2 will be: a close-on-exec copy
// above fd 2 (the file action's dup2 onto fd 2 clears the flag in the
// child), or -1 where the caller's fd 2 is closed or not open for writing.
// A caller's fd 2 that is itself close-on-exec (Node.js marks it so) is
// still passed on: without a deliberate fd 2, the child's first new
// descriptor would land there and the child's diagnostics with it.
int usable_stderr() {
  const int fd = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return -1;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int spawn_piped(const char* file, char* const argv[], uv_pipe_t* in, uv_pipe_t* out) {
  int to_child[2], from_child[2];
  if (int rc = cloexec_pipe(to_child); rc != 0) return rc;
  if (int rc = cloexec_pipe(from_child); rc != 0) {
    close_pair(to_child);
    return rc;
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
  const int err_fd = usable_stderr();
  if (err_fd >= 0) posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  else posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, file, &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err_fd >= 0) ::close(err_fd);
  ::close(to_child[0]);
  ::close(from_child[1]);
  if (rc != 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    return -rc;
  }
  // uv_pipe_open makes the parent's ends non-blocking; it fails only on an
  // fd it cannot use, which these are not; the child then sees EOF.
  if (int r = uv_pipe_open(in, to_child[1]); r != 0) ::close(to_child[1]);
  if (int r = uv_pipe_open(out, from_child[0]); r != 0) ::close(from_child[0]);
  return pid;
}

int ChildWatch::start(uv_loop_t* loop, void* owner, OnExit on_exit) {
  owner_ = owner;
  on_exit_ = on_exit;
  if (int rc = uv_signal_init(loop, &signal_); rc != 0) return rc;
  initialised_ = true;
  signal_.data = this;
  return uv_signal_start(&signal_, &ChildWatch::on_signal, SIGCHLD);
}

void ChildWatch::kill(int sig) const {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

void ChildWatch::check() {
  if (pid_ <= 0 || reaped_) return;
  int status = 0;
  pid_t got = 0;
  do got = ::waitpid(pid_, &status, WNOHANG);
  while (got < 0 && errno == EINTR);
  if (got == 0) return;  // still running
  ChildExit exit;
  if (got < 0) exit.unknown = true;  // ECHILD: reaped elsewhere
  else if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
  else if (WIFEXITED(status)) exit.status = WEXITSTATUS(status);
  else return;  // stopped or continued: not an end
  reaped_ = true;
  uv_signal_stop(&signal_);
  on_exit_(owner_, exit);
}

void ChildWatch::on_signal(uv_signal_t* s, int) { static_cast<ChildWatch*>(s->data)->check(); }

}  // namespace uvcl::loop
