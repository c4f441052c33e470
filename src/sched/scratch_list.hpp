// scratch_list.hpp — a short list kept inline.
//
// A command's lists (its buffer accesses, its kernel arguments, what it
// writes; in submit_one the producers of what it reads and the hazard views
// for the queue choice) nearly always hold a few entries. ScratchList keeps
// up to N of them inline and moves to the heap only beyond that, so a launch
// pays no allocation for them. The inline slots are raw storage: making,
// copying or moving a list touches only the entries it holds, not all N.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <span>
#include <type_traits>
#include <vector>

namespace uvcl::sched {

// The inline slots are left uninitialized on purpose (the point of the
// class): entries past size() are never read.
// NOLINTBEGIN(cppcoreguidelines-pro-type-member-init)
template <class T, std::size_t N>
class ScratchList {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "entries are copied as bytes");

 public:
  ScratchList() = default;
  ScratchList(const ScratchList& o) : size_(o.size_), heap_(o.heap_) { copy_inline(o); }
  ScratchList(ScratchList&& o) noexcept : size_(o.size_), heap_(std::move(o.heap_)) {
    copy_inline(o);
    o.clear();
  }
  ScratchList& operator=(const ScratchList& o) {
    if (this != &o) {
      size_ = o.size_;
      heap_ = o.heap_;
      copy_inline(o);
    }
    return *this;
  }
  ScratchList& operator=(ScratchList&& o) noexcept {
    if (this != &o) {
      size_ = o.size_;
      heap_ = std::move(o.heap_);
      copy_inline(o);
      o.clear();
    }
    return *this;
  }
  ~ScratchList() = default;

  void push_back(const T& v) {
    if (heap_.empty() && size_ < N) {
      ::new (static_cast<void*>(inline_data() + size_)) T(v);
      ++size_;
      return;
    }
    if (heap_.empty()) heap_.assign(inline_data(), inline_data() + size_);
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
  std::span<const T> span() const { return {begin(), size()}; }
  std::size_t size() const { return heap_.empty() ? size_ : heap_.size(); }
  bool empty() const { return size() == 0; }
  T* begin() { return heap_.empty() ? inline_data() : heap_.data(); }
  T* end() { return begin() + size(); }
  const T* begin() const { return heap_.empty() ? inline_data() : heap_.data(); }
  const T* end() const { return begin() + size(); }
  T& operator[](std::size_t i) { return begin()[i]; }
  const T& operator[](std::size_t i) const { return begin()[i]; }

 private:
  T* inline_data() { return reinterpret_cast<T*>(inline_); }  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  const T* inline_data() const { return reinterpret_cast<const T*>(inline_); }  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  // While the entries are on the heap the inline slots are unused.
  void copy_inline(const ScratchList& o) {
    if (heap_.empty() && size_ > 0) std::memcpy(inline_, o.inline_, size_ * sizeof(T));
  }

  // The count and the heap first: a short list's header and its first
  // entries share a cache line.
  std::size_t size_ = 0;
  std::vector<T> heap_;
  alignas(T) std::byte inline_[N * sizeof(T)];  // NOLINT(bugprone-sizeof-expression): T may be a pointer (cl_event)
};
// NOLINTEND(cppcoreguidelines-pro-type-member-init)

}  // namespace uvcl::sched
