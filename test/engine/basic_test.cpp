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

TEST_F(BasicTest, EveryCompletionIsReadFromTheDriverAndCounted) {
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
  ASSERT_TRUE(eng().finish().ok());
  const EngineStats after = eng().stats();
  EXPECT_EQ(after.submitted - before.submitted, std::uint64_t{kLaunches});
  // Each command's completion status is read from its event at least once.
  EXPECT_GE(after.status_queries - before.status_queries, std::uint64_t{kLaunches});
}

TEST_F(BasicTest, ParamsInferredFromArgInfo) {
  Kernel k = kernel(compile(kAddOne), "add_one");
  auto params = eng().kernel_params(k);
  ASSERT_TRUE(params.ok());
  ASSERT_EQ(params->size(), 3u);
  EXPECT_EQ((*params)[0].access, ParamAccess::ReadOnly);
  EXPECT_EQ((*params)[1].access, ParamAccess::Written);
  EXPECT_EQ((*params)[2].access, ParamAccess::Scalar);
  EXPECT_EQ((*params)[2].scalar_size, 4u);
}

}  // namespace
}  // namespace uvcl::testing
