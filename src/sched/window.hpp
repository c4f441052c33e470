// window.hpp — a device's micro-batch window.
//
// Commands accumulate here in program order and are submitted together:
// when the window is full, once per loop iteration, and at sync points.
#pragma once

#include <cassert>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace uvcl::sched {

template <class Command>
class Window {
 public:
  explicit Window(std::size_t capacity) : capacity_(capacity ? capacity : 1) {
    items_.reserve(capacity_);
    batch_.reserve(capacity_);
  }

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
  // Moves every command, oldest first, into the batch being submitted,
  // leaving the window empty for what is made meanwhile; end_batch() once
  // the batch is submitted. Two buffers that trade places: a submission
  // allocates nothing, though sync points submit a window of one command.
  std::vector<Command>& take() {
    assert(batch_.empty() && "one batch at a time");
    batch_.swap(items_);
    return batch_;
  }
  void end_batch() { batch_.clear(); }
  // The commands waiting, oldest first.
  std::span<const Command> items() const { return items_; }
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  std::size_t capacity() const { return capacity_; }

 private:
  std::size_t capacity_;
  std::vector<Command> items_;
  std::vector<Command> batch_;  // take()n, being submitted
};

}  // namespace uvcl::sched
