// window.hpp — a device's micro-batch window.
//
// Commands accumulate here in program order and are submitted together:
// when the window is full, once per loop iteration, and at sync points.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace uvcl::sched {

template <class Command>
class Window {
 public:
  explicit Window(std::size_t capacity) : capacity_(capacity ? capacity : 1) { items_.reserve(capacity_); }

  // Returns true when the window is now full and must be submitted.
  bool push(Command c) {
    items_.push_back(std::move(c));
    return full();
  }
  // A new command made in place at the back, for the caller to fill: a
  // command is large, and a launch should not pay for moving it around.
  Command& emplace() { return items_.emplace_back(); }
  // Drops the newest command (an emplace() whose filling failed).
  void pop_back() { items_.pop_back(); }
  Command& back() { return items_.back(); }
  bool full() const { return items_.size() >= capacity_; }
  // Takes every command, oldest first, leaving the window empty.
  std::vector<Command> take() {
    std::vector<Command> out;
    out.reserve(capacity_);
    out.swap(items_);
    return out;
  }
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  std::size_t capacity() const { return capacity_; }

 private:
  std::size_t capacity_;
  std::vector<Command> items_;
};

}  // namespace uvcl::sched
