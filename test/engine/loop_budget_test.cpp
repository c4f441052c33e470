// Config::loop_budget_us: one loop iteration delivers completions only for
// so long, then yields to the loop's other handles and goes on in the next
// iteration. 50 reads that complete together, whose callbacks each take
// 100 us of the user's time, must not all run in one iteration — and must
// still run in order, each once.
#include <uv.h>

#include "../watchdog.hpp"
#include "engine_test_util.hpp"

namespace uvcl::testing::loop_budget {

using util::buf;
using util::make_launch;
using util::u32;

constexpr int kReads = 50;

void busy_for_us(std::uint64_t us) {
  const std::uint64_t until = uv_hrtime() + us * 1000;
  while (uv_hrtime() < until) {
  }
}

struct Delivery {
  int most_in_one_iteration = 0;
  std::vector<int> order;
};

// The reads wait behind a ~50 ms kernel, so they complete together.
Delivery deliver_reads(unsigned budget_us) {
  Delivery out;
  Config c = test_config(1);  // one in-order queue: the reads complete, and are delivered, in order
  c.loop_budget_us = budget_us;
  auto made = Engine::create(c);
  EXPECT_TRUE(made.ok()) << made.error().to_string();
  if (!made.ok()) return out;
  Engine& e = **made;
  auto p = e.compile_sync(0, util::kKernels);
  EXPECT_TRUE(p.ok());
  if (!p.ok()) return out;
  const Kernel spin = e.kernel(*p, "spin").value();
  Buffer in = e.allocate(0, 4).value(), data = e.allocate(0, 4).value();
  const std::vector<std::uint32_t> seed = {3};
  EXPECT_TRUE(e.write(in, 0, bytes_of(seed)).ok());
  const std::uint32_t iters = util::spin_iters_for(e, spin, 50);
  EXPECT_TRUE(e.launch(make_launch(spin, {buf(in), buf(data), u32(iters), u32(1)}, {1}, {1})).ok());

  // The test's own handle counts callbacks per loop iteration.
  int this_iteration = 0;
  uv_check_t check;
  uv_check_init(e.loop(), &check);
  check.data = &this_iteration;
  uv_check_start(&check, [](uv_check_t* h) { *static_cast<int*>(h->data) = 0; });
  uv_unref(reinterpret_cast<uv_handle_t*>(&check));
  for (int i = 0; i < kReads; ++i)
    EXPECT_TRUE(e.read(data, 0, 4, [&out, &this_iteration, i](Result<std::span<const std::byte>> r) {
                   EXPECT_TRUE(r.ok());
                   out.order.push_back(i);
                   out.most_in_one_iteration = std::max(out.most_in_one_iteration, ++this_iteration);
                   busy_for_us(100);
                 }).ok());
  uv_run(e.loop(), UV_RUN_DEFAULT);
  uv_close(reinterpret_cast<uv_handle_t*>(&check), nullptr);
  uv_run(e.loop(), UV_RUN_NOWAIT);
  return out;
}

std::vector<int> in_order() {
  std::vector<int> v(kReads);
  for (int i = 0; i < kReads; ++i) v[i] = i;
  return v;
}

TEST(LoopBudget, AnIterationYieldsOnceItsBudgetIsSpent) {
  Watchdog wd("loop budget", 60);
  const Delivery d = deliver_reads(200);
  EXPECT_EQ(d.order, in_order());
  // Each callback takes >= 100 us: past 200 us no further one starts.
  EXPECT_LE(d.most_in_one_iteration, 3);
}

TEST(LoopBudget, ZeroMeansNoBound) {
  Watchdog wd("no loop budget", 60);
  const Delivery d = deliver_reads(0);
  EXPECT_EQ(d.order, in_order());
  EXPECT_GT(d.most_in_one_iteration, 3) << "the reads complete together: without a bound, one iteration runs many";
}

// A caller launching as fast as it can, waiting only while many commands
// are in flight (as figure 8 does), with a budget far too small for what
// completes each iteration: what is done but not yet delivered must stay
// bounded too. The first budget let the completion walk use every budget,
// so delivery never ran and every record stayed alive.
TEST(LoopBudget, ACallerOutrunningTheBudgetLeavesNoHiddenBacklog) {
  Watchdog wd("launches outrunning the loop budget", 120);
  Config c = test_config();
  c.loop_budget_us = 1;
  auto made = Engine::create(c);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  Engine& e = **made;
  auto p = e.compile_sync(0, util::kKernels);
  ASSERT_TRUE(p.ok());
  const Kernel set = e.kernel(*p, "set_value").value();
  std::vector<Buffer> bufs;
  for (int i = 0; i < 64; ++i) bufs.push_back(e.allocate(0, 64 * 4).value());
  constexpr int kBatch = 500, kBatches = 80;
  std::uint64_t most_unfinished = 0;
  for (int b = 0; b < kBatches; ++b) {
    for (int i = 0; i < kBatch; ++i)
      ASSERT_TRUE(e.launch(make_launch(set, {buf(bufs[i % 64]), u32(static_cast<std::uint32_t>(i)), u32(64)}, {64})).ok());
    ASSERT_TRUE(e.run_until([&] {
                   const EngineStats s = e.stats();
                   most_unfinished = std::max(most_unfinished, s.unfinished);
                   return s.in_flight + s.pending < 2 * kBatch;
                 }).ok());
  }
  ASSERT_TRUE(e.finish().ok());
  EXPECT_EQ(e.stats().unfinished, 0u);
  // In flight and pending stay under 2 * kBatch once run_until returns; at
  // most 1024 outcomes wait for delivery; records finished behind an older
  // unfinished one on another queue stay until it finishes, which on a
  // loaded machine can span several batches (8072 seen in CI). The hidden
  // backlog grew with the launches instead: 14102 of 20000 before the fix.
  EXPECT_LT(most_unfinished, static_cast<std::uint64_t>(kBatch) * kBatches / 2);
}

}  // namespace uvcl::testing::loop_budget
