// command_store.hpp — one record per command, in dense storage by id.
//
// Command ids are dense and increase in program order, so the records of
// the commands not yet final sit in order in chunks of kChunk records,
// indexed by id - base: lookup is an index, adding takes the next slot, and
// a record is dropped once it and every older one are final. Memory follows
// the oldest unfinished command; an emptied chunk is kept for reuse (up to
// kSpare), so a steady stream of commands allocates nothing here. A record
// never moves: references stay valid while others are added or dropped.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "sched/ids.hpp"

namespace uvcl::sched {

template <class Record>
class CommandStore {
 public:
  static constexpr std::size_t kChunk = 256;
  static constexpr std::size_t kSpare = 2;

  // The id the next add() gets.
  CommandId next_id() const { return base_ + size_; }
  // Every id below has been dropped (its command is final).
  CommandId base() const { return base_; }
  std::size_t size() const { return size_; }

  // A fresh (value-initialized) record for id next_id().
  Record& add() {
    const std::size_t pos = head_ + size_;
    if (pos / kChunk == chunks_.size()) {
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
        if (spare_.size() < kSpare) spare_.push_back(std::move(chunks_.front()));
        chunks_.pop_front();
        head_ = 0;
      }
    }
  }

 private:
  Record& slot(std::size_t pos) { return chunks_[pos / kChunk][pos % kChunk]; }

  std::deque<std::unique_ptr<Record[]>> chunks_;
  std::vector<std::unique_ptr<Record[]>> spare_;
  CommandId base_ = 1;
  std::size_t head_ = 0;  // the first record's slot in chunks_.front()
  std::size_t size_ = 0;
};

}  // namespace uvcl::sched
