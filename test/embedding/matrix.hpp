// The lifecycle matrix's axes, shared by its C++ and C API runs: the kinds of
// callback a host gets, the actions it may take inside one, and how a case
// turns the host's loop.
#pragma once

#include <uv.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

namespace uvcl::embedding::matrix {

enum class Trigger { Build, LaunchDone, Read, Drain, Listener, DeviceLost, Closed, HostTimer };
enum class Action {
  Destroy,
  Close,
  ReleaseBuffer,
  ReleaseKernel,
  ReleaseProgram,
  ReleaseHostMemory,
  Submit,
  Drain,
  ReplaceListener,
  Blocking
};
using Case = std::tuple<Trigger, Action>;

inline constexpr std::array kTriggers = {Trigger::Build,    Trigger::LaunchDone, Trigger::Read,   Trigger::Drain,
                                         Trigger::Listener, Trigger::DeviceLost, Trigger::Closed, Trigger::HostTimer};
inline constexpr std::array kActions = {Action::Destroy,        Action::Close,          Action::ReleaseBuffer,
                                        Action::ReleaseKernel,  Action::ReleaseProgram, Action::ReleaseHostMemory,
                                        Action::Submit,         Action::Drain,          Action::ReplaceListener,
                                        Action::Blocking};

inline const char* name(Trigger t) {
  constexpr const char* kNames[] = {"Build",    "LaunchDone", "Read",   "Drain",
                                    "Listener", "DeviceLost", "Closed", "HostTimer"};
  return kNames[static_cast<int>(t)];
}
inline const char* name(Action a) {
  constexpr const char* kNames[] = {"Destroy",        "Close",           "ReleaseBuffer", "ReleaseKernel",
                                    "ReleaseProgram", "ReleaseHostMemory", "Submit",      "Drain",
                                    "ReplaceListener", "Blocking"};
  return kNames[static_cast<int>(a)];
}

inline auto all_cases() { return ::testing::Combine(::testing::ValuesIn(kTriggers), ::testing::ValuesIn(kActions)); }
inline std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(name(std::get<1>(info.param))) + "From" + name(std::get<0>(info.param));
}
inline std::string describe(const Case& c) {
  return std::string(name(std::get<1>(c))) + " from " + name(std::get<0>(c));
}

// A callback handed to the engine: it must run once if the call that took
// it was accepted, never if it was refused.
struct Probe {
  std::string what;
  int expected = 0;
  int ran = 0;
};

// Turns the host's loop as a host would (UV_RUN_ONCE, a timer so that no
// turn sleeps past the deadline) until settled() or 10 s; then `finish`
// (destroy what is left: its cancelled callbacks run) and the turns that
// close the handles.
inline void turn_loop(uv_loop_t* loop, const std::function<bool()>& settled, const std::function<void()>& finish) {
  uv_timer_t tick;
  uv_timer_init(loop, &tick);
  uv_timer_start(&tick, [](uv_timer_t*) {}, 2, 2);
  const std::uint64_t deadline = uv_hrtime() + 10'000'000'000ull;
  while (!settled() && uv_hrtime() < deadline) uv_run(loop, UV_RUN_ONCE);
  finish();
  uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
  for (int i = 0; i < 8; ++i) uv_run(loop, UV_RUN_NOWAIT);
}

}  // namespace uvcl::embedding::matrix
