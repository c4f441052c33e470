// placement.hpp — which device a command that may run on several should go
// to: the one where it would end first.
//
// Each candidate says when its device could start the command (its first
// compute queue to come free, plus the work waiting in its window, spread
// over its queues), how long the command's inputs take to move there
// (0 where they already are) and how long the command runs there (the
// device's cost table). The input transfer overlaps the device's own
// backlog: the command starts once both are done. Ties go to the candidate
// that moves fewer bytes' worth of time, then to the earlier one, so the
// same inputs always give the same device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uvcl::sched {

struct DeviceEstimate {
  std::uint64_t free_ns = 0;      // when its first compute queue comes free (clock of now_ns; 0: idle)
  std::uint64_t backlog_ns = 0;   // work made but not yet placed on its queues, per queue
  std::uint64_t transfer_ns = 0;  // moving the command's inputs to it
  std::uint64_t cost_ns = 0;      // the command itself there
};

// When the command would end on that device.
std::uint64_t device_finish_ns(const DeviceEstimate& d, std::uint64_t now_ns);

// The index of the candidate where the command ends first; `candidates`
// must not be empty.
std::size_t earliest_device(std::span<const DeviceEstimate> candidates, std::uint64_t now_ns);

}  // namespace uvcl::sched
