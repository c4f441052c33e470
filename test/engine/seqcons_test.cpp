// Randomized sequential consistency: random DAGs of integer kernels, copies,
// fills and host writes over six buffers must give exactly what running them
// one after another on the host gives, whatever queues they land on.
//
// Results alone cannot see a missing WAR wait on PoCL (it orders commands
// that share a cl_mem by itself), so the recorded schedule is checked too:
// every pair of commands on different queues that touch one buffer, one of
// them writing, must be ordered by same-queue order and waits.
//
// The engine drops waits on commands that have already completed and
// records each dropped one (ScheduleEntry::completed), so every seed's
// hazard pairs are checked against waits and dropped waits alike. "Gated"
// seeds start with a ~30 ms timed launch that writes every buffer: its
// measured device time proves (t_last_submit < t_gate_start + device_ns)
// that it was still running when the last command was submitted, so every
// later command must wait for it. Ungated seeds start from host writes and
// call poll() in between, so completions are collected midway and waits
// are dropped.
#include <cstdio>
#include <deque>
#include <memory>
#include <random>

#include "engine_test_util.hpp"

namespace uvcl::testing::seqcons {

using util::buf;
using util::make_launch;
using util::u32;

constexpr std::size_t kBuffers = 6;
constexpr std::uint32_t kN = 256;  // elements per buffer
constexpr int kCommands = 40;

struct Expected {
  std::string op;
  std::uint64_t tag = 0;
  std::set<std::uint64_t> reads, writes;  // what the command really reads and writes
  bool partial = false;                   // a write of part of a buffer (keeps the rest)
};

// Shared with callbacks (which must not outlive it if an assertion returns early).
struct ReadChecks {
  int issued = 0, delivered = 0, failed = 0, mismatched = 0;
  std::string first_problem;
  bool gate_done = false;
  Timing gate_timing;
};

struct Totals {
  int seeds = 0, strict = 0;
  std::size_t cross_pairs = 0;
  std::set<std::uint32_t> queues;
};

class SeqConsistency : public EngineTest {
 protected:
  void SetUp() override {}  // the engine is made per configuration

  void prepare(unsigned queues, unsigned window, CommandEvents events) {
    Config c = test_config(queues, window);
    c.command_events = events;
    make_engine(c);
    Program p = compile(util::kKernels);
    axpbc_ = kernel(p, "axpbc");
    inplace_ = kernel(p, "mix_inplace");
    permute_ = kernel(p, "permute");
    gate_ = kernel(p, "gate6");
    spin_ = kernel(p, "spin");
    gate_iters_ = util::spin_iters_for(eng(), spin_, 30.0);
  }

  void run(unsigned queues, unsigned window, std::uint32_t first_seed, int seeds,
           CommandEvents events = CommandEvents::Auto) {
    prepare(queues, window, events);
    Totals t;
    const std::uint64_t cross_waits_before = eng().stats().cross_queue_waits;
    for (int s = 0; s < seeds; ++s) {
      const std::uint32_t seed = first_seed + static_cast<std::uint32_t>(s);
      SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(queues) + " queues, window " +
                   std::to_string(window));
      run_seed(seed, /*gated=*/s % 3 != 2, t);
      if (::testing::Test::HasFatalFailure()) return;
    }
    // The schedule check must have been meaningful, not vacuous.
    EXPECT_GE(t.strict * 2, t.seeds) << "too few gated seeds proved the gate still running (machine too slow?)";
    // Scheduled work lands on compute queues [0, queues) only: the profiling
    // queue (index `queues`) belongs to timed launches.
    ASSERT_FALSE(t.queues.empty());
    EXPECT_LT(*t.queues.rbegin(), queues) << "a scheduled command ran on a queue that is not a compute queue";
    if (queues > 1) {
      EXPECT_GE(t.queues.size(), 3u) << "the scheduler used almost one queue: nothing cross-queue was tested";
      EXPECT_GT(t.cross_pairs, 100u);
      EXPECT_GT(eng().stats().cross_queue_waits, cross_waits_before);
    }
    std::printf("[ info     ] %d of %d seeds with the gate proved running, %zu cross-queue hazard pairs checked, %zu queues used\n",
                t.strict, t.seeds, t.cross_pairs, t.queues.size());
  }

  void run_seed(std::uint32_t seed, bool gated, Totals& totals);

  Kernel axpbc_, inplace_, permute_, gate_, spin_;
  std::uint32_t gate_iters_ = 0;
};

void SeqConsistency::run_seed(std::uint32_t seed, bool gated, Totals& totals) {
  std::mt19937 rng(seed);
  auto uni = [&](std::uint32_t lo, std::uint32_t hi) {  // inclusive
    return std::uniform_int_distribution<std::uint32_t>(lo, hi)(rng);
  };
  // A skewed pick: buffers 0 and 1 are hot, so fan-out and WAR chains form.
  auto pick = [&] { return uni(0, 3) == 0 ? uni(0, 1) : uni(0, kBuffers - 1); };

  std::vector<Buffer> b(kBuffers);
  for (auto& x : b) {
    auto a = eng().allocate(0, kN * 4);
    ASSERT_TRUE(a.ok()) << a.error().to_string();
    x = a.value();
  }
  std::vector<std::vector<std::uint32_t>> ref(kBuffers, std::vector<std::uint32_t>(kN));
  std::vector<Expected> expect;
  std::deque<std::vector<std::uint32_t>> borrowed;  // WriteMode::Borrow bytes, alive until finish()
  auto checks = std::make_shared<ReadChecks>();
  auto bytes = [](const std::vector<std::uint32_t>& v) { return std::as_bytes(std::span<const std::uint32_t>(v)); };

  util::ScheduleLog log;
  log.attach(eng());

  std::uint64_t gate_t0 = 0;
  if (gated) {
    std::vector<KernelArg> args;
    for (Buffer x : b) args.push_back(buf(x));
    args.push_back(u32(kN));
    args.push_back(u32(gate_iters_));
    args.push_back(u32(seed));
    gate_t0 = uv_hrtime();
    auto r = eng().timed_launch(make_launch(gate_, std::move(args), {1}, {1}, 1000), [checks](Result<Timing> t) {
      checks->gate_done = true;
      if (t.ok()) checks->gate_timing = t.value();
      else checks->first_problem = "gate: " + t.error().to_string();
    });
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    Expected e{"launch", 1000, {}, {}, false};
    for (std::size_t k = 0; k < kBuffers; ++k) {
      for (std::uint32_t i = 0; i < kN; ++i) ref[k][i] = util::gate_value(k, i, seed, gate_iters_);
      e.writes.insert(b[k].id);
    }
    expect.push_back(e);
  } else {
    for (std::size_t k = 0; k < kBuffers; ++k) {
      for (auto& v : ref[k]) v = static_cast<std::uint32_t>(rng());
      ASSERT_TRUE(eng().write(b[k], 0, bytes(ref[k])).ok());
      expect.push_back(Expected{"write", 0, {}, {b[k].id}, false});
    }
  }

  for (int c = 0; c < kCommands; ++c) {
    const std::uint64_t tag = static_cast<std::uint64_t>(c) + 1;
    const std::uint32_t kind = uni(0, 13);
    std::vector<std::size_t> local;
    if (uni(0, 1) == 0) local = {64};
    if (kind <= 3) {  // out = a * 3 + b + c; out may alias a or b (in place)
      const std::uint32_t a = pick(), bb = pick(), out = pick(), k = static_cast<std::uint32_t>(rng());
      auto r = eng().launch(make_launch(axpbc_, {buf(b[a]), buf(b[bb]), buf(b[out]), u32(k), u32(kN)}, {kN}, local, tag));
      ASSERT_TRUE(r.ok()) << r.error().to_string();
      std::vector<std::uint32_t> next(kN);
      for (std::uint32_t i = 0; i < kN; ++i) next[i] = ref[a][i] * 3u + ref[bb][i] + k;
      ref[out] = next;
      expect.push_back(Expected{"launch", tag, {b[a].id, b[bb].id}, {b[out].id}, false});
    } else if (kind <= 5) {  // in-place update
      const std::uint32_t x = pick(), k = static_cast<std::uint32_t>(rng());
      ASSERT_TRUE(eng().launch(make_launch(inplace_, {buf(b[x]), u32(k), u32(kN)}, {kN}, local, tag)).ok());
      for (auto& v : ref[x]) v = (v ^ (v >> 7)) * 2654435761u + k;
      expect.push_back(Expected{"launch", tag, {b[x].id}, {b[x].id}, false});
    } else if (kind <= 7) {  // reads one buffer (across elements), writes another
      const std::uint32_t a = pick();
      std::uint32_t out = pick();
      while (out == a) out = uni(0, kBuffers - 1);
      const std::uint32_t s = uni(0, 1000);
      ASSERT_TRUE(eng().launch(make_launch(permute_, {buf(b[a]), buf(b[out]), u32(s), u32(kN)}, {kN}, local, tag)).ok());
      for (std::uint32_t i = 0; i < kN; ++i) ref[out][i] = ref[a][(i * 7u + s) % kN] + s;
      expect.push_back(Expected{"launch", tag, {b[a].id}, {b[out].id}, false});
    } else if (kind <= 9) {  // device copy, sometimes within one buffer
      const std::uint32_t src = pick(), dst = pick();
      std::uint32_t len = uni(1, kN / 2), so = uni(0, kN - len), dof = uni(0, kN - len);
      if (src == dst) {  // non-overlapping halves
        len = uni(1, kN / 4);
        so = uni(0, kN / 2 - len);
        dof = kN / 2 + uni(0, kN / 2 - len);
        if (uni(0, 1)) std::swap(so, dof);
      }
      ASSERT_TRUE(eng().copy(b[src], so * 4, b[dst], dof * 4, len * 4).ok());
      std::vector<std::uint32_t> part(ref[src].begin() + so, ref[src].begin() + so + len);
      std::copy(part.begin(), part.end(), ref[dst].begin() + dof);
      Expected e{"copy", 0, {b[src].id}, {b[dst].id}, len != kN};
      expect.push_back(e);
    } else if (kind <= 11) {  // host write, whole buffer or part, copied or borrowed
      const std::uint32_t dst = pick();
      const bool whole = uni(0, 2) == 0;
      const std::uint32_t len = whole ? kN : uni(1, kN), off = whole ? 0 : uni(0, kN - len);
      std::vector<std::uint32_t> data(len);
      for (auto& v : data) v = static_cast<std::uint32_t>(rng());
      std::copy(data.begin(), data.end(), ref[dst].begin() + off);
      if (uni(0, 1) == 0) {
        ASSERT_TRUE(eng().write(b[dst], off * 4, bytes(data), WriteMode::Copy).ok());
      } else {
        borrowed.push_back(std::move(data));
        ASSERT_TRUE(eng().write(b[dst], off * 4, bytes(borrowed.back()), WriteMode::Borrow).ok());
      }
      expect.push_back(Expected{"write", 0, {}, {b[dst].id}, len != kN});
    } else if (kind == 12) {  // fill
      const std::uint32_t dst = pick(), len = uni(1, kN), off = uni(0, kN - len), v = static_cast<std::uint32_t>(rng());
      ASSERT_TRUE(eng().fill(b[dst], std::as_bytes(std::span<const std::uint32_t>(&v, 1)), off * 4, len * 4).ok());
      std::fill(ref[dst].begin() + off, ref[dst].begin() + off + len, v);
      expect.push_back(Expected{"fill", 0, {}, {b[dst].id}, len != kN});
    } else {  // a read in the middle: must see exactly the state at this point
      const std::uint32_t src = pick(), len = uni(1, kN), off = uni(0, kN - len);
      std::vector<std::uint32_t> want(ref[src].begin() + off, ref[src].begin() + off + len);
      ++checks->issued;
      auto r = eng().read(b[src], off * 4, len * 4, [checks, want, tag](Result<std::span<const std::byte>> got) {
        ++checks->delivered;
        if (!got.ok()) {
          ++checks->failed;
          if (checks->first_problem.empty()) checks->first_problem = got.error().to_string();
          return;
        }
        if (got->size() != want.size() * 4 || std::memcmp(got->data(), want.data(), got->size()) != 0) {
          ++checks->mismatched;
          if (checks->first_problem.empty())
            checks->first_problem = "read at command " + std::to_string(tag) + " saw other data";
        }
      });
      ASSERT_TRUE(r.ok()) << r.error().to_string();
      expect.push_back(Expected{"read", 0, {b[src].id}, {}, false});
    }
    if (!gated && uni(0, 4) == 0) eng().poll();  // completions collected midway
  }

  auto f = eng().finish();
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  log.detach();
  EXPECT_EQ(checks->delivered, checks->issued);
  EXPECT_EQ(checks->failed, 0) << checks->first_problem;
  EXPECT_EQ(checks->mismatched, 0) << checks->first_problem;
  if (gated) {
    EXPECT_TRUE(checks->gate_done);
  }

  for (std::size_t k = 0; k < kBuffers; ++k) {
    auto got = eng().read_sync(b[k], 0, kN * 4);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    const auto v = as_vector<std::uint32_t>(got.value());
    std::size_t bad = 0, first = kN;
    for (std::uint32_t i = 0; i < kN; ++i)
      if (v[i] != ref[k][i]) {
        ++bad;
        first = std::min<std::size_t>(first, i);
      }
    EXPECT_EQ(bad, 0u) << "buffer " << k << ": " << bad << " wrong elements, first at " << first << ": got "
                       << (first < kN ? v[first] : 0) << ", want " << (first < kN ? ref[k][first] : 0);
  }

  // What the engine recorded is what was asked, in program order.
  const std::vector<ScheduleEntry> s = log.entries();
  ASSERT_EQ(s.size(), expect.size()) << "every command is recorded once, at submission";
  for (std::size_t i = 0; i < s.size(); ++i) {
    const Expected& e = expect[i];
    SCOPED_TRACE("command " + std::to_string(i) + ": " + util::describe(s[i]));
    EXPECT_EQ(std::string(s[i].op), e.op);
    if (e.op == "launch") {
      EXPECT_EQ(s[i].tag, e.tag);
    }
    if (i > 0) {
      EXPECT_GT(s[i].id, s[i - 1].id);
    }
    std::set<std::uint64_t> reads, writes;
    for (Buffer x : s[i].reads) reads.insert(x.id);
    for (Buffer x : s[i].writes) writes.insert(x.id);
    EXPECT_EQ(writes, e.writes);
    for (std::uint64_t r : e.reads) EXPECT_TRUE(reads.count(r)) << "a read of buffer " << r << " is not recorded";
    if (e.partial) {
      for (std::uint64_t w : e.writes) EXPECT_TRUE(reads.count(w)) << "a partial write keeps the rest: it reads too";
    }
    for (std::uint64_t r : reads)
      EXPECT_TRUE(e.reads.count(r) || e.writes.count(r)) << "recorded read of untouched buffer " << r;
    for (std::uint64_t w : s[i].waits) EXPECT_LT(w, s[i].id) << "waits on a later command";
    if (!(gated && i == 0)) totals.queues.insert(s[i].queue);  // the gate is on the profiling queue
  }

  util::HappensBefore hb(s);
  EXPECT_EQ(hb.unknown_waits(), 0u) << "a wait names a command that is not in the schedule";
  ++totals.seeds;
  std::size_t pairs = 0;
  const std::vector<std::string> bad = hb.hazard_violations(&pairs);
  totals.cross_pairs += pairs;
  EXPECT_TRUE(bad.empty()) << bad.size() << " unordered hazards; first: " << bad.front();
  const bool provable = gated && checks->gate_done && checks->gate_timing.device_ns > 0 &&
                        log.log.back().at_ns < gate_t0 + checks->gate_timing.device_ns;
  if (provable) {
    ++totals.strict;
    // The gate was running while everything was submitted: all wait for it.
    for (std::size_t i = 1; i < s.size(); ++i) EXPECT_TRUE(hb.ordered(s[0].id, s[i].id)) << util::describe(s[i]);
  }

  for (Buffer x : b) ASSERT_TRUE(eng().release(x).ok());
  ASSERT_TRUE(eng().finish().ok());
}

TEST_F(SeqConsistency, EightQueuesSmallWindow) { run(8, 3, 1, 30); }
TEST_F(SeqConsistency, EightQueuesDefaultWindow) { run(8, 100, 101, 30); }
TEST_F(SeqConsistency, OneQueueSmallWindow) { run(1, 3, 201, 10); }
TEST_F(SeqConsistency, OneQueueDefaultWindow) { run(1, 100, 301, 10); }
// Events only where awaited: event-less commands complete through fences,
// cross-queue waits go to the next fence after the producer.
TEST_F(SeqConsistency, EightQueuesSmallWindowFences) { run(8, 3, 401, 20, CommandEvents::Awaited); }
TEST_F(SeqConsistency, EightQueuesDefaultWindowFences) { run(8, 100, 501, 20, CommandEvents::Awaited); }
TEST_F(SeqConsistency, OneQueueDefaultWindowFences) { run(1, 100, 601, 10, CommandEvents::Awaited); }

}  // namespace uvcl::testing::seqcons
