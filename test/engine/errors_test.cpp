// Errors: a launch that fails at enqueue (delivered to the listener at once,
// to reads of what it would have written, and to the next drain), build
// errors with their log, and API-edge errors with clear messages.
#include <cctype>

#include "engine_test_util.hpp"

namespace uvcl::testing::errors {

using util::buf;
using util::make_launch;
using util::u32;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// "command N" not followed by another digit ("command 5" is not "command 57").
bool names_command(const std::string& s, const std::string& id) {
  const std::string needle = "command " + id;
  for (std::size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) {
    const std::size_t end = at + needle.size();
    if (end == s.size() || !std::isdigit(static_cast<unsigned char>(s[end]))) return true;
  }
  return false;
}

class Errors : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    program_ = compile(util::kKernels);
    reqd64_ = kernel(program_, "reqd64");
    set_ = kernel(program_, "set_value");
    axpbc_ = kernel(program_, "axpbc");
    add_ = kernel(program_, "add_offset");
    local_ = kernel(program_, "with_local");
  }
  Program program_;
  Kernel reqd64_, set_, axpbc_, add_, local_;
};

// reqd_work_group_size(64) launched with local 32: the engine's checks pass
// (32 <= the kernel's limit), clEnqueueNDRangeKernel says
// CL_INVALID_WORK_GROUP_SIZE.
// A device index past the last is an error value naming the index and the
// count (it threw std::out_of_range).
TEST_F(Errors, DeviceWithAnIndexPastTheLastIsAnError) {
  const std::size_t count = eng().device_count();
  auto d = eng().device(count);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status(), Status::InvalidArgument);
  EXPECT_NE(d.error().message.find("index " + std::to_string(count)), std::string::npos) << d.error().message;
  EXPECT_NE(d.error().message.find(std::to_string(count) + " devices"), std::string::npos) << d.error().message;
  auto first = eng().device(0);
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_EQ(first->index, 0u);
}

TEST_F(Errors, FailedLaunchPoisonsWhatItWritesUntilRewritten) {
  constexpr std::uint32_t kN = 256;
  std::vector<Error> heard;
  eng().set_error_listener([&](const Error& e) { heard.push_back(e); });
  const std::vector<std::uint32_t> in_values = util::iota_values(kN, 1, 0);
  Buffer in = upload(in_values);
  auto out = eng().allocate(0, kN * 4);
  auto downstream = eng().allocate(0, kN * 4);
  auto other = eng().allocate(0, kN * 4);
  ASSERT_TRUE(out.ok() && downstream.ok() && other.ok());
  ASSERT_TRUE(eng().launch(make_launch(set_, {buf(other.value()), u32(70), u32(kN)}, {kN})).ok());
  ASSERT_TRUE(eng().finish().ok());

  const Launch bad = make_launch(reqd64_, {buf(in), buf(out.value())}, {kN}, {32}, 4242);
  ASSERT_TRUE(eng().check_launch(bad).ok()) << "this launch is meant to pass API validation";
  ASSERT_TRUE(eng().launch(bad).ok());
  // A launch that reads the poisoned output inherits the failure.
  ASSERT_TRUE(eng()
                  .launch(make_launch(add_, {buf(out.value()), buf(downstream.value()), u32(0), u32(1), u32(kN)}, {kN}))
                  .ok());
  EXPECT_TRUE(heard.empty()) << "nothing was submitted yet";

  // (a) The listener hears it as soon as the window is submitted.
  eng().poll();
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].status, Status::KernelLaunch) << heard[0].to_string();
  EXPECT_TRUE(contains(heard[0].message, "CL_INVALID_WORK_GROUP_SIZE")) << heard[0].message;
  EXPECT_TRUE(contains(heard[0].message, "reqd64")) << heard[0].message;
  EXPECT_TRUE(contains(heard[0].message, "4242")) << "the tag: " << heard[0].message;
  // "launch (command N, ...": the failed command's id, which later errors name.
  const std::size_t at = heard[0].message.find("command ");
  ASSERT_NE(at, std::string::npos) << heard[0].message;
  const std::string failed_command = std::to_string(std::stoull(heard[0].message.substr(at + 8)));

  // (b) A read of what it would have written gets the error, naming it.
  auto r = eng().read_sync(out.value(), 0, kN * 4);
  ASSERT_FALSE(r.ok()) << "read stale data of a failed launch";
  EXPECT_NE(r.status(), Status::Ok);
  EXPECT_TRUE(names_command(r.error().message, failed_command)) << failed_command << " / " << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "buffer " + std::to_string(out.value().id))) << r.error().message;
  // ... and so does a read of data computed from it.
  auto d = eng().read_sync(downstream.value(), 0, kN * 4);
  ASSERT_FALSE(d.ok()) << "read data computed from a failed launch's output";
  // An unrelated buffer reads fine.
  const auto fine = download<std::uint32_t>(other.value(), kN);
  ASSERT_EQ(fine.size(), kN);
  for (std::uint32_t i = 0; i < kN; ++i) EXPECT_EQ(fine[i], 70 + i);

  // (c) The next drain reports it, once.
  auto f = eng().finish();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status(), Status::KernelLaunch);
  EXPECT_TRUE(contains(f.error().message, "CL_INVALID_WORK_GROUP_SIZE")) << f.error().message;
  EXPECT_TRUE(eng().finish().ok()) << "the error was delivered already";
  EXPECT_EQ(heard.size(), 1u) << "the listener hears each failure once";

  // Still poisoned until written again; then readable.
  EXPECT_FALSE(eng().read_sync(out.value(), 0, 4).ok());
  const std::vector<std::uint32_t> fresh = util::iota_values(kN, 2, 9);
  ASSERT_TRUE(eng().write(out.value(), 0, bytes_of(fresh)).ok());
  EXPECT_EQ(download<std::uint32_t>(out.value(), kN), fresh);
  // A good launch of the same shape works: the kernel and device are fine.
  ASSERT_TRUE(eng().launch(make_launch(reqd64_, {buf(in), buf(out.value())}, {kN}, {64})).ok());
  const auto good = download<std::uint32_t>(out.value(), kN);
  ASSERT_EQ(good.size(), kN);
  for (std::uint32_t i = 0; i < kN; ++i) EXPECT_EQ(good[i], i + 1);
  EXPECT_TRUE(eng().finish().ok());
  EXPECT_FALSE(eng().device_lost(0));
}

// engine.hpp: "later commands reading them fail with THAT error". A read of
// a poisoned buffer, and of data computed from it, must say why: the root
// failure (command and cause), not only "command M failed".
TEST_F(Errors, PoisonCarriesTheRootCause) {
  constexpr std::uint32_t kN = 128;
  std::vector<Error> heard;
  eng().set_error_listener([&](const Error& e) { heard.push_back(e); });
  Buffer in = upload(util::iota_values(kN, 1, 0));
  auto out = eng().allocate(0, kN * 4);
  auto downstream = eng().allocate(0, kN * 4);
  ASSERT_TRUE(out.ok() && downstream.ok());
  ASSERT_TRUE(eng().launch(make_launch(reqd64_, {buf(in), buf(out.value())}, {kN}, {32}, 4242)).ok());
  ASSERT_TRUE(eng()
                  .launch(make_launch(add_, {buf(out.value()), buf(downstream.value()), u32(0), u32(1), u32(kN)}, {kN}))
                  .ok());
  eng().poll();
  ASSERT_EQ(heard.size(), 1u);
  const std::size_t at = heard[0].message.find("command ");
  ASSERT_NE(at, std::string::npos) << heard[0].message;
  const std::string root = std::to_string(std::stoull(heard[0].message.substr(at + 8)));
  auto r = eng().read_sync(out.value(), 0, kN * 4);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message, "CL_INVALID_WORK_GROUP_SIZE")) << r.error().message;
  auto d = eng().read_sync(downstream.value(), 0, kN * 4);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(names_command(d.error().message, root)) << "root command " << root << ": " << d.error().message;
  EXPECT_TRUE(contains(d.error().message, "CL_INVALID_WORK_GROUP_SIZE")) << d.error().message;
  EXPECT_FALSE(eng().finish().ok());
}

// A partial write of a poisoned buffer keeps the rest poisoned.
TEST_F(Errors, PartialRewriteOfAPoisonedBufferStaysPoisoned) {
  constexpr std::uint32_t kN = 128;
  int heard = 0;
  eng().set_error_listener([&](const Error&) { ++heard; });
  Buffer in = upload(util::iota_values(kN, 1, 0));
  auto out = eng().allocate(0, kN * 4);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(eng().launch(make_launch(reqd64_, {buf(in), buf(out.value())}, {kN}, {32})).ok());
  const std::vector<std::uint32_t> half(kN / 2, 5u);
  ASSERT_TRUE(eng().write(out.value(), 0, bytes_of(half)).ok());
  EXPECT_FALSE(eng().read_sync(out.value(), 0, kN * 4).ok()) << "the unwritten half holds no valid data";
  EXPECT_EQ(heard, 1);
  EXPECT_FALSE(eng().finish().ok());
  const std::vector<std::uint32_t> whole(kN, 6u);
  ASSERT_TRUE(eng().write(out.value(), 0, bytes_of(whole)).ok());
  EXPECT_EQ(download<std::uint32_t>(out.value(), kN), whole);
  EXPECT_TRUE(eng().finish().ok());
}

TEST_F(Errors, BuildErrorCarriesTheCompilerLog) {
  const std::string broken =
      "__kernel void broken(__global uint* out) { out[get_global_id(0)] = undeclared_thing_xyz + 1; }\n";
  auto p = eng().compile_sync(0, broken);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status(), Status::KernelCompilation);
  EXPECT_TRUE(contains(p.error().message, "undeclared_thing_xyz")) << p.error().message;
  // Asynchronously: the callback gets the same error, the handle is not usable.
  bool called = false;
  Result<void> built;
  auto q = eng().compile(0, broken, "", [&](Result<void> r) {
    called = true;
    built = std::move(r);
  });
  ASSERT_TRUE(q.ok()) << q.error().to_string();
  ASSERT_TRUE(eng().run_until([&] { return called; }).ok());
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status(), Status::KernelCompilation);
  EXPECT_TRUE(contains(built.error().message, "undeclared_thing_xyz")) << built.error().message;
  auto k = eng().kernel(q.value(), "broken");
  EXPECT_FALSE(k.ok());
  EXPECT_TRUE(eng().release(q.value()).ok());
  // A bad option is a build error too.
  auto o = eng().compile_sync(0, util::kKernels, "-cl-no-such-option-xyz");
  EXPECT_FALSE(o.ok());
  // The engine still builds good code.
  EXPECT_TRUE(eng().compile_sync(0, util::kKernels).ok());
}

TEST_F(Errors, MissingEntryPointIsNamed) {
  auto k = eng().kernel(program_, "no_such_entry_point");
  ASSERT_FALSE(k.ok());
  EXPECT_TRUE(contains(k.error().message, "no_such_entry_point")) << k.error().message;
  // Wrong declared access count.
  auto d = eng().kernel(program_, "set_value", {ParamAccess::Written});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status(), Status::IncorrectKernelArg);
  // Empty source; stale program handle.
  EXPECT_EQ(eng().compile_sync(0, "").status(), Status::InvalidArgument);
  EXPECT_EQ(eng().kernel(Program{987654}, "x").status(), Status::InvalidArgument);
}

TEST_F(Errors, ApiEdgeErrorsHaveClearMessages) {
  constexpr std::uint32_t kN = 64;
  auto a = eng().allocate(0, kN * 4);
  auto b = eng().allocate(0, kN * 4);
  auto out = eng().allocate(0, kN * 4);
  ASSERT_TRUE(a.ok() && b.ok() && out.ok());
  const std::vector<KernelArg> good = {buf(a.value()), buf(b.value()), buf(out.value()), u32(1), u32(kN)};
  ASSERT_TRUE(eng().check_launch(make_launch(axpbc_, good, {kN})).ok());
  int listener_calls = 0;
  eng().set_error_listener([&](const Error&) { ++listener_calls; });

  struct Case {
    const char* what;
    Launch launch;
    Status status;
    std::vector<std::string> mentions;
  };
  auto with_arg = [&](std::size_t i, KernelArg arg) {
    std::vector<KernelArg> args = good;
    args[i] = arg;
    return args;
  };
  std::vector<KernelArg> too_few(good.begin(), good.end() - 1);
  const DeviceInfo info = *eng().device(0);
  const std::size_t max_group = info.max_work_group_size;
  std::vector<Case> cases = {
      {"wrong argument count", make_launch(axpbc_, too_few, {kN}), Status::IncorrectKernelArg,
       {"axpbc", "takes 5 arguments, got 4"}},
      {"buffer where a scalar is expected", make_launch(axpbc_, with_arg(3, buf(a.value())), {kN}),
       Status::IncorrectKernelArg, {"argument 3", "expects a scalar, got a buffer"}},
      {"scalar where a buffer is expected", make_launch(axpbc_, with_arg(0, u32(1)), {kN}),
       Status::IncorrectKernelArg, {"argument 0", "expects a buffer, got a scalar"}},
      {"scalar size mismatch", make_launch(axpbc_, with_arg(4, KernelArg::value<std::uint64_t>(kN)), {kN}),
       Status::IncorrectKernelArg, {"argument 4", "4 bytes", "8-byte"}},
      {"local size for a buffer", make_launch(axpbc_, with_arg(2, KernelArg::local(64)), {kN}),
       Status::IncorrectKernelArg, {"argument 2"}},
      {"local memory beyond the device's",
       make_launch(local_, {buf(out.value()), KernelArg::local(info.local_memory + 1)}, {kN}, {kN}),
       Status::IncorrectKernelArg, {"local size", std::to_string(info.local_memory)}},
      {"global not a multiple of local", make_launch(axpbc_, good, {100}, {64}), Status::KernelLaunch,
       {"100", "not a multiple", "64"}},
      {"local beyond the work-item limit", make_launch(axpbc_, good, {max_group * 4}, {info.max_work_item_sizes[0] * 2}),
       Status::KernelLaunch, {"local size", std::to_string(info.max_work_item_sizes[0])}},
      {"work-group beyond the limit", make_launch(axpbc_, good, {64, max_group}, {64, max_group}),
       Status::KernelLaunch, {"work-group", std::to_string(64 * max_group), "exceeds the limit"}},
      {"zero global size", make_launch(axpbc_, good, {0}), Status::KernelLaunch, {"must not be 0"}},
      {"four axes", make_launch(axpbc_, good, {1, 1, 1, 1}), Status::KernelLaunch, {"4 axes"}},
      {"local axes differ", make_launch(axpbc_, good, {64, 1}, {64}), Status::KernelLaunch, {"axes"}},
      {"groups from a non-integer argument",
       make_launch(axpbc_, good, {GlobalAxis::groups_in_arg(0)}, {64}), Status::KernelLaunch, {"argument 0"}},
      {"stale kernel", make_launch(Kernel{999999}, good, {kN}), Status::InvalidArgument, {"not a live kernel"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto checked = eng().check_launch(c.launch);
    auto launched = eng().launch(c.launch);
    ASSERT_FALSE(launched.ok());
    ASSERT_FALSE(checked.ok());
    EXPECT_EQ(launched.status(), c.status) << launched.error().to_string();
    EXPECT_EQ(checked.status(), c.status);
    EXPECT_EQ(checked.error().message, launched.error().message);
    for (const std::string& m : c.mentions) EXPECT_TRUE(contains(launched.error().message, m)) << launched.error().message;
  }
  // Errors at the edge are returned, not reported: nothing entered a window.
  EXPECT_EQ(eng().stats().pending, 0u);
  EXPECT_EQ(eng().stats().launches, 0u);

  // A released buffer as an argument.
  auto gone = eng().allocate(0, kN * 4);
  ASSERT_TRUE(gone.ok());
  ASSERT_TRUE(eng().release(gone.value()).ok());
  auto rel = eng().launch(make_launch(axpbc_, with_arg(1, buf(gone.value())), {kN}));
  ASSERT_FALSE(rel.ok());
  EXPECT_EQ(rel.status(), Status::InvalidArgument);
  EXPECT_TRUE(contains(rel.error().message, "buffer " + std::to_string(gone.value().id))) << rel.error().message;
  EXPECT_TRUE(contains(rel.error().message, "argument 1")) << rel.error().message;
  // Release twice.
  auto twice = eng().release(gone.value());
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status(), Status::InvalidArgument);
  EXPECT_TRUE(contains(twice.error().message, "not a live buffer")) << twice.error().message;
  EXPECT_EQ(eng().release(Buffer{0}).status(), Status::InvalidArgument);

  // Allocation: zero bytes, beyond free bytes (with both numbers), bad device.
  auto zero = eng().allocate(0, 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status(), Status::InvalidArgument);
  EXPECT_EQ(zero.error().message, "allocate: size must not be 0");
  const std::uint64_t free = eng().free_bytes(0);
  auto huge = eng().allocate(0, free + 1);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status(), Status::MemoryAllocation);
  EXPECT_TRUE(contains(huge.error().message, std::to_string(free + 1))) << huge.error().message;
  EXPECT_TRUE(contains(huge.error().message, std::to_string(free))) << huge.error().message;
  EXPECT_EQ(eng().free_bytes(0), free) << "a refused allocation changed the accounting";
  auto bad_device = eng().allocate(eng().device_count() + 5, 16);
  ASSERT_FALSE(bad_device.ok());
  EXPECT_EQ(bad_device.status(), Status::InvalidArgument);
  EXPECT_TRUE(contains(bad_device.error().message, std::to_string(eng().device_count() + 5)))
      << bad_device.error().message;
  EXPECT_EQ(eng().compile(eng().device_count(), util::kKernels, "", [](Result<void>) { ADD_FAILURE(); }).status(),
            Status::InvalidArgument);
  EXPECT_FALSE(eng().device_lost(eng().device_count() + 5));

  // Transfers out of range; a read without callback; callbacks of refused calls never run.
  const std::vector<std::uint32_t> v(kN + 1, 1u);
  auto w = eng().write(a.value(), 0, bytes_of(v), WriteMode::Copy, [](Result<void>) { ADD_FAILURE() << "called"; });
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(contains(w.error().message, "outside buffer")) << w.error().message;
  EXPECT_FALSE(eng().read(a.value(), 4, kN * 4, [](Result<std::span<const std::byte>>) { ADD_FAILURE(); }).ok());
  EXPECT_FALSE(eng().read(a.value(), 0, 0, [](Result<std::span<const std::byte>>) { ADD_FAILURE(); }).ok());
  EXPECT_FALSE(eng().read(gone.value(), 0, 4, [](Result<std::span<const std::byte>>) { ADD_FAILURE(); }).ok());
  EXPECT_EQ(eng().read(a.value(), 0, 4, ReadCallback{}).status(), Status::InvalidArgument);
  EXPECT_FALSE(eng().copy(a.value(), 0, a.value(), 8, 16, [](Result<void>) { ADD_FAILURE(); }).ok())
      << "overlapping ranges of one buffer";
  EXPECT_FALSE(eng().copy(a.value(), 0, b.value(), kN * 4 - 8, 16).ok());
  const std::uint8_t three[3] = {1, 2, 3};
  EXPECT_FALSE(eng().fill(a.value(), std::as_bytes(std::span<const std::uint8_t>(three)), 0, 12).ok());
  const std::uint32_t p4 = 0;
  EXPECT_FALSE(eng().fill(a.value(), std::as_bytes(std::span<const std::uint32_t>(&p4, 1)), 2, 8).ok());

  // Launch of a released kernel; release twice.
  auto k = eng().kernel(program_, "set_value");
  ASSERT_TRUE(k.ok());
  ASSERT_TRUE(eng().release(k.value()).ok());
  auto dead = eng().launch(make_launch(k.value(), {buf(a.value()), u32(1), u32(kN)}, {kN}));
  ASSERT_FALSE(dead.ok());
  EXPECT_EQ(dead.status(), Status::InvalidArgument);
  EXPECT_TRUE(contains(dead.error().message, "not a live kernel")) << dead.error().message;
  EXPECT_EQ(eng().release(k.value()).status(), Status::InvalidArgument);
  EXPECT_EQ(eng().kernel_params(k.value()).status(), Status::InvalidArgument);
  EXPECT_EQ(eng().timed_launch(make_launch(k.value(), {buf(a.value()), u32(1), u32(kN)}, {kN}),
                               [](Result<Timing>) { ADD_FAILURE(); })
                .status(),
            Status::InvalidArgument);

  EXPECT_TRUE(eng().finish().ok());
  EXPECT_EQ(listener_calls, 0) << "API-edge errors are returned, not reported";
}

// A kernel released while its launches are pending keeps working for them.
TEST_F(Errors, KernelReleasedWithLaunchesPendingStillRuns) {
  make_engine(test_config(8, 1000));
  Program p = compile(util::kKernels);
  Kernel k = kernel(p, "set_value");
  constexpr std::uint32_t kN = 64;
  auto b = eng().allocate(0, kN * 4);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(eng().launch(make_launch(k, {buf(b.value()), u32(77), u32(kN)}, {kN})).ok());
  ASSERT_TRUE(eng().release(k).ok());
  ASSERT_TRUE(eng().release(p).ok());
  const auto got = download<std::uint32_t>(b.value(), kN);
  ASSERT_EQ(got.size(), kN);
  for (std::uint32_t i = 0; i < kN; ++i) EXPECT_EQ(got[i], 77 + i);
  EXPECT_TRUE(eng().finish().ok());
}

}  // namespace uvcl::testing::errors
