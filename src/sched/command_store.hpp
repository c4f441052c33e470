// command_store.hpp — one record per command, in dense storage by id.
//
// Command ids are dense and increase in program order, so the records of
// the commands not yet final sit in order in chunks of kChunk records,
// indexed by id - base: lookup is an index, adding takes the next slot, and
// a record is dropped once it and every older one are final. Memory follows
// the oldest unfinished command; an emptied chunk is kept for reuse (up to
// kSpare), so a steady stream of commands allocates nothing here, nor do
// bursts of up to kSpare chunks' worth once the first has run (freeing a
// chunk this large costs the allocator a consolidation pass). A record
// never moves: references stay valid while others are added or dropped.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "sched/ids.hpp"

namespace uvcl::sched {

template <class Record>
class CommandStore {
 public:
  static constexpr std::size_t kChunk = 256;
  static constexpr std::size_t kSpare = 16;

  // The id the next add() gets.
  CommandId next_id() const { return base_ + size_; }
  // Every id below has been dropped (its command is final).
  CommandId base() const { return base_; }
  std::size_t size() const { return size_; }

  // A fresh (value-initialized) record for id next_id().
  Record& add() {
    const std::size_t pos = head_ + size_;
    if (pos / kChunk == chunks_.size() - first_) {
      if (spare_.empty()) {
        chunks_.push_back(std::make_unique<Record[]>(kChunk));
      } else {
        chunks_.push_back(std::move(spare_.back()));
        spare_.pop_back();
      }
    }
    ++size_;
    return slot(pos);
  }
  // nullptr for a dropped or unknown id.
  Record* find(CommandId id) { return id >= base_ && id - base_ < size_ ? &slot(head_ + (id - base_)) : nullptr; }
  const Record* find(CommandId id) const { return const_cast<CommandStore*>(this)->find(id); }
  // Drops records from the front while done(record) holds. A dropped slot
  // is reset at once, so what the record held goes with it.
  template <class Done>
  void drop_front_while(Done done) {
    while (size_ > 0 && done(slot(head_))) {
      // Destroyed and made anew in place: assigning a fresh temporary would
      // build one and move every member across.
      Record& r = slot(head_);
      std::destroy_at(&r);
      std::construct_at(&r);
      ++base_;
      --size_;
      if (++head_ == kChunk) {
        if (spare_.size() < kSpare) spare_.push_back(std::move(chunks_[first_]));
        chunks_[first_].reset();
        ++first_;
        head_ = 0;
        // The emptied front entries go once they are half of the list: a
        // move of the live ones now and then, amortized over kChunk drops.
        if (first_ * 2 >= chunks_.size()) {
          chunks_.erase(chunks_.begin(), chunks_.begin() + static_cast<std::ptrdiff_t>(first_));
          first_ = 0;
        }
      }
    }
  }

 private:
  Record& slot(std::size_t pos) { return chunks_[first_ + pos / kChunk][pos % kChunk]; }

  // The chunks in use are chunks_[first_..]; a vector, not a deque: a lookup
  // is one index into it (it is on every step of every command).
  std::vector<std::unique_ptr<Record[]>> chunks_;
  std::size_t first_ = 0;
  std::vector<std::unique_ptr<Record[]>> spare_;
  CommandId base_ = 1;
  std::size_t head_ = 0;  // the first record's slot in chunks_[first_]
  std::size_t size_ = 0;
};

}  // namespace uvcl::sched
