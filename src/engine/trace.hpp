// trace.hpp — a Chrome trace-event recording of what the engine did.
//
// One track per device queue (pid = device, tid = queue; process_name and
// thread_name metadata name both), each command with
// its device start/end from profiling events (opencl.profile: true; without
// it, host submit and observed completion), cross-queue waits as flow
// arrows, and the host-side window submissions on a "host" track. Opens in
// Perfetto and chrome://tracing.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace uvcl {

struct TraceCommand {
  std::uint64_t id = 0;
  std::uint32_t device = 0, queue = 0;
  std::string name;  // kernel name or transfer kind
  std::uint64_t bytes = 0;
  std::uint64_t start_ns = 0, end_ns = 0;  // host time base
  std::vector<std::uint64_t> waits;
};

struct TraceHost {
  std::string name;
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint64_t commands = 0;
};

class Trace {
 public:
  void command(TraceCommand c) { commands_.push_back(std::move(c)); }
  void host(TraceHost h) { host_.push_back(std::move(h)); }
  // Device-to-host clock offset, calibrated from the first command.
  bool has_offset(std::uint32_t device) const { return offsets_.count(device) != 0; }
  void set_offset(std::uint32_t device, std::int64_t host_minus_device) { offsets_[device] = host_minus_device; }
  std::int64_t offset(std::uint32_t device) const { return offsets_.at(device); }
  std::string json(const std::vector<std::string>& device_names) const;
  void clear() {
    commands_.clear();
    host_.clear();
  }

 private:
  std::vector<TraceCommand> commands_;
  std::vector<TraceHost> host_;
  std::unordered_map<std::uint32_t, std::int64_t> offsets_;
};

}  // namespace uvcl
