// Write-after-read across queues: slow readers of one buffer on several
// queues, then a writer. The seed tracked only the LAST reader, so the writer
// waited for one reader and raced the others. The readers must see the old
// values and the schedule must show the writer ordered after every reader.
#include <memory>

#include "engine_test_util.hpp"

namespace uvcl::testing::war {

using util::buf;
using util::make_launch;
using util::u32;

constexpr std::uint32_t kN = 16;  // elements: one work-group, one PoCL thread
constexpr int kReaders = 4;

enum class Writer { Kernel, HostWrite, Fill, Copy };

const char* writer_name(Writer w) {
  switch (w) {
    case Writer::Kernel: return "kernel";
    case Writer::HostWrite: return "host write";
    case Writer::Fill: return "fill";
    case Writer::Copy: return "copy";
  }
  return "?";
}

class WarHazard : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    Program p = compile(util::kKernels);
    spin_ = kernel(p, "spin");
    set_ = kernel(p, "set_value");
  }

  // The engine rightly drops waits on commands already complete, so the
  // schedule proves the WAR edges only if no reader completed before the
  // writer was submitted. The producer of W is a timed launch: everything
  // waits for it, and its device time shows whether it was still running
  // when the writer was recorded. If not (a badly loaded machine), try again.
  void run(Writer how) {
    SCOPED_TRACE(std::string("writer: ") + writer_name(how));
    for (int attempt = 0; attempt < 4; ++attempt) {
      bool provable = false;
      run_once(how, provable);
      if (::testing::Test::HasFailure() || provable) return;
    }
    FAIL() << "the producer never outlasted the submission of the readers and the writer";
  }

  void run_once(Writer how, bool& provable) {
    const std::vector<std::uint32_t> seed_values = util::iota_values(kN, 2654435761u, 17);
    Buffer in = upload(seed_values);
    auto w = eng().allocate(0, kN * 4);
    ASSERT_TRUE(w.ok());
    Buffer src = upload(util::iota_values(kN, 3, 1000));  // what a copy writer copies from
    std::vector<Buffer> outs;
    for (int r = 0; r < kReaders; ++r) {
      auto o = eng().allocate(0, kN * 4);
      ASSERT_TRUE(o.ok());
      outs.push_back(o.value());
    }
    ASSERT_TRUE(eng().finish().ok());
    // A ~10 ms producer of W: readers and writer are all submitted while it
    // runs, so no reader is complete when the writer is scheduled.
    const std::uint32_t produce = util::spin_iters_for(eng(), spin_, 10.0, kN);
    const std::uint32_t slow = util::spin_iters_for(eng(), spin_, 3.0, kN);

    util::ScheduleLog log;
    log.attach(eng());
    auto produced = std::make_shared<Result<Timing>>(Error{Status::Cancelled, "not called"});
    const std::uint64_t t0 = uv_hrtime();
    ASSERT_TRUE(eng()
                    .timed_launch(make_launch(spin_, {buf(in), buf(w.value()), u32(produce), u32(kN)}, {kN}, {kN}, 1),
                                  [produced](Result<Timing> t) { *produced = std::move(t); })
                    .ok());
    for (int r = 0; r < kReaders; ++r)
      ASSERT_TRUE(eng()
                      .launch(make_launch(spin_, {buf(w.value()), buf(outs[r]), u32(slow), u32(kN)}, {kN}, {kN},
                                          10 + static_cast<std::uint64_t>(r)))
                      .ok());
    const std::uint32_t fill_value = 0xfeedf00du;
    const std::vector<std::uint32_t> host_values = util::iota_values(kN, 5, 77);
    switch (how) {
      case Writer::Kernel:
        ASSERT_TRUE(eng().launch(make_launch(set_, {buf(w.value()), u32(0xabc000u), u32(kN)}, {kN}, {}, 99)).ok());
        break;
      case Writer::HostWrite: ASSERT_TRUE(eng().write(w.value(), 0, bytes_of(host_values)).ok()); break;
      case Writer::Fill:
        ASSERT_TRUE(eng().fill(w.value(), std::as_bytes(std::span<const std::uint32_t>(&fill_value, 1)), 0, kN * 4).ok());
        break;
      case Writer::Copy: ASSERT_TRUE(eng().copy(src, 0, w.value(), 0, kN * 4).ok()); break;
    }
    auto f = eng().finish();
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    log.detach();

    // Readers saw the old W.
    for (int r = 0; r < kReaders; ++r) {
      const auto got = download<std::uint32_t>(outs[r], kN);
      ASSERT_EQ(got.size(), kN);
      for (std::uint32_t i = 0; i < kN; ++i)
        ASSERT_EQ(got[i], util::lcg_steps(seed_values[i], std::uint64_t{produce} + slow)) << "reader " << r << " [" << i << "]";
    }
    // W holds the writer's values.
    const auto now = download<std::uint32_t>(w.value(), kN);
    ASSERT_EQ(now.size(), kN);
    for (std::uint32_t i = 0; i < kN; ++i) {
      const std::uint32_t want = how == Writer::Kernel      ? 0xabc000u + i
                                 : how == Writer::HostWrite ? host_values[i]
                                 : how == Writer::Fill      ? fill_value
                                                            : 3 * i + 1000;
      ASSERT_EQ(now[i], want) << i;
    }

    ASSERT_TRUE(produced->ok()) << produced->error().to_string();
    provable = log.log.back().at_ns < t0 + produced->value().device_ns;
    if (!provable) return;

    // The schedule: 1 producer, readers, the writer (last).
    const std::vector<ScheduleEntry> s = log.entries();
    ASSERT_EQ(s.size(), 2u + kReaders);
    const ScheduleEntry& writer = s.back();
    EXPECT_NE(std::find(writer.writes.begin(), writer.writes.end(), w.value()), writer.writes.end())
        << util::describe(writer);
    util::HappensBefore hb(s);
    std::set<std::uint32_t> other_queues;
    for (int r = 0; r < kReaders; ++r) {
      const ScheduleEntry& reader = s[1 + static_cast<std::size_t>(r)];
      ASSERT_EQ(reader.tag, 10u + static_cast<std::uint64_t>(r));
      EXPECT_TRUE(hb.ordered(reader.id, writer.id))
          << "the writer does not wait for reader " << r << ": " << util::describe(reader) << " / "
          << util::describe(writer);
      if (reader.queue == writer.queue) continue;
      other_queues.insert(reader.queue);
      // Directly: a wait on this reader or on a later command of its queue.
      bool waited = false;
      for (std::uint64_t id : writer.waits)
        for (const ScheduleEntry& e : s)
          if (e.id == id && e.queue == reader.queue && e.id >= reader.id) waited = true;
      EXPECT_TRUE(waited) << "no wait covers reader " << r << " on queue " << reader.queue << ": "
                          << util::describe(writer);
    }
    // The case the seed got wrong needs readers on at least two other queues.
    EXPECT_GE(other_queues.size(), 2u) << "readers were not spread over queues";
    std::size_t pairs = 0;
    const auto bad = hb.hazard_violations(&pairs);
    EXPECT_TRUE(bad.empty()) << bad.front();
  }

  Kernel spin_, set_;
};

TEST_F(WarHazard, KernelWriterWaitsForEveryReader) { run(Writer::Kernel); }
TEST_F(WarHazard, HostWriteWaitsForEveryReader) { run(Writer::HostWrite); }
TEST_F(WarHazard, FillWaitsForEveryReader) { run(Writer::Fill); }
TEST_F(WarHazard, CopyIntoWaitsForEveryReader) { run(Writer::Copy); }

}  // namespace uvcl::testing::war
