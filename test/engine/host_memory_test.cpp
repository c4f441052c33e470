// alloc_host / read_into: pinned host memory handed to the caller, its
// deferred release, and the errors at its edges.
#include "engine_fixture.hpp"

namespace uvcl::testing {
namespace {

using HostMemoryTest = EngineTest;

std::span<int> ints_of(HostMemory h) {
  return {reinterpret_cast<int*>(h.bytes.data()), h.bytes.size() / sizeof(int)};
}

TEST_F(HostMemoryTest, BorrowWriteAndReadIntoRoundTrip) {
  constexpr std::size_t n = 4096;
  auto in = eng().alloc_host(0, n * sizeof(int));
  ASSERT_TRUE(in.ok()) << in.error().to_string();
  auto out = eng().alloc_host(0, n * sizeof(int));
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_EQ(in->bytes.size(), n * sizeof(int));
  EXPECT_EQ(eng().stats().host_memory_bytes, 2 * n * sizeof(int));
  for (std::size_t i = 0; i < n; ++i) ints_of(*in)[i] = static_cast<int>(i) - 7;
  std::fill(out->bytes.begin(), out->bytes.end(), std::byte{0});

  Kernel k = kernel(compile(kTwiceKernel), "twice");
  auto buf = eng().allocate(0, n * sizeof(int));
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(eng().write(*buf, 0, in->bytes, WriteMode::Borrow).ok());
  ASSERT_TRUE(eng().launch({k, {KernelArg::of(*buf), KernelArg::value<std::uint32_t>(n)}, {n}}).ok());
  std::optional<Result<void>> done;
  ASSERT_TRUE(eng().read_into(*buf, 0, out->bytes, [&](Result<void> r) { done = std::move(r); }).ok());
  ASSERT_TRUE(eng().run_until([&] { return done.has_value(); }).ok());
  ASSERT_TRUE(done->ok()) << done->error().to_string();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(ints_of(*out)[i], 2 * (static_cast<int>(i) - 7)) << i;

  ASSERT_TRUE(eng().release(*in).ok());
  ASSERT_TRUE(eng().release(*out).ok());
  EXPECT_EQ(eng().stats().host_memory_bytes, 0u);
  ASSERT_TRUE(eng().release(*buf).ok());
}

TEST_F(HostMemoryTest, ReadIntoPageableMemoryAndAnOffset) {
  std::vector<int> v(256);
  for (int i = 0; i < 256; ++i) v[i] = i * i;
  Buffer b = upload(v);
  std::vector<int> back(64, -1);
  std::optional<Result<void>> done;
  ASSERT_TRUE(eng().read_into(b, 128 * sizeof(int), std::as_writable_bytes(std::span(back)),
                              [&](Result<void> r) { done = std::move(r); }).ok());
  ASSERT_TRUE(eng().run_until([&] { return done.has_value(); }).ok());
  ASSERT_TRUE(done->ok()) << done->error().to_string();
  for (int i = 0; i < 64; ++i) ASSERT_EQ(back[i], (128 + i) * (128 + i)) << i;
}

TEST_F(HostMemoryTest, ReleaseWhileInFlightTakesEffectAtCompletion) {
  constexpr std::size_t bytes = std::size_t{8} << 20;
  auto h = eng().alloc_host(0, bytes);
  ASSERT_TRUE(h.ok());
  std::fill(h->bytes.begin(), h->bytes.end(), std::byte{0x5a});
  auto b = eng().allocate(0, bytes);
  ASSERT_TRUE(b.ok());
  bool written = false;
  ASSERT_TRUE(eng().write(*b, 0, h->bytes, WriteMode::Borrow, [&](Result<void> r) {
    EXPECT_TRUE(r.ok());
    written = true;
  }).ok());
  ASSERT_TRUE(eng().release(*h).ok());
  if (!written) {
    EXPECT_EQ(eng().stats().host_memory_bytes, bytes) << "freed while its write was in flight";
    // Released memory is no longer a valid transfer source.
    auto again = eng().write(*b, 0, h->bytes.first(64), WriteMode::Borrow);
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.error().message.find("host memory " + std::to_string(h->id) + " was released"),
              std::string::npos) << again.error().message;
  }
  ASSERT_TRUE(eng().finish().ok());
  EXPECT_TRUE(written);
  EXPECT_EQ(eng().stats().host_memory_bytes, 0u);
  auto got = eng().read_sync(*b, bytes - 16, 16);
  ASSERT_TRUE(got.ok());
  for (std::byte x : *got) ASSERT_EQ(x, std::byte{0x5a});
}

TEST_F(HostMemoryTest, ReleaseInsideTheDoneCallback) {
  auto h = eng().alloc_host(0, 4096);
  ASSERT_TRUE(h.ok());
  auto b = eng().allocate(0, 4096);
  ASSERT_TRUE(b.ok());
  std::optional<Result<void>> released;
  ASSERT_TRUE(eng().read_into(*b, 0, h->bytes, [&](Result<void>) { released = eng().release(*h); }).ok());
  ASSERT_TRUE(eng().run_until([&] { return released.has_value(); }).ok());
  EXPECT_TRUE(released->ok()) << released->error().to_string();
  EXPECT_EQ(eng().stats().host_memory_bytes, 0u);
}

TEST_F(HostMemoryTest, MisuseIsAClearError) {
  auto zero = eng().alloc_host(0, 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().message, "alloc_host: size must not be 0");
  auto far = eng().alloc_host(eng().device_count(), 64);
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.error().message.find("out of range"), std::string::npos) << far.error().message;
  auto huge = eng().alloc_host(0, eng().device(0)->max_allocation + 1);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().status, Status::MemoryAllocation);

  auto h = eng().alloc_host(0, 4096);
  ASSERT_TRUE(h.ok());
  auto b = eng().allocate(0, 8192);
  ASSERT_TRUE(b.ok());
  // A range that starts in host memory and runs past its end.
  auto past = eng().write(*b, 0, std::span<const std::byte>(h->bytes.data() + 4000, 200), WriteMode::Borrow);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.error().message.find("runs past the end of host memory"), std::string::npos)
      << past.error().message;
  auto past_read = eng().read_into(*b, 0, std::span<std::byte>(h->bytes.data() + 1, 4096), {});
  ASSERT_FALSE(past_read.ok());
  EXPECT_NE(past_read.error().message.find("read_into: range [1, 1 + 4096)"), std::string::npos)
      << past_read.error().message;
  auto outside = eng().read_into(*b, 8000, h->bytes, {});
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message.find("is outside buffer"), std::string::npos) << outside.error().message;

  ASSERT_TRUE(eng().release(*h).ok());
  auto twice = eng().release(*h);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("is not live host memory"), std::string::npos) << twice.error().message;
  auto never = eng().release(HostMemory{987654, {}});
  ASSERT_FALSE(never.ok());
  EXPECT_EQ(eng().stats().host_memory_bytes, 0u);
  EXPECT_TRUE(eng().finish().ok());
}

// Its object counts are checked by Counting.HostMemoryIsFreedWithTheEngine.
TEST_F(HostMemoryTest, EngineDestructionEndsTransfersFromHostMemory) {
  auto h = eng().alloc_host(0, std::size_t{1} << 20);
  ASSERT_TRUE(h.ok());
  auto b = eng().allocate(0, std::size_t{1} << 20);
  ASSERT_TRUE(b.ok());
  bool called = false;
  ASSERT_TRUE(eng().write(*b, 0, h->bytes, WriteMode::Borrow, [&](Result<void>) { called = true; }).ok());
  engine_.reset();
  EXPECT_TRUE(called);
}

}  // namespace
}  // namespace uvcl::testing
