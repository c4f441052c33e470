// spawn_test.cpp — loop::spawn_piped and loop::ChildWatch on a plain libuv
// loop: no OpenCL. Each case runs its loop under a watchdog.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loop/spawn.hpp"
#include "../watchdog.hpp"

namespace spawn_test {

using uvcl::loop::ChildExit;
using uvcl::loop::ChildWatch;
using uvcl::loop::spawn_piped;

// One child on its own loop: its stdin and stdout piped, its exit watched,
// everything it writes collected.
struct Child {
  uv_loop_t loop{};
  uv_pipe_t in{}, out{};
  ChildWatch watch;
  std::optional<ChildExit> exit;
  std::string output;
  bool out_closed = false;
  int pid = 0;

  Child() {
    uv_loop_init(&loop);
    uv_pipe_init(&loop, &in, 0);
    uv_pipe_init(&loop, &out, 0);
    in.data = out.data = this;
  }
  // The result of spawn_piped: a pid, or a negative errno.
  int start(std::vector<std::string> args) {
    EXPECT_EQ(watch.start(&loop, this, [](void* self, const ChildExit& e) { static_cast<Child*>(self)->exit = e; }), 0);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = spawn_piped(argv[0], argv.data(), &in, &out);
    if (rc > 0) {
      pid = rc;
      watch.watch(rc);
      uv_read_start(
          reinterpret_cast<uv_stream_t*>(&out),
          [](uv_handle_t*, std::size_t, uv_buf_t* buf) {
            static char block[4096];
            *buf = uv_buf_init(block, sizeof block);
          },
          [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
            auto* self = static_cast<Child*>(s->data);
            if (n < 0) {
              self->out_closed = true;
              uv_read_stop(s);
              return;
            }
            self->output.append(buf->base, static_cast<std::size_t>(n));
          });
    }
    return rc;
  }
  void close_stdin() { uv_close(reinterpret_cast<uv_handle_t*>(&in), nullptr); }
  // Runs the loop until the child is reaped and its stdout closed.
  void run_to_exit() {
    uvcl::testing::Watchdog dog("spawn_test: a child's exit", 20);
    while (!(exit && out_closed)) uv_run(&loop, UV_RUN_ONCE);
  }
  ~Child() {
    for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(&in), reinterpret_cast<uv_handle_t*>(&out)})
      if (!uv_is_closing(h)) uv_close(h, nullptr);
    if (watch.initialised()) uv_close(watch.handle(), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop), 0);
  }
};

TEST(Spawn, StdinAndStdoutArePipedAndTheExitIsReaped) {
  Child c;
  ASSERT_GT(c.start({"cat"}), 0);
  std::string text = "through the pipes";
  uv_buf_t buf = uv_buf_init(text.data(), static_cast<unsigned>(text.size()));
  ASSERT_EQ(uv_try_write(reinterpret_cast<uv_stream_t*>(&c.in), &buf, 1), static_cast<int>(text.size()));
  c.close_stdin();
  c.run_to_exit();
  EXPECT_EQ(c.output, text);
  EXPECT_EQ(c.exit->status, 0);
  EXPECT_EQ(c.exit->signal, 0);
  EXPECT_FALSE(c.exit->unknown);
  EXPECT_TRUE(c.watch.reaped());
  EXPECT_EQ(::waitpid(c.pid, nullptr, WNOHANG), -1) << "no zombie is left";
}

TEST(Spawn, ExitStatusAndSignalAreReported) {
  {
    Child c;
    ASSERT_GT(c.start({"sh", "-c", "exit 3"}), 0);
    c.run_to_exit();
    EXPECT_EQ(c.exit->status, 3);
    EXPECT_EQ(c.exit->signal, 0);
  }
  {
    Child c;
    ASSERT_GT(c.start({"sh", "-c", "kill -SEGV $$"}), 0);
    c.run_to_exit();
    EXPECT_EQ(c.exit->signal, SIGSEGV);
  }
}

TEST(Spawn, AMissingProgramIsAnErrorAndStartsNothing) {
  Child c;
  EXPECT_EQ(c.start({"/nonexistent/uvcl-compiler"}), -ENOENT);
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1) << "a child was left behind";
}

// A signal mask line of /proc/PID/status ("SigIgn:\t0000000000001000").
std::uint64_t status_mask(const std::string& status, const std::string& name) {
  const std::size_t at = status.find("\n" + name + ":\t");
  if (at == std::string::npos) {
    ADD_FAILURE() << name << " not found";
    return ~std::uint64_t{0};
  }
  return std::stoull(status.substr(at + name.size() + 3, 16), nullptr, 16);
}

// The caller ignores SIGPIPE (the engine does, for its pipes) and blocks a
// signal: the child must start with neither.
TEST(Spawn, TheChildStartsWithDefaultSignalsAndNoneBlocked) {
  struct sigaction old_pipe {};
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGPIPE, &ignore, &old_pipe), 0);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);
  Child c;
  const int pid = c.start({"cat", "/proc/self/status"});
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGPIPE, &old_pipe, nullptr);
  ASSERT_GT(pid, 0);
  c.close_stdin();
  c.run_to_exit();
  // Signals 1..31; glibc's posix_spawn leaves its own two internal signals
  // (32, 33) ignored in the child, which its libc takes back when it uses them.
  EXPECT_EQ(status_mask(c.output, "SigIgn") & 0x7fffffffu, 0u) << c.output;
  EXPECT_EQ(status_mask(c.output, "SigBlk") & 0x7fffffffu, 0u) << c.output;
}

// The child always starts with a usable fd 2, whatever the caller's is:
// the caller's own where it is open for writing (also when close-on-exec,
// as Node.js leaves it), else /dev/null. Without one, the child's first new
// descriptor lands on fd 2 and its diagnostics go there.
TEST(Spawn, TheChildAlwaysHasAStderr) {
  for (const std::string mode : {"cloexec", "closed", "read-only"}) {
    SCOPED_TRACE(mode);
    Child c;
    // The loop's signal pipe is made now, while fd 2 is open: libuv asserts
    // that it never closes one of fds 0-2.
    uv_signal_t warm{};
    uv_signal_init(&c.loop, &warm);
    uv_close(reinterpret_cast<uv_handle_t*>(&warm), nullptr);
    uv_run(&c.loop, UV_RUN_NOWAIT);
    const int saved = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 10);
    ASSERT_GE(saved, 0);
    const std::string file = ::testing::TempDir() + "spawn_test_stderr_" + std::to_string(::getpid());
    if (mode == "cloexec") {
      const int f = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      ::dup3(f, STDERR_FILENO, O_CLOEXEC);
      ::close(f);
    } else if (mode == "closed") {
      ::close(STDERR_FILENO);
    } else {
      const int ro = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
      ::dup2(ro, STDERR_FILENO);
      ::close(ro);
    }
    const int pid = c.start({"sh", "-c", "readlink /proc/$$/fd/2 && echo to-stderr >&2 && echo written"});
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    ASSERT_GT(pid, 0);
    c.close_stdin();
    c.run_to_exit();
    EXPECT_EQ(c.output, (mode == "cloexec" ? file : std::string("/dev/null")) + "\nwritten\n");
    EXPECT_EQ(c.exit->status, 0);
    if (mode == "cloexec") {
      std::ifstream in(file);
      EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), "to-stderr\n");
      ::unlink(file.c_str());
    }
  }
}

TEST(Spawn, EachWatchReapsOnlyItsOwnChild) {
  // `other` has exited (a zombie, not reaped: WNOWAIT) before `first` runs
  // its loop, so a watch reaping any child would take it.
  Child other, first;
  ASSERT_GT(other.start({"sh", "-c", "exit 7"}), 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(other.pid), &info, WEXITED | WNOWAIT), 0);
  ASSERT_GT(first.start({"true"}), 0);
  first.run_to_exit();
  EXPECT_EQ(first.exit->status, 0);
  EXPECT_FALSE(first.exit->unknown);
  EXPECT_FALSE(other.exit);
  other.run_to_exit();
  EXPECT_FALSE(other.exit->unknown) << "the other child was reaped by the wrong watch";
  EXPECT_EQ(other.exit->status, 7);
}

TEST(Spawn, KillEndsTheChildWithThatSignal) {
  Child c;
  ASSERT_GT(c.start({"sleep", "30"}), 0);
  uv_run(&c.loop, UV_RUN_NOWAIT);
  EXPECT_FALSE(c.exit);
  c.watch.kill(SIGKILL);
  c.run_to_exit();
  EXPECT_EQ(c.exit->signal, SIGKILL);
}

TEST(Spawn, AnExitReapedElsewhereIsReportedAsUnknown) {
  Child c;
  ASSERT_GT(c.start({"true"}), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(c.pid, &status, 0), c.pid);  // someone else's waitpid
  c.run_to_exit();
  EXPECT_TRUE(c.exit->unknown);
}

}  // namespace spawn_test
