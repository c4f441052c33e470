#include "engine/trace.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "json/text.hpp"

namespace uvcl {

namespace {

std::string us(std::uint64_t ns, std::uint64_t origin) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns - std::min(ns, origin)) / 1000.0);
  return buf;
}

}  // namespace

std::string Trace::json(const std::vector<std::string>& device_names) const {
  std::uint64_t origin = UINT64_MAX;
  for (const TraceCommand& c : commands_) origin = std::min(origin, c.start_ns);
  for (const TraceHost& h : host_) origin = std::min(origin, h.start_ns);
  if (origin == UINT64_MAX) origin = 0;
  constexpr int kHostPid = 1000;
  std::vector<std::string> ev;
  for (std::size_t d = 0; d < device_names.size(); ++d)
    ev.push_back("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(d) +
                 ",\"args\":{\"name\":" + json::quote("device " + std::to_string(d) + ": " + device_names[d]) + "}}");
  ev.push_back("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(kHostPid) +
               ",\"args\":{\"name\":\"host (loop thread)\"}}");
  // A name for every lane (thread_name metadata): "queue N" on a device,
  // the host-completed commands (cross-device writes, user events) on their
  // own lane, the window submissions on the host's.
  std::set<std::pair<std::uint32_t, std::uint32_t>> lanes;
  for (const TraceCommand& c : commands_) lanes.emplace(c.device, c.queue);
  for (const auto& [device, queue] : lanes) {
    const bool host_side = queue == 0xffffffffu;
    ev.push_back("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(device) +
                 ",\"tid\":" + (host_side ? "9999" : std::to_string(queue)) + ",\"args\":{\"name\":" +
                 json::quote(host_side ? "host-completed (cross-device writes, user events)"
                                       : "queue " + std::to_string(queue)) +
                 "}}");
  }
  if (!host_.empty())
    ev.push_back("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(kHostPid) +
                 ",\"tid\":0,\"args\":{\"name\":\"window submissions\"}}");
  std::unordered_map<std::uint64_t, const TraceCommand*> by_id;
  for (const TraceCommand& c : commands_) by_id[c.id] = &c;
  for (const TraceCommand& c : commands_) {
    const std::string track = c.queue == 0xffffffffu ? "9999" : std::to_string(c.queue);
    ev.push_back("{\"ph\":\"X\",\"name\":" + json::quote(c.name) + ",\"cat\":\"command\",\"pid\":" +
                 std::to_string(c.device) + ",\"tid\":" + track + ",\"ts\":" + us(c.start_ns, origin) +
                 ",\"dur\":" + us(c.end_ns, c.start_ns) + ",\"args\":{\"id\":" + std::to_string(c.id) +
                 ",\"bytes\":" + std::to_string(c.bytes) + "}}");
    for (std::uint64_t w : c.waits) {
      auto it = by_id.find(w);
      if (it == by_id.end()) continue;
      const TraceCommand& from = *it->second;
      const std::string flow = std::to_string(w) + "0" + std::to_string(c.id);
      const std::string from_track = from.queue == 0xffffffffu ? "9999" : std::to_string(from.queue);
      ev.push_back("{\"ph\":\"s\",\"name\":\"wait\",\"cat\":\"wait\",\"id\":" + flow + ",\"pid\":" +
                   std::to_string(from.device) + ",\"tid\":" + from_track + ",\"ts\":" +
                   us(from.end_ns > 0 ? from.end_ns - 1 : 0, origin) + "}");
      ev.push_back("{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"wait\",\"cat\":\"wait\",\"id\":" + flow + ",\"pid\":" +
                   std::to_string(c.device) + ",\"tid\":" + track + ",\"ts\":" + us(c.start_ns, origin) + "}");
    }
  }
  for (const TraceHost& h : host_)
    ev.push_back("{\"ph\":\"X\",\"name\":" + json::quote(h.name) + ",\"cat\":\"host\",\"pid\":" +
                 std::to_string(kHostPid) + ",\"tid\":0,\"ts\":" + us(h.start_ns, origin) + ",\"dur\":" +
                 us(h.end_ns, h.start_ns) + ",\"args\":{\"commands\":" + std::to_string(h.commands) + "}}");
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  for (std::size_t i = 0; i < ev.size(); ++i) out += (i ? ",\n" : "") + ev[i];
  return out + "\n]}\n";
}

}  // namespace uvcl
