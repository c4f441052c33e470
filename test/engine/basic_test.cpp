#include <chrono>
#include <cstdio>
#include <thread>

#include "engine_fixture.hpp"

namespace uvcl::testing {
namespace {

const char* kAddOne = R"CL(
__kernel void add_one(__global const int* in, __global int* out, uint n) {
  size_t i = get_global_id(0);
  if (i < n) out[i] = in[i] + 1;
}
)CL";

using BasicTest = EngineTest;

TEST_F(BasicTest, LaunchAndReadBack) {
  Program p = compile(kAddOne);
  Kernel k = kernel(p, "add_one");
  std::vector<int> in(1000);
  for (int i = 0; i < 1000; ++i) in[i] = i * 3;
  Buffer a = upload(in);
  auto out = eng().allocate(0, in.size() * sizeof(int));
  ASSERT_TRUE(out.ok());
  Launch l{k, {KernelArg::of(a), KernelArg::of(out.value()), KernelArg::value<std::uint32_t>(1000)}, {1024}, {64}};
  ASSERT_TRUE(eng().launch(l).ok());
  auto got = download<int>(out.value(), 1000);
  ASSERT_EQ(got.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(got[i], i * 3 + 1) << i;
  EXPECT_TRUE(eng().finish().ok());
}

// Per-queue timelines: a chain of launches in one window gets no event per
// launch; one fence completes it, read with one status query.
TEST_F(BasicTest, AChainCompletesThroughOneFencePerWindow) {
  Config c = test_config();
  c.command_events = CommandEvents::Awaited;  // "auto" gives every command an event on PoCL
  make_engine(c);
  Program p = compile(kAddOne);
  Kernel k = kernel(p, "add_one");
  std::vector<int> in(64, 1);
  Buffer a = upload(in);
  auto out = eng().allocate(0, in.size() * sizeof(int));
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(eng().finish().ok());
  const EngineStats before = eng().stats();
  constexpr int kLaunches = 50;
  Launch l{k, {KernelArg::of(a), KernelArg::of(out.value()), KernelArg::value<std::uint32_t>(64)}, {64}, {}};
  for (int i = 0; i < kLaunches; ++i) ASSERT_TRUE(eng().launch(l).ok());
  // Submitted and given time to finish, so the count does not depend on how
  // many 1 ms polls a slow build (sanitizers) makes while the chain runs.
  eng().poll();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(eng().finish().ok());
  const EngineStats after = eng().stats();
  EXPECT_EQ(after.submitted - before.submitted, std::uint64_t{kLaunches});
  const std::uint64_t events = after.events - before.events, reads = after.status_queries - before.status_queries;
  EXPECT_GE(after.fences - before.fences, 1u) << "nothing completed the chain";
  EXPECT_LE(events, 2u) << "events per launch: " << static_cast<double>(events) / kLaunches;
  EXPECT_LE(reads, 4u) << "status reads per launch: " << static_cast<double>(reads) / kLaunches;
  std::printf("chain of %d launches: %llu events, %llu status reads\n", kLaunches,
              static_cast<unsigned long long>(events), static_cast<unsigned long long>(reads));
}

TEST_F(BasicTest, ParamsInferredFromArgInfo) {
  Kernel k = kernel(compile(kAddOne), "add_one");
  auto params = eng().kernel_params(k);
  ASSERT_TRUE(params.ok());
  ASSERT_EQ(params->size(), 3u);
  EXPECT_EQ((*params)[0].access, ParamAccess::ReadOnly);
  // `out` is only stored to: WriteOnly from the source (under a condition:
  // not every item's element).
  EXPECT_EQ((*params)[1].access, ParamAccess::WriteOnly);
  EXPECT_FALSE((*params)[1].writes_each_item);
  EXPECT_EQ((*params)[2].access, ParamAccess::Scalar);
  EXPECT_EQ((*params)[2].scalar_size, 4u);
}

}  // namespace
}  // namespace uvcl::testing
