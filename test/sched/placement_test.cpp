// Device placement (sched/placement.hpp) and transfer rates
// (sched/cost_table.hpp): pure, no OpenCL.
#include <gtest/gtest.h>

#include <vector>

#include "sched/cost_table.hpp"
#include "sched/placement.hpp"

namespace {

using uvcl::sched::DeviceEstimate;
using uvcl::sched::device_finish_ns;
using uvcl::sched::earliest_device;
using uvcl::sched::TransferRate;

constexpr std::uint64_t kNow = 1'000'000;

TEST(Placement, AnIdleDeviceWithTheDataWinsOverAnIdleOneWithoutIt) {
  const std::vector<DeviceEstimate> d{{0, 0, 5000, 100}, {0, 0, 0, 100}};
  EXPECT_EQ(earliest_device(d, kNow), 1u);
}

TEST(Placement, AFasterDeviceWinsWhenItsSpeedPaysForTheMove) {
  // Device 1 runs it in 10 us where device 0 takes 1 ms; moving costs 50 us.
  const std::vector<DeviceEstimate> d{{0, 0, 0, 1'000'000}, {0, 0, 50'000, 10'000}};
  EXPECT_EQ(earliest_device(d, kNow), 1u);
  // A move dearer than the difference keeps it where the data is.
  const std::vector<DeviceEstimate> far{{0, 0, 0, 1'000'000}, {0, 0, 2'000'000, 10'000}};
  EXPECT_EQ(earliest_device(far, kNow), 0u);
}

TEST(Placement, ABusyDeviceLosesToAnIdleOne) {
  const std::vector<DeviceEstimate> d{{kNow + 500'000, 0, 0, 1000}, {0, 0, 0, 1000}};
  EXPECT_EQ(earliest_device(d, kNow), 1u);
  // Work still in a window counts like work on the queues.
  const std::vector<DeviceEstimate> w{{0, 500'000, 0, 1000}, {0, 0, 0, 1000}};
  EXPECT_EQ(earliest_device(w, kNow), 1u);
}

TEST(Placement, TheMoveOverlapsTheDevicesBacklog) {
  // Busy for 100 us, inputs there in 60 us: it starts at 100 us, not 160.
  const DeviceEstimate d{kNow + 100'000, 0, 60'000, 10};
  EXPECT_EQ(device_finish_ns(d, kNow), kNow + 100'010);
  const DeviceEstimate late{kNow + 100'000, 0, 300'000, 10};
  EXPECT_EQ(device_finish_ns(late, kNow), kNow + 300'010);
  // A queue that came free in the past starts the command now.
  EXPECT_EQ(device_finish_ns({kNow - 5, 0, 0, 10}, kNow), kNow + 10);
}

TEST(Placement, TiesGoToLessMovedThenToTheFirst) {
  // Both end at the same time: device 1 is busy as long as device 0's move.
  const std::vector<DeviceEstimate> d{{0, 0, 100, 10}, {kNow + 100, 0, 0, 10}};
  EXPECT_EQ(earliest_device(d, kNow), 1u);
  const std::vector<DeviceEstimate> same{{0, 0, 0, 10}, {0, 0, 0, 10}, {0, 0, 0, 10}};
  EXPECT_EQ(earliest_device(same, kNow), 0u);
}

TEST(Placement, TheSameInputsGiveTheSameDevice) {
  std::vector<DeviceEstimate> d;
  for (std::uint64_t i = 0; i < 16; ++i) d.push_back({kNow + (i * 7919) % 1000, (i * 104729) % 500, (i * 31) % 300, 100});
  const std::size_t first = earliest_device(d, kNow);
  for (int k = 0; k < 10; ++k) EXPECT_EQ(earliest_device(d, kNow), first);
}

TEST(TransferRateTable, GuessesBeforeMeasuringThenMovesAQuarterTowardEachMeasurement) {
  TransferRate r(1.0);
  EXPECT_EQ(r.estimate_ns(1000), 1000u);
  r.learn(1 << 20, (1 << 20) / 4);  // 0.25 ns per byte: the first measurement replaces the guess
  EXPECT_EQ(r.estimate_ns(1 << 20), (1u << 20) / 4);
  r.learn(1 << 20, (1 << 20) * 5 / 4);  // 1.25 ns per byte: a quarter of the way there
  EXPECT_EQ(r.estimate_ns(1 << 20), (1u << 20) / 2);
}

TEST(TransferRateTable, SmallTransfersTeachNothing) {
  TransferRate r(1.0);
  r.learn(TransferRate::kMinBytes - 1, 1);
  EXPECT_EQ(r.estimate_ns(4096), 4096u);
}

}  // namespace
