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

// A kind for the table: two numbers mixed into one key.
inline std::uint64_t cost_kind(std::uint64_t a, std::uint64_t b) {
  std::uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x7f4a7c159e3779b9ULL + (a << 6) + (a >> 2));
  h ^= h >> 31;
  return h;
}

}  // namespace uvcl::sched
