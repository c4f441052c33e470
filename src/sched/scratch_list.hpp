// scratch_list.hpp — a short list that lives on the stack.
//
// submit_one builds two small lists per command (the producers of what it
// reads, the hazard views for the queue choice), nearly always of one or
// two entries. ScratchList keeps up to N of them inline and moves to the
// heap only beyond that, so a launch pays no allocation for them.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

namespace uvcl::sched {

template <class T, std::size_t N>
class ScratchList {
 public:
  void push_back(const T& v) {
    if (heap_.empty() && size_ < N) {
      inline_[size_++] = v;
      return;
    }
    if (heap_.empty()) heap_.assign(inline_.begin(), inline_.begin() + static_cast<std::ptrdiff_t>(size_));
    heap_.push_back(v);
  }
  std::span<const T> span() const {
    return heap_.empty() ? std::span<const T>(inline_.data(), size_) : std::span<const T>(heap_);
  }

 private:
  std::array<T, N> inline_{};
  std::size_t size_ = 0;
  std::vector<T> heap_;
};

}  // namespace uvcl::sched
