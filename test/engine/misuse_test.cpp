// Misuse of every public entry point: each call given a bad argument returns
// a clear error naming what and where, runs no callback, leaks no buffer,
// and leaves the engine working (a valid launch afterwards is exact).
// Cases already asserted in errors_test.cpp (argument count and types,
// work-group limits, allocation limits) are not repeated here.
#include <limits>

#include "engine_test_util.hpp"

namespace uvcl::testing::misuse {

using util::buf;
using util::make_launch;
using util::u32;

bool mentions(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class Misuse : public EngineTest {
 protected:
  static constexpr std::uint32_t kN = 64;
  void SetUp() override {
    EngineTest::SetUp();
    program_ = compile(util::kKernels);
    set_ = kernel(program_, "set_value");
  }
  // The engine still computes exactly after the misuse.
  void expect_still_works() {
    auto out = eng().allocate(0, kN * 4);
    ASSERT_TRUE(out.ok()) << out.error().to_string();
    ASSERT_TRUE(eng().launch(make_launch(set_, {buf(out.value()), u32(500), u32(kN)}, {kN})).ok());
    const auto got = download<std::uint32_t>(out.value(), kN);
    ASSERT_EQ(got.size(), kN);
    for (std::uint32_t i = 0; i < kN; ++i) EXPECT_EQ(got[i], 500 + i);
    ASSERT_TRUE(eng().release(out.value()).ok());
    EXPECT_TRUE(eng().finish().ok());
  }
  void expect_error(const Result<void>& r, Status status, const std::vector<std::string>& parts) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status(), status) << r.error().to_string();
    for (const std::string& p : parts) EXPECT_TRUE(mentions(r.error().message, p)) << r.error().message;
  }
  Program program_;
  Kernel set_;
};

TEST_F(Misuse, EveryTransferOnAReleasedBufferNamesTheBuffer) {
  auto live = eng().allocate(0, kN * 4);
  auto gone = eng().allocate(0, kN * 4);
  ASSERT_TRUE(live.ok() && gone.ok());
  const Buffer g = gone.value();
  ASSERT_TRUE(eng().release(g).ok());
  const std::string name = "buffer " + std::to_string(g.id);
  const std::vector<std::uint32_t> v(kN, 7u);
  const std::uint32_t pattern = 0;
  auto never = [](Result<void>) { ADD_FAILURE() << "callback of a refused call ran"; };
  auto never_read = [](Result<std::span<const std::byte>>) { ADD_FAILURE() << "callback of a refused call ran"; };

  expect_error(eng().write(g, 0, bytes_of(v), WriteMode::Copy, never), Status::InvalidArgument, {name});
  expect_error(eng().write(g, 0, bytes_of(v), WriteMode::Borrow, never), Status::InvalidArgument, {name});
  expect_error(eng().read(g, 0, 4, never_read), Status::InvalidArgument, {name});
  expect_error(eng().fill(g, std::as_bytes(std::span<const std::uint32_t>(&pattern, 1)), 0, 16, never),
               Status::InvalidArgument, {name});
  expect_error(eng().copy(g, 0, live.value(), 0, 16, never), Status::InvalidArgument, {name});
  expect_error(eng().copy(live.value(), 0, g, 0, 16, never), Status::InvalidArgument, {name});
  expect_error(eng().retain(g), Status::InvalidArgument, {name});
  expect_error(eng().release(g), Status::InvalidArgument, {name});
  EXPECT_FALSE(eng().buffer_size(g).ok());
  EXPECT_FALSE(eng().read_sync(g, 0, 4).ok());
  expect_error(eng().launch(make_launch(set_, {buf(g), u32(1), u32(kN)}, {kN})), Status::InvalidArgument,
               {name, "argument 0"});

  ASSERT_TRUE(eng().release(live.value()).ok());
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_EQ(eng().stats().live_buffers, 0u) << "a refused call kept a buffer alive";
  EXPECT_EQ(eng().stats().pending, 0u);
  expect_still_works();
  EXPECT_EQ(eng().stats().live_buffers, 0u);
}

TEST_F(Misuse, HandlesThatWereNeverIssuedAreRefused) {
  const Buffer never_issued{0xdeadbeef};
  expect_error(eng().release(never_issued), Status::InvalidArgument, {"not a live buffer"});
  expect_error(eng().retain(Buffer{}), Status::InvalidArgument, {});
  expect_error(eng().release(Program{0xdeadbeef}), Status::InvalidArgument, {});
  expect_error(eng().release(Kernel{0xdeadbeef}), Status::InvalidArgument, {});
  EXPECT_EQ(eng().kernel_params(Kernel{}).status(), Status::InvalidArgument);
  expect_still_works();
}

// Buffers freed and allocated again reuse the engine's records: the handle
// of a freed buffer must not name the buffer made in its place, and a
// handle of another kind must not be taken for a buffer.
TEST_F(Misuse, AFreedBufferStaysDeadWhenItsPlaceIsReused) {
  std::vector<Buffer> freed;
  for (int i = 0; i < 4; ++i) {
    auto b = eng().allocate(0, kN * 4);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    freed.push_back(b.value());
    ASSERT_TRUE(eng().release(b.value()).ok());
    ASSERT_TRUE(eng().finish().ok());
  }
  auto now = eng().allocate(0, kN * 4);
  ASSERT_TRUE(now.ok()) << now.error().to_string();
  ASSERT_TRUE(eng().launch(make_launch(set_, {buf(now.value()), u32(9), u32(kN)}, {kN})).ok());
  for (const Buffer& old : freed) {
    ASSERT_NE(old.id, now.value().id);
    expect_error(eng().retain(old), Status::InvalidArgument, {"buffer " + std::to_string(old.id), "not a live buffer"});
    expect_error(eng().release(old), Status::InvalidArgument, {"not a live buffer"});
    const auto size = eng().buffer_size(old);
    ASSERT_FALSE(size.ok());
    EXPECT_TRUE(mentions(size.error().message, "not a live buffer")) << size.error().message;
    const auto refused = eng().launch(make_launch(set_, {buf(old), u32(1), u32(kN)}, {kN}));
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(mentions(refused.error().message, "buffer " + std::to_string(old.id))) << refused.error().message;
  }
  EXPECT_EQ(eng().buffer_size(Buffer{set_.id}).status(), Status::InvalidArgument) << "a kernel's id as a buffer";
  EXPECT_EQ(eng().buffer_size(Buffer{program_.id}).status(), Status::InvalidArgument) << "a program's id as a buffer";
  const auto got = download<std::uint32_t>(now.value(), kN);
  ASSERT_EQ(got.size(), kN);
  for (std::uint32_t i = 0; i < kN; ++i) EXPECT_EQ(got[i], 9 + i) << "a refused launch touched the new buffer";
  ASSERT_TRUE(eng().release(now.value()).ok());
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_EQ(eng().stats().live_buffers, 0u);
}

TEST_F(Misuse, ReleasedProgramAndKernelAreRefused) {
  auto p = eng().compile_sync(0, util::kKernels);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  auto k = eng().kernel(p.value(), "set_value");
  ASSERT_TRUE(k.ok());
  ASSERT_TRUE(eng().release(k.value()).ok());
  ASSERT_TRUE(eng().release(p.value()).ok());
  auto out = eng().allocate(0, kN * 4);
  ASSERT_TRUE(out.ok());
  expect_error(eng().launch(make_launch(k.value(), {buf(out.value()), u32(1), u32(kN)}, {kN})),
               Status::InvalidArgument, {"not a live kernel"});
  expect_error(eng().check_launch(make_launch(k.value(), {buf(out.value()), u32(1), u32(kN)}, {kN})),
               Status::InvalidArgument, {"not a live kernel"});
  auto from_dead = eng().kernel(p.value(), "set_value");
  ASSERT_FALSE(from_dead.ok());
  EXPECT_EQ(from_dead.status(), Status::InvalidArgument) << from_dead.error().to_string();
  expect_error(eng().release(p.value()), Status::InvalidArgument, {});
  expect_error(eng().release(k.value()), Status::InvalidArgument, {});
  ASSERT_TRUE(eng().release(out.value()).ok());
  expect_still_works();
  EXPECT_EQ(eng().stats().live_buffers, 0u);
}

TEST_F(Misuse, SizesOutsideTheDeviceAreRefused) {
  auto out = eng().allocate(0, kN * 4);
  ASSERT_TRUE(out.ok());
  const std::vector<KernelArg> args = {buf(out.value()), u32(1), u32(kN)};
  struct Case {
    const char* what;
    Launch launch;
  };
  const std::vector<Case> cases = {
      {"zero global size", make_launch(set_, args, {0})},
      {"zero on the second axis", make_launch(set_, args, {kN, 0})},
      {"no axis at all", make_launch(set_, args, {})},
      {"local not dividing global", make_launch(set_, args, {kN}, {7})},
      {"zero local size", make_launch(set_, args, {kN}, {0})},
      {"groups from an argument out of range", make_launch(set_, args, {GlobalAxis::groups_in_arg(9)}, {8})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto r = eng().launch(c.launch);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status() == Status::KernelLaunch || r.status() == Status::InvalidArgument)
        << r.error().to_string();
    EXPECT_TRUE(mentions(r.error().message, "set_value")) << "names the kernel: " << r.error().message;
  }
  EXPECT_EQ(eng().stats().pending, 0u);
  EXPECT_EQ(eng().stats().launches, 0u);
  ASSERT_TRUE(eng().release(out.value()).ok());
  expect_still_works();
}

TEST_F(Misuse, BoundsAndEmptySpansAreRefused) {
  auto a = eng().allocate(0, kN * 4);
  ASSERT_TRUE(a.ok());
  const Buffer b = a.value();
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  const std::vector<std::uint32_t> v(4, 1u);
  const std::uint32_t p4 = 0;
  const auto pattern = std::as_bytes(std::span<const std::uint32_t>(&p4, 1));
  auto never_read = [](Result<std::span<const std::byte>>) { ADD_FAILURE() << "callback of a refused call ran"; };

  expect_error(eng().write(b, kN * 4, bytes_of(v)), Status::InvalidArgument, {"outside buffer"});
  expect_error(eng().write(b, huge - 2, bytes_of(v)), Status::InvalidArgument, {"outside buffer"});
  expect_error(eng().write(b, 0, std::span<const std::byte>{}), Status::InvalidArgument, {});
  expect_error(eng().read(b, huge - 2, 8, never_read), Status::InvalidArgument, {"outside buffer"});
  expect_error(eng().read(b, 8, huge - 4, never_read), Status::InvalidArgument, {"outside buffer"});
  expect_error(eng().fill(b, std::span<const std::byte>{}, 0, 16), Status::InvalidArgument, {});
  expect_error(eng().fill(b, pattern, kN * 4, 4), Status::InvalidArgument, {});
  expect_error(eng().fill(b, pattern, huge - 3, 8), Status::InvalidArgument, {});
  expect_error(eng().copy(b, 0, b, 0, 0), Status::InvalidArgument, {});
  expect_error(eng().copy(b, huge - 3, b, 0, 8), Status::InvalidArgument, {});
  EXPECT_EQ(eng().compile(0, "", "", [](Result<void>) { ADD_FAILURE(); }).status(), Status::InvalidArgument);
  EXPECT_FALSE(eng().kernel(program_, "").ok()) << "an empty entry point";
  EXPECT_EQ(eng().stats().pending, 0u);
  ASSERT_TRUE(eng().release(b).ok());
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_EQ(eng().stats().live_buffers, 0u);
  expect_still_works();
}

TEST_F(Misuse, AllocationsAndDeviceIndicesOutOfRange) {
  const std::size_t n = eng().device_count();
  auto huge = eng().allocate(0, std::numeric_limits<std::size_t>::max());
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status(), Status::MemoryAllocation) << huge.error().to_string();
  auto bad = eng().allocate(n, 16);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(mentions(bad.error().message, std::to_string(n))) << bad.error().message;
  auto bad_compile = eng().compile(n + 100, util::kKernels, "", [](Result<void>) { ADD_FAILURE(); });
  ASSERT_FALSE(bad_compile.ok());
  EXPECT_TRUE(mentions(bad_compile.error().message, std::to_string(n + 100))) << bad_compile.error().message;
  EXPECT_EQ(eng().free_bytes(n + 100), 0u);
  EXPECT_FALSE(eng().device_lost(n + 100));
  EXPECT_EQ(eng().stats().live_buffers, 0u);
  expect_still_works();
}

// Known bug: launch() accepts a global size whose axis product overflows
// size_t ({SIZE_MAX, SIZE_MAX}); it should refuse it naming the kernel.
TEST_F(Misuse, GlobalSizeOverflowingSizeTIsRefused) {
  auto out = eng().allocate(0, kN * 4);
  ASSERT_TRUE(out.ok());
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  auto r = eng().launch(make_launch(set_, {buf(out.value()), u32(1), u32(kN)}, {huge, huge}));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r.error().message, "set_value")) << r.error().message;
}

// Many refused calls in a row leak nothing: live buffers and pending stay 0.
TEST_F(Misuse, RepeatedMisuseLeaksNothing) {
  for (int i = 0; i < 2000; ++i) {
    auto b = eng().allocate(0, 256);
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(eng().release(b.value()).ok());
    ASSERT_FALSE(eng().release(b.value()).ok());
    ASSERT_FALSE(eng().write(b.value(), 0, std::span<const std::byte>{}).ok());
    ASSERT_FALSE(eng().launch(make_launch(set_, {buf(b.value()), u32(1), u32(kN)}, {kN})).ok());
  }
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_EQ(eng().stats().live_buffers, 0u);
  EXPECT_EQ(eng().stats().pending, 0u);
  expect_still_works();
}

}  // namespace uvcl::testing::misuse
