// command_store.hpp — one record per command, in dense storage by id.
//
// Command ids are dense and increase in program order, so the records of
// the commands not yet final sit in one deque indexed by id - base: lookup
// is an index, adding is a push at the back, and a record is dropped once it
// and every older one are final. Memory follows the oldest unfinished
// command. References to records stay valid while records are added or
// dropped elsewhere (std::deque grows and shrinks at its ends only).
#pragma once

#include <cstddef>
#include <deque>

#include "sched/ids.hpp"

namespace uvcl::sched {

template <class Record>
class CommandStore {
 public:
  // The id the next add() gets.
  CommandId next_id() const { return base_ + records_.size(); }
  // Every id below has been dropped (its command is final).
  CommandId base() const { return base_; }
  std::size_t size() const { return records_.size(); }

  Record& add() { return records_.emplace_back(); }
  // nullptr for a dropped or unknown id.
  Record* find(CommandId id) {
    return id >= base_ && id - base_ < records_.size() ? &records_[id - base_] : nullptr;
  }
  const Record* find(CommandId id) const {
    return id >= base_ && id - base_ < records_.size() ? &records_[id - base_] : nullptr;
  }
  // Drops records from the front while done(record) holds.
  template <class Done>
  void drop_front_while(Done done) {
    while (!records_.empty() && done(records_.front())) {
      records_.pop_front();
      ++base_;
    }
  }

 private:
  std::deque<Record> records_;
  CommandId base_ = 1;
};

}  // namespace uvcl::sched
