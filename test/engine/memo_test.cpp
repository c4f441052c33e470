#include "engine/program_memo.hpp"
#include "engine_fixture.hpp"

namespace uvcl::testing {
namespace {

using MemoTest = EngineTest;

TEST_F(MemoTest, SecondCompileOfSameSourceReusesTheBuild) {
  const EngineStats before = eng().stats();
  Program a = compile(kTwiceKernel);
  Program b = compile(kTwiceKernel);
  const EngineStats after = eng().stats();
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(after.program_memo_misses - before.program_memo_misses, 1u);
  EXPECT_EQ(after.program_memo_hits - before.program_memo_hits, 1u);
  // A kernel from the reused program runs like one from a fresh build.
  Kernel k = kernel(b, "twice");
  std::vector<int> v{1, 2, 3, 4};
  Buffer buf = upload(v);
  ASSERT_TRUE(eng().launch(Launch{k, {KernelArg::of(buf), KernelArg::value<std::uint32_t>(4)}, {4}, {}}).ok());
  EXPECT_EQ(download<int>(buf, 4), (std::vector<int>{2, 4, 6, 8}));
  // Releasing the first program leaves the memo's and the second's references.
  ASSERT_TRUE(eng().release(a).ok());
  Kernel k2 = kernel(compile(kTwiceKernel), "twice");
  EXPECT_NE(k2.id, 0u);
  EXPECT_EQ(eng().stats().program_memo_hits - before.program_memo_hits, 2u);
}

TEST_F(MemoTest, DifferentOptionsOrSourceBuildAnew) {
  const EngineStats before = eng().stats();
  ASSERT_TRUE(eng().compile_sync(0, kTwiceKernel).ok());
  ASSERT_TRUE(eng().compile_sync(0, kTwiceKernel, "-DUNUSED=1").ok());
  ASSERT_TRUE(eng().compile_sync(0, std::string(kTwiceKernel) + "\n// another source\n").ok());
  const EngineStats after = eng().stats();
  EXPECT_EQ(after.program_memo_misses - before.program_memo_misses, 3u);
  EXPECT_EQ(after.program_memo_hits - before.program_memo_hits, 0u);
}

TEST_F(MemoTest, ZeroEntriesTurnsItOff) {
  Config c = test_config();
  c.program_memo = 0;
  make_engine(c);
  ASSERT_TRUE(eng().compile_sync(0, kTwiceKernel).ok());
  ASSERT_TRUE(eng().compile_sync(0, kTwiceKernel).ok());
  EXPECT_EQ(eng().stats().program_memo_hits, 0u);
}

TEST(ProgramMemo, EvictsLeastRecentlyUsedAndReleasesEachOnce) {
  std::vector<std::intptr_t> released;
  {
    ProgramMemo memo(2, [&](ProgramMemo::Handle h) { released.push_back(reinterpret_cast<std::intptr_t>(h)); });
    auto h = [](std::intptr_t i) { return reinterpret_cast<ProgramMemo::Handle>(i); };
    memo.insert(0, "", "a", h(1), {});
    memo.insert(0, "", "b", h(2), {});
    ASSERT_TRUE(memo.find(0, "", "a"));  // a is now the most recent
    memo.insert(0, "", "c", h(3), {});   // evicts b
    EXPECT_EQ(memo.size(), 2u);
    EXPECT_EQ(released, (std::vector<std::intptr_t>{2}));
    EXPECT_FALSE(memo.find(0, "", "b"));
    EXPECT_FALSE(memo.find(1, "", "a"));   // another device
    EXPECT_FALSE(memo.find(0, "-O0", "a"));  // other options
    ASSERT_TRUE(memo.find(0, "", "c"));
    memo.insert(0, "", "c", h(4), {});  // already present: the new reference is dropped
    EXPECT_EQ(released, (std::vector<std::intptr_t>{2, 4}));
  }
  std::sort(released.begin(), released.end());
  EXPECT_EQ(released, (std::vector<std::intptr_t>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace uvcl::testing
