// placement.cpp — Engine::choose_device: which of several devices a launch
// would end first on (sched/placement.hpp), from the engine's view now.
#include <algorithm>
#include <string>
#include <vector>

#include <uv.h>

#include "engine/engine_impl.hpp"
#include "engine/submitter.hpp"
#include "sched/placement.hpp"

namespace uvcl {

namespace {

// Work in the device's window, not yet on its queues, spread over them.
std::uint64_t window_backlog_ns(const DeviceCtx& d) {
  std::uint64_t ns = 0;
  for (const Command& c : d.window.items()) ns += d.costs.estimate(Submitter::cost_kind(c));
  return ns / std::max<std::uint64_t>(1, d.compute_queues());
}

}  // namespace

Result<std::size_t> Engine::choose_device(std::span<const DeviceOption> options) const {
  const Impl& e = *impl_;
  if (options.empty())
    return Error{Status::InvalidArgument, "choose_device: no options (give each device the launch could run on)"};
  std::vector<sched::DeviceEstimate> estimates(options.size());
  for (std::size_t i = 0; i < options.size(); ++i) {
    const DeviceOption& o = options[i];
    const std::string where = "choose_device: options[" + std::to_string(i) + "]";
    auto k = e.progs.kernels.find(o.kernel.id);
    if (k == e.progs.kernels.end() || k->second.released)
      return Error{Status::InvalidArgument, where + ".kernel (" + std::to_string(o.kernel.id) + ") is not a live kernel"};
    const std::uint32_t device = k->second.device;
    const DeviceCtx& d = *e.devices[device];
    sched::DeviceEstimate& x = estimates[i];
    for (std::size_t j = 0; j < o.inputs.size(); ++j) {
      const InputMove& m = o.inputs[j];
      if (m.from_device >= e.devices.size())
        return Error{Status::InvalidArgument, where + ".inputs[" + std::to_string(j) + "].from_device (" +
                                                  std::to_string(m.from_device) + ") is out of range (" +
                                                  std::to_string(e.devices.size()) + " devices)"};
      if (m.from_device != device)
        x.transfer_ns += e.devices[m.from_device]->from_device.estimate_ns(m.bytes) + d.to_device.estimate_ns(m.bytes);
    }
    if (d.state == sched::DeviceState::Lost) {
      x.free_ns = UINT64_MAX / 4;  // chosen only if every option is lost; the launch then says so
      continue;
    }
    x.free_ns = d.free_ns.empty() ? 0 : *std::min_element(d.free_ns.begin(), d.free_ns.end());
    x.backlog_ns = window_backlog_ns(d);
    x.cost_ns = d.costs.estimate(sched::cost_kind(o.kernel.id, std::max<std::uint64_t>(1, o.work_items)));
  }
  return sched::earliest_device(estimates, uv_hrtime());
}

}  // namespace uvcl
