// scratch_list.hpp — a short list kept inline.
//
// A command's lists (its buffer accesses, its kernel arguments, what it
// writes; in submit_one the producers of what it reads and the hazard views
// for the queue choice) nearly always hold a few entries. ScratchList keeps
// up to N of them inline and moves to the heap only beyond that, so a launch
// pays no allocation for them.
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
  template <class It>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(*first);
  }
  void clear() {
    size_ = 0;
    heap_.clear();
  }
  std::span<const T> span() const {
    return heap_.empty() ? std::span<const T>(inline_.data(), size_) : std::span<const T>(heap_);
  }
  std::size_t size() const { return heap_.empty() ? size_ : heap_.size(); }
  bool empty() const { return size() == 0; }
  T* begin() { return heap_.empty() ? inline_.data() : heap_.data(); }
  T* end() { return begin() + size(); }
  const T* begin() const { return span().data(); }
  const T* end() const { return begin() + size(); }
  T& operator[](std::size_t i) { return begin()[i]; }
  const T& operator[](std::size_t i) const { return begin()[i]; }

 private:
  std::array<T, N> inline_{};
  std::size_t size_ = 0;
  std::vector<T> heap_;
};

}  // namespace uvcl::sched
