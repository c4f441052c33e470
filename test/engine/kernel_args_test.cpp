// A kernel object's arguments are set only when they change (the engine
// remembers what each was last set to). Launches that alternate buffers and
// values, and a buffer freed and a new one made in its place (a driver may
// hand out the freed handle again), must still see their own arguments.
#include "engine_test_util.hpp"

namespace uvcl::testing::kernel_args {

using util::buf;
using util::make_launch;
using util::u32;

constexpr std::uint32_t kN = 64;

class KernelArgs : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    add_ = kernel(compile(util::kKernels), "add_offset");
  }
  // out[i] = in[i] + add, i < kN
  void add(Buffer in, Buffer out, std::uint32_t v) {
    ASSERT_TRUE(eng().launch(make_launch(add_, {buf(in), buf(out), u32(0), u32(v), u32(kN)}, {kN})).ok());
  }
  Kernel add_;
};

std::vector<std::uint32_t> plus(const std::vector<std::uint32_t>& v, std::uint32_t add) {
  std::vector<std::uint32_t> out(v);
  for (std::uint32_t& x : out) x += add;
  return out;
}

TEST_F(KernelArgs, AlternatingArgumentsReachEachLaunch) {
  const auto a_vals = util::iota_values(kN, 1, 0), c_vals = util::iota_values(kN, 2, 7);
  Buffer a = upload(a_vals), c = upload(c_vals);
  Buffer b = upload(std::vector<std::uint32_t>(kN, 0)), d = upload(std::vector<std::uint32_t>(kN, 0));
  Buffer e = upload(std::vector<std::uint32_t>(kN, 0));
  add(a, b, 1);
  add(c, d, 1);   // both buffers change, the value repeats
  add(a, e, 5);   // the value changes, the input goes back
  EXPECT_EQ(download<std::uint32_t>(b, kN), plus(a_vals, 1));
  EXPECT_EQ(download<std::uint32_t>(d, kN), plus(c_vals, 1));
  EXPECT_EQ(download<std::uint32_t>(e, kN), plus(a_vals, 5));
  add(a, e, 5);  // everything repeats
  EXPECT_EQ(download<std::uint32_t>(e, kN), plus(a_vals, 5));
}

TEST_F(KernelArgs, ANewBufferInAFreedOnesPlaceIsSet) {
  const auto vals = util::iota_values(kN, 3, 1);
  Buffer in = upload(vals);
  for (int round = 0; round < 8; ++round) {
    Buffer out = upload(std::vector<std::uint32_t>(kN, 0));
    add(in, out, static_cast<std::uint32_t>(round));
    EXPECT_EQ(download<std::uint32_t>(out, kN), plus(vals, static_cast<std::uint32_t>(round))) << "round " << round;
    ASSERT_TRUE(eng().release(out).ok());
    ASSERT_TRUE(eng().finish().ok());  // freed now: the next allocation may reuse its handle
  }
}

}  // namespace uvcl::testing::kernel_args
