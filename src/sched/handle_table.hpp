// handle_table.hpp — records reached by a 64-bit handle that names their slot.
//
// A handle is tag | generation | slot. A lookup is an index into fixed-size
// chunks, not a hash: with a million records live, the few a command uses
// cost the same cache lines as with a thousand. A record never moves (a
// chunk is never reallocated), so a pointer to it stays valid until it is
// erased. An erased record's slot is reused, the most recently freed first
// (its lines are still in cache), under the next generation: the old handle
// then names nothing. A slot whose generations are used up is retired, never
// reused, so no handle ever names two records in the table's life; that
// costs one idle slot per kGenerations records made in the same slot.
// The tag (the bits above generation and slot) says whose handle it is: a
// handle with another tag, or 0, names nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace uvcl::sched {

template <class Record>
class HandleTable {
 public:
  static constexpr unsigned kSlotBits = 24;
  static constexpr unsigned kGenerationBits = 15;
  static constexpr std::uint64_t kSlots = std::uint64_t{1} << kSlotBits;
  static constexpr std::uint64_t kGenerations = std::uint64_t{1} << kGenerationBits;
  // The bits a handle's tag must leave clear.
  static constexpr std::uint64_t kIndexMask = (std::uint64_t{1} << (kSlotBits + kGenerationBits)) - 1;
  static constexpr std::size_t kChunk = 1024;

  // tag: nonzero, no bit in kIndexMask.
  explicit HandleTable(std::uint64_t tag) : tag_(tag) {}

  // Only while empty: handles made before keep their old tag.
  void set_tag(std::uint64_t tag) { tag_ = tag; }

  struct Added {
    std::uint64_t handle = 0;  // 0: every slot is in use or retired
    Record* record = nullptr;
  };
  // A value-initialized record and its handle.
  Added add() {
    std::uint32_t slot = 0;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      if (slots_ == kSlots) return {};
      slot = slots_++;
      if (slot / kChunk == chunks_.size()) chunks_.push_back(std::make_unique<Entry[]>(kChunk));
    }
    Entry& en = entry(slot);
    en.used = true;
    ++size_;
    return {tag_ | std::uint64_t{en.generation} << kSlotBits | slot, &en.record};
  }

  // nullptr unless the handle names a record in the table now.
  Record* find(std::uint64_t handle) {
    if ((handle & ~kIndexMask) != tag_) return nullptr;
    const auto slot = static_cast<std::uint32_t>(handle & (kSlots - 1));
    if (slot >= slots_) return nullptr;
    Entry& en = entry(slot);
    if (!en.used || en.generation != (handle & kIndexMask) >> kSlotBits) return nullptr;
    return &en.record;
  }
  const Record* find(std::uint64_t handle) const { return const_cast<HandleTable*>(this)->find(handle); }

  // Resets the record (what it held goes with it) and frees its slot. A
  // handle that names nothing is ignored.
  void erase(std::uint64_t handle) {
    Record* r = find(handle);
    if (!r) return;
    const auto slot = static_cast<std::uint32_t>(handle & (kSlots - 1));
    Entry& en = entry(slot);
    en.record = Record{};
    en.used = false;
    --size_;
    if (++en.generation < kGenerations) free_.push_back(slot);
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // fn(handle, record) for every record, in slot order.
  template <class Fn>
  void for_each(Fn fn) {
    for (std::uint32_t slot = 0; slot < slots_; ++slot) {
      Entry& en = entry(slot);
      if (en.used) fn(tag_ | std::uint64_t{en.generation} << kSlotBits | slot, en.record);
    }
  }

  // Teardown: drops every record. The slots start over, so nothing may be
  // added after under the same tag.
  void clear() {
    chunks_.clear();
    free_.clear();
    slots_ = 0;
    size_ = 0;
  }

 private:
  // The generation first: a lookup reads it and the record's first fields
  // from one cache line.
  struct Entry {
    std::uint32_t generation = 0;
    bool used = false;
    Record record{};
  };
  Entry& entry(std::uint32_t slot) { return chunks_[slot / kChunk][slot % kChunk]; }

  std::vector<std::unique_ptr<Entry[]>> chunks_;  // the pointers move as it grows, the entries do not
  std::vector<std::uint32_t> free_;               // reusable slots, the last freed at the back
  std::uint32_t slots_ = 0;                       // slots handed out so far: [0, slots_) are in chunks_
  std::size_t size_ = 0;
  std::uint64_t tag_;
};

}  // namespace uvcl::sched
