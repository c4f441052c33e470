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

}  // namespace uvcl::testing::loop_budget
