// Tests that need another environment than the suite's run in a
// child process: this binary again, on the tests a filter names.
//
// PoCL reads POCL_DEVICES once, when it initialises — long before a test of
// this process runs — so two-device cases run in a child spawned with
// POCL_DEVICES="pthread pthread". The child's tests are DISABLED_ (the
// parent's run skips them) and check kChildMarker (a run that enables
// disabled tests by hand skips them too).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "watchdog.hpp"

extern char** environ;

namespace uvcl::testing::child_process {

inline constexpr const char* kChildMarker = "UVCL_TEST_CHILD";

struct Child {
  int exit_code = -1;  // -1: did not exit normally (a signal, or killed after the timeout)
  std::string output;  // stdout and stderr together
};

// Runs this binary on the tests `filter` selects (disabled ones included)
// with `env` added. GTEST_* variables are dropped so that the parent's
// filter, sharding or output file cannot filter the child's tests away. A
// child still running after `timeout` is killed: a hung child must not hang
// the suite.
inline Child spawn_child(const std::string& filter, const std::vector<std::pair<std::string, std::string>>& env,
                         std::chrono::seconds timeout) {
  Child result;
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    result.output = "readlink(/proc/self/exe) failed";
    return result;
  }
  self[len] = '\0';
  std::vector<std::string> strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('='));
    bool replaced = key == kChildMarker || key.rfind("GTEST_", 0) == 0;
    for (const auto& [k, v] : env) replaced = replaced || k == key;
    if (!replaced) strings.push_back(entry);
  }
  for (const auto& [k, v] : env) strings.push_back(k + "=" + v);
  strings.push_back(std::string(kChildMarker) + "=1");
  std::vector<char*> envp;
  for (std::string& s : strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string filter_arg = "--gtest_filter=" + filter;
  std::string disabled = "--gtest_also_run_disabled_tests";
  std::vector<char*> argv = {self, filter_arg.data(), disabled.data(), nullptr};

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.output = "pipe2 failed";
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, self, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    result.output = std::string("posix_spawn failed: ") + std::strerror(rc);
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  char chunk[4096];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) {
    ::kill(pid, SIGKILL);
    result.output += "\n[child killed after " + std::to_string(timeout.count()) + " s]";
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!timed_out && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (!timed_out && WIFSIGNALED(status)) result.output += "\n[child killed by signal " + std::to_string(WTERMSIG(status)) + "]";
  return result;
}

using uvcl::testing::Watchdog;  // ../watchdog.hpp

// Empty when the child ran `test` (Suite.DISABLED_Name) and it passed;
// else what to show: the test, the exit code and the child's output.
inline std::string child_test_failure(const Child& c, const std::string& test) {
  if (c.output.find("[       OK ] " + test) != std::string::npos) return {};
  return "child test " + test + " did not pass (exit " + std::to_string(c.exit_code) + "):\n" + c.output;
}

}  // namespace uvcl::testing::child_process
