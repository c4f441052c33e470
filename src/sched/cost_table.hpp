// cost_table.hpp — how long a command is expected to run, learned from how
// long earlier commands of the same kind (a kernel and its range; an
// operation and its size) took.
//
// A kind's estimate moves a quarter of the way to each new measurement, so
// one slow run (a cold cache, a loaded host) does not swing it. A kind
// never measured gets the same average over every kind measured, and
// before any measurement the default. At most `capacity` kinds are kept:
// beyond that a new kind is estimated, never stored (an untrusted client
// naming a fresh range per launch grows nothing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace uvcl::sched {

class CostTable {
 public:
  CostTable(std::uint64_t default_ns, std::size_t capacity) : default_ns_(default_ns), capacity_(capacity) {}

  std::uint64_t estimate(std::uint64_t kind) const;
  void learn(std::uint64_t kind, std::uint64_t ns);
  std::size_t size() const { return ns_.size(); }

 private:
  static std::uint64_t moved_toward(std::uint64_t from, std::uint64_t to) { return from - from / 4 + to / 4; }

  std::uint64_t default_ns_;
  std::size_t capacity_;
  std::uint64_t any_ns_ = 0;  // over every kind; 0: nothing measured yet
  std::unordered_map<std::uint64_t, std::uint64_t> ns_;
};

// How long moving bytes between a device and the host takes, from the
// device's earlier transfers: nanoseconds per byte, moved a quarter of the
// way to each measurement. Only transfers of at least kMinBytes are
// measured: below that a transfer's time is mostly its fixed cost. Before
// any measurement, the rate given (a guess that keeps data where it is
// rather than one that moves it).
class TransferRate {
 public:
  static constexpr std::uint64_t kMinBytes = std::uint64_t{64} << 10;
  explicit TransferRate(double default_ns_per_byte) : ns_per_byte_(default_ns_per_byte) {}

  std::uint64_t estimate_ns(std::uint64_t bytes) const {
    return static_cast<std::uint64_t>(ns_per_byte_ * static_cast<double>(bytes));
  }
  void learn(std::uint64_t bytes, std::uint64_t ns) {
    if (bytes < kMinBytes) return;
    const double measured = static_cast<double>(ns) / static_cast<double>(bytes);
    ns_per_byte_ = measured_ ? ns_per_byte_ + (measured - ns_per_byte_) / 4 : measured;
    measured_ = true;
  }

 private:
  double ns_per_byte_;
  bool measured_ = false;
};

// A kind for the table: two numbers mixed into one key.
inline std::uint64_t cost_kind(std::uint64_t a, std::uint64_t b) {
  std::uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x7f4a7c159e3779b9ULL + (a << 6) + (a >> 2));
  h ^= h >> 31;
  return h;
}

}  // namespace uvcl::sched
