// watchdog.hpp — ends a test process that hangs, with a message.
//
// A hang inside a blocking call (a map, a teardown clFinish) is out of any
// loop-side timeout's reach: a thread waits for the case to end and, past
// `seconds`, prints what hung and exits the process with status 3, which
// fails the test (or, in a child process, its parent's test).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace uvcl::testing {

class Watchdog {
 public:
  // `report`, if given, is printed with the message: what led to the hang.
  Watchdog(std::string label, double seconds, std::function<std::string()> report = {})
      : label_(std::move(label)), report_(std::move(report)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock lock(mutex_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "WATCHDOG: \"%s\" hung for more than %.0f s\n", label_.c_str(), seconds);
        if (report_) std::fprintf(stderr, "%s", report_().c_str());
        std::fflush(stderr);
        std::_Exit(3);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string label_;
  std::function<std::string()> report_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace uvcl::testing
