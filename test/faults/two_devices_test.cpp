// Cross-device copies (staged through pinned memory, completed through a
// user event of the destination context) under faults. Needs two devices:
// run by the faults-2dev test entry with POCL_DEVICES="pthread pthread"
// (skipped with one device).
#include "harness.hpp"

namespace uvcl::faults::two_devices_test {
namespace {

struct CrossOutcome {
  bool copy_done_once = false;
  int copy_callbacks = 0;
  std::optional<Error> copy_error;
  bool read_ok = false, correct = false;
  int read_callbacks = 0;
  std::vector<std::string> errors;
  std::string hang;
};

// Runs the loop until a job's callbacks have run, then drains; returns
// what hung ("" if nothing). The jobs take ~0.2 s on PoCL; 5 s is a hang.
std::string settle(Engine& e, const std::function<bool()>& callbacks_done, std::vector<std::string>& errors) {
  std::string hang = run_for(e, callbacks_done, 5);
  if (!hang.empty()) {
    // Found a hang: complete the user events the engine left open so that
    // the callbacks (which point into the job's frame) run before it
    // returns and the engine can still be destroyed (its teardown clFinish
    // would block).
    const int rescued = shim().rescue_user_events(CL_OUT_OF_RESOURCES);
    std::printf("hang; the shim completed %d user event(s) the engine left open\n", rescued);
    (void)run_for(e, callbacks_done, 10);
  }
  bool drained = false;
  e.drain([&](Result<void> d) {
    drained = true;
    if (!d) errors.push_back(d.error().to_string());
  });
  if (std::string w = run_for(e, [&] { return drained; }, 10); !w.empty()) hang += " drain: " + w;
  return hang;
}

// dev0: write src; copy src -> dst on dev1; launch on dev1 (dst -> out);
// read out. With a fault the result is exact or an error, never wrong.
CrossOutcome cross_job(Engine& e, Kernel k1, std::size_t n) {
  CrossOutcome r;
  e.set_error_listener([&](const Error& err) { r.errors.push_back("listener: " + err.to_string()); });
  std::vector<std::uint32_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::uint32_t>(i * 13 + 5);
  auto src = e.allocate(0, n * 4);
  auto dst = e.allocate(1, n * 4);
  auto out = e.allocate(1, n * 4);
  if (!src || !dst || !out) {
    r.errors.push_back("allocate failed");
    return r;
  }
  std::vector<std::uint32_t> got;
  bool step_ok = true;
  auto note = [&](const Error& err) {
    r.errors.push_back(err.to_string());
    step_ok = false;
  };
  if (auto w = e.write(*src, 0, std::as_bytes(std::span<const std::uint32_t>(host))); !w) note(w.error());
  if (step_ok) {
    auto c = e.copy(*src, 0, *dst, 0, n * 4, [&](Result<void> res) {
      ++r.copy_callbacks;
      if (!res) {
        r.copy_error = res.error();
        r.errors.push_back(res.error().to_string());
      }
    });
    if (!c) note(c.error());
  }
  const bool copy_accepted = step_ok;
  if (step_ok) {
    Launch l{k1,
             {KernelArg::of(*dst), KernelArg::of(*out), KernelArg::value<std::uint32_t>(2),
              KernelArg::value<std::uint32_t>(0), KernelArg::value<std::uint32_t>(static_cast<std::uint32_t>(n))},
             {n},
             {64}};
    if (auto rr = e.launch(l); !rr) note(rr.error());
  }
  bool read_issued = false;
  if (step_ok) {
    auto rd = e.read(*out, 0, n * 4, [&](Result<std::span<const std::byte>> d) {
      ++r.read_callbacks;
      if (!d) {
        r.errors.push_back(d.error().to_string());
        return;
      }
      r.read_ok = true;
      got.resize(n);
      std::memcpy(got.data(), d->data(), n * 4);
    });
    if (!rd) note(rd.error());
    else read_issued = true;
  }
  for (Buffer b : {*src, *dst, *out}) (void)e.release(b);
  auto callbacks_done = [&] {
    return (!read_issued || r.read_callbacks > 0) && (!copy_accepted || r.copy_callbacks > 0);
  };
  r.hang = settle(e, callbacks_done, r.errors);
  if (r.read_ok) {
    r.correct = true;
    for (std::size_t i = 0; i < n; ++i)
      if (got[i] != host[i] * 2 + i) {
        r.correct = false;
        break;
      }
  }
  r.copy_done_once = r.copy_callbacks == (copy_accepted ? 1 : 0);
  e.set_error_listener({});
  return r;
}

// How many of `errors` the error listener heard (the jobs prefix them).
int listener_calls(const std::vector<std::string>& errors) {
  return static_cast<int>(std::count_if(errors.begin(), errors.end(),
                                        [](const std::string& s) { return s.rfind("listener: ", 0) == 0; }));
}

// Creates `le`'s engine over the shim; false, with the engine destroyed,
// when it has fewer than two devices (the caller skips).
bool create_two_devices(LoopEngine& le, const Config& config = shim_config(4)) {
  const auto made = le.create(config);
  EXPECT_TRUE(made.ok()) << made.error().to_string();
  if (made.ok() && le.engine->device_count() >= 2) return true;
  EXPECT_EQ(le.destroy(), 0);
  return false;
}
constexpr const char* kNeedsTwoDevices = "needs two devices (POCL_DEVICES=\"pthread pthread\")";

// Device 1's "advance" kernel, for cross_job.
Kernel advance_on_device_1(Engine& e) {
  auto p1 = e.compile_sync(1, kSource);
  EXPECT_TRUE(p1.ok()) << p1.error().to_string();
  auto k1 = p1 ? e.kernel(*p1, "advance") : Result<Kernel>(p1.error());
  EXPECT_TRUE(k1.ok());
  if (p1) (void)e.release(*p1);  // the kernel keeps it
  return k1 ? *k1 : Kernel{};
}

struct CrossCase {
  const char* spec;
  const char* name_a;  // the error must name one of these
  const char* name_b;
};

void PrintTo(const CrossCase& c, std::ostream* os) { *os << c.spec; }

// Some error names the injected fault: its call or its status.
void expect_named(const std::vector<std::string>& errors, const CrossCase& c) {
  bool named = false;
  for (const std::string& err : errors)
    named = named || err.find(c.name_a) != std::string::npos || err.find(c.name_b) != std::string::npos;
  EXPECT_TRUE(named) << "no error names " << c.name_a << " or " << c.name_b << ": " << ::testing::PrintToString(errors);
}

// The shim's live objects and anomalies when made, to check nothing leaked
// and nothing was misused since.
struct ShimBalance {
  int live = shim().live("all");
  int anomalies = shim().anomalies();
  void expect_unchanged() const {
    EXPECT_EQ(shim().live("all") - live, 0) << "mem " << shim().live("mem") << " event " << shim().live("event");
    EXPECT_EQ(shim().anomalies() - anomalies, 0) << shim().anomaly_log();
  }
};

class TwoDevices : public ::testing::TestWithParam<CrossCase> {};

TEST_P(TwoDevices, CrossDeviceCopyUnderFault) {
  ASSERT_TRUE(shim_ok());
  const CrossCase& c = GetParam();
  Watchdog wd(std::string("cross-device copy, fault ") + c.spec, 90);
  shim().reset_faults();
  const ShimBalance balance;
  {
    LoopEngine le;
    if (!create_two_devices(le)) GTEST_SKIP() << kNeedsTwoDevices;
    Engine& e = *le.engine;
    const Kernel k1 = advance_on_device_1(e);
    ASSERT_NE(k1.id, 0u);
    const std::size_t n = (std::size_t{10} << 20) / 4;  // 10 MiB: three 4 MiB chunks
    if (*c.spec != '\0') shim().set_fault(c.spec);
    CrossOutcome r = cross_job(e, k1, n);
    const int fired = shim().fired();
    shim().reset_faults();
    EXPECT_EQ(r.hang, "") << "errors:\n" << ::testing::PrintToString(r.errors);

    EXPECT_FALSE(r.read_ok && !r.correct) << "the read-back after the cross-device copy is WRONG";
    EXPECT_TRUE(r.copy_done_once) << "copy callback ran " << r.copy_callbacks << " times";
    EXPECT_LE(r.read_callbacks, 1);
    // One injected fault is one failure: the listener hears it once (what
    // fails because of it reaches its own callback only).
    EXPECT_LE(listener_calls(r.errors), 1) << ::testing::PrintToString(r.errors);
    if (*c.spec == '\0') {
      EXPECT_TRUE(r.correct) << ::testing::PrintToString(r.errors);
      EXPECT_TRUE(r.errors.empty()) << ::testing::PrintToString(r.errors);
    } else {
      if (fired == 0) std::printf("%s: not reached (the copy made no such call)\n", c.spec);
      if (fired > 0 && !r.correct) {
        expect_named(r.errors, c);
      }
      // The copy's own callback says what failed, not only a status.
      if (fired > 0 && r.copy_error) {
        const std::string m = r.copy_error->to_string();
        EXPECT_TRUE(m.find(c.name_a) != std::string::npos || m.find(c.name_b) != std::string::npos)
            << "the copy's error names neither " << c.name_a << " nor " << c.name_b << ": " << m;
      }
    }
    // The engine still copies across devices afterwards.
    CrossOutcome again = cross_job(e, k1, n);
    EXPECT_TRUE(again.correct) << "cross-device copy after the fault: " << again.hang << " "
                               << ::testing::PrintToString(again.errors);
    (void)e.release(k1);
    EXPECT_EQ(le.destroy(), 0);
  }
  balance.expect_unchanged();
}

// A cross-device copy that fails inside an error scope: the scope gets the
// failure, and a drain outside every scope does not (each chunk's failure
// was once reported outside any scope, then again as the copy's).
TEST(TwoDevicesScopes, ACopysFailureStaysInItsScope) {
  ASSERT_TRUE(shim_ok());
  Watchdog wd("a failed cross-device copy in an error scope", 60);
  shim().reset_faults();
  LoopEngine le;
  if (!create_two_devices(le)) GTEST_SKIP() << kNeedsTwoDevices;
  Engine& e = *le.engine;
  const std::size_t bytes = std::size_t{10} << 20;  // three 4 MiB chunks
  auto src = e.allocate(0, bytes);
  auto dst = e.allocate(1, bytes);
  ASSERT_TRUE(src.ok() && dst.ok());
  const std::uint32_t v = 7;
  ASSERT_TRUE(e.fill(*src, std::as_bytes(std::span<const std::uint32_t>(&v, 1)), 0, bytes).ok());
  std::vector<std::string> heard;
  e.set_error_listener([&](const Error& err) { heard.push_back(err.to_string()); });
  shim().set_fault("clEnqueueWriteBuffer:2:CL_OUT_OF_RESOURCES");  // the second chunk's write
  e.push_error_scope();
  std::optional<Result<void>> copied, scoped;
  ASSERT_TRUE(e.copy(*src, 0, *dst, 0, bytes, [&](Result<void> r) { copied = std::move(r); }).ok());
  ASSERT_TRUE(e.pop_error_scope([&](Result<void> r) { scoped = std::move(r); }).ok());
  std::optional<Result<void>> drained;
  e.drain([&](Result<void> r) { drained = std::move(r); });
  EXPECT_EQ(run_for(e, [&] { return copied && scoped && drained; }, 10), "");
  const int fired = shim().fired();
  shim().reset_faults();
  ASSERT_GT(fired, 0) << "the chunk write was not reached";
  ASSERT_TRUE(copied && scoped && drained);
  EXPECT_FALSE(copied->ok());
  EXPECT_FALSE(scoped->ok()) << "the scope did not get the copy's failure";
  EXPECT_TRUE(drained->ok()) << "a drain outside every scope got the scoped copy's failure: "
                             << drained->error().to_string();
  EXPECT_EQ(heard.size(), 1u) << "the listener heard the one failure " << heard.size() << " times: "
                              << ::testing::PrintToString(heard);
  e.set_error_listener({});
  for (Buffer b : {*src, *dst}) (void)e.release(b);
  EXPECT_EQ(le.destroy(), 0);
}

// The same for a chunk read made late (beyond the ring, once a chunk has
// landed), failing in its enqueue or on the device: the failure is the
// copy's, in the scope open when the copy was made, not in the drain open
// when the read was made (it was reported there).
TEST(TwoDevicesScopes, ALateChunkReadsFailureStaysInTheCopysScope) {
  ASSERT_TRUE(shim_ok());
  for (const char* fault : {"clEnqueueReadBuffer:3:CL_OUT_OF_RESOURCES", "event:clEnqueueReadBuffer:3:CL_OUT_OF_RESOURCES"}) {
    SCOPED_TRACE(fault);
    Watchdog wd(std::string("a late chunk read of a cross-device copy fails: ") + fault, 60);
    shim().reset_faults();
    LoopEngine le;
    Config config = shim_config(4);
    config.cross_copy_chunk_mib = 1;
    config.cross_copy_ring = 1;  // the second and third chunk reads are made late
    if (!create_two_devices(le, config)) GTEST_SKIP() << kNeedsTwoDevices;
    Engine& e = *le.engine;
    const std::size_t bytes = std::size_t{3} << 20;
    auto src = e.allocate(0, bytes);
    auto dst = e.allocate(1, bytes);
    ASSERT_TRUE(src.ok() && dst.ok());
    const std::uint32_t v = 7;
    ASSERT_TRUE(e.fill(*src, std::as_bytes(std::span<const std::uint32_t>(&v, 1)), 0, bytes).ok());
    ASSERT_TRUE(e.finish().ok());
    std::vector<std::string> heard;
    e.set_error_listener([&](const Error& err) { heard.push_back(err.to_string()); });
    shim().set_fault(fault);  // the fill made no read: the copy's third
    e.push_error_scope();
    std::optional<Result<void>> copied, scoped, drained;
    ASSERT_TRUE(e.copy(*src, 0, *dst, 0, bytes, [&](Result<void> r) { copied = std::move(r); }).ok());
    ASSERT_TRUE(e.pop_error_scope([&](Result<void> r) { scoped = std::move(r); }).ok());
    e.drain([&](Result<void> r) { drained = std::move(r); });  // open while the late reads are made
    EXPECT_EQ(run_for(e, [&] { return copied && scoped && drained; }, 10), "");
    const int fired = shim().fired();
    shim().reset_faults();
    ASSERT_EQ(fired, 1) << "the third chunk read was not reached";
    ASSERT_TRUE(copied && scoped && drained);
    EXPECT_FALSE(copied->ok());
    EXPECT_FALSE(scoped->ok()) << "the copy's scope did not get its late read's failure";
    EXPECT_TRUE(drained->ok()) << "a drain outside every scope got the copy's failure: "
                               << drained->error().to_string();
    // The late reads were made after that drain, in the root scope it
    // opened: the next drain covers them.
    std::optional<Result<void>> after;
    e.drain([&](Result<void> r) { after = std::move(r); });
    EXPECT_EQ(run_for(e, [&] { return after.has_value(); }, 10), "");
    ASSERT_TRUE(after.has_value());
    EXPECT_TRUE(after->ok()) << "a drain after the copy got its late read's failure: " << after->error().to_string();
    EXPECT_EQ(heard.size(), 1u) << ::testing::PrintToString(heard);
    e.set_error_listener({});
    for (Buffer b : {*src, *dst}) (void)e.release(b);
    EXPECT_EQ(le.destroy(), 0);
  }
}

// Every event status the engine reads is a driver call counted in
// EngineStats::status_queries, the reads of a cross-device copy's chunk
// writes included (they were not: a 256 MiB copy on a GPU made thousands of
// calls the stats did not show).
TEST(TwoDevicesCounting, EveryStatusReadOfACopyIsCounted) {
  ASSERT_TRUE(shim_ok());
  Watchdog wd("a cross-device copy, counting status reads", 60);
  shim().reset_faults();
  LoopEngine le;
  if (!create_two_devices(le)) GTEST_SKIP() << kNeedsTwoDevices;
  Engine& e = *le.engine;
  const Kernel k1 = advance_on_device_1(e);
  ASSERT_NE(k1.id, 0u);
  const long calls0 = shim().calls("clGetEventInfo");
  const std::uint64_t counted0 = e.stats().status_queries;
  CrossOutcome r = cross_job(e, k1, (std::size_t{18} << 20) / 4);  // 18 MiB: five 4 MiB chunks
  EXPECT_TRUE(r.correct) << r.hang << " " << ::testing::PrintToString(r.errors);
  const long calls = shim().calls("clGetEventInfo") - calls0;
  EXPECT_GT(calls, 0);
  EXPECT_EQ(static_cast<long>(e.stats().status_queries - counted0), calls);
  (void)e.release(k1);
  EXPECT_EQ(le.destroy(), 0);
}

// dev0: write src; copy src -> dst on dev1, in 1 MiB chunks through a ring
// of one, so the later chunks read src in place; fill src, which first has
// the copy's unread part copied aside (a snapshot: a held copy, enqueued by
// the engine); read dst and src. Each read is exact or an error.
struct SnapshotOutcome {
  int copy_callbacks = 0, read_callbacks = 0, fill_callbacks = 0;
  std::optional<Error> copy_error;
  std::string fill_scope_error;
  bool dst_ok = false, dst_correct = false, src_ok = false, src_correct = false;
  std::uint64_t snapshots = 0;
  std::vector<std::string> errors;
  std::string hang;
};

constexpr std::uint32_t kSnapshotFill = 0x5a5a5a5au;

SnapshotOutcome snapshot_job(Engine& e, std::size_t n) {
  SnapshotOutcome r;
  e.set_error_listener([&](const Error& err) { r.errors.push_back("listener: " + err.to_string()); });
  std::vector<std::uint32_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::uint32_t>(i * 7 + 3);
  auto src = e.allocate(0, n * 4);
  auto dst = e.allocate(1, n * 4);
  if (!src || !dst) {
    r.errors.push_back("allocate failed");
    return r;
  }
  const std::uint64_t snapshots0 = e.stats().snapshots;
  int expected_callbacks = 0;
  auto accepted = [&](Result<void> call) {
    if (call) ++expected_callbacks;
    else r.errors.push_back(call.error().to_string());
    return call.ok();
  };
  auto read_into = [&](Buffer b, bool* ok, bool* correct, auto want) {
    return e.read(b, 0, n * 4, [&r, n, ok, correct, want](Result<std::span<const std::byte>> d) {
      ++r.read_callbacks;
      if (!d) {
        r.errors.push_back(d.error().to_string());
        return;
      }
      *ok = true;
      *correct = true;
      for (std::size_t i = 0; i < n && *correct; ++i) {
        std::uint32_t v = 0;
        std::memcpy(&v, d->data() + i * 4, 4);
        *correct = v == want(i);
      }
    });
  };
  if (accepted(e.write(*src, 0, std::as_bytes(std::span<const std::uint32_t>(host)), WriteMode::Copy,
                       [&](Result<void>) { ++r.fill_callbacks; })) &&
      accepted(e.copy(*src, 0, *dst, 0, n * 4, [&](Result<void> res) {
        ++r.copy_callbacks;
        if (!res) {
          r.copy_error = res.error();
          r.errors.push_back(res.error().to_string());
        }
      }))) {
    // The fill in an error scope of its own: the snapshot's failure, made
    // for the copy, is not the fill's.
    e.push_error_scope();
    (void)accepted(e.fill(*src, std::as_bytes(std::span<const std::uint32_t>(&kSnapshotFill, 1)), 0, n * 4,
                          [&](Result<void>) { ++r.fill_callbacks; }));
    (void)accepted(e.pop_error_scope([&](Result<void> scope) {
      ++r.fill_callbacks;
      if (!scope) r.fill_scope_error = scope.error().to_string();
    }));
    (void)accepted(read_into(*dst, &r.dst_ok, &r.dst_correct, [&host](std::size_t i) { return host[i]; }));
    (void)accepted(read_into(*src, &r.src_ok, &r.src_correct, [](std::size_t) { return kSnapshotFill; }));
  }
  r.snapshots = e.stats().snapshots - snapshots0;
  for (Buffer b : {*src, *dst}) (void)e.release(b);
  auto callbacks_done = [&] { return r.copy_callbacks + r.read_callbacks + r.fill_callbacks >= expected_callbacks; };
  r.hang = settle(e, callbacks_done, r.errors);
  e.set_error_listener({});
  return r;
}

Config snapshot_config() {
  Config c = shim_config(4);
  c.cross_copy_chunk_mib = 1;
  c.cross_copy_ring = 1;
  return c;
}

class Snapshots : public ::testing::TestWithParam<CrossCase> {};

TEST_P(Snapshots, SnapshotUnderFault) {
  ASSERT_TRUE(shim_ok());
  const CrossCase& c = GetParam();
  Watchdog wd(std::string("a cross-device copy's snapshot, fault ") + c.spec, 90);
  shim().reset_faults();
  const ShimBalance balance;
  {
    LoopEngine le;
    if (!create_two_devices(le, snapshot_config())) GTEST_SKIP() << kNeedsTwoDevices;
    Engine& e = *le.engine;
    const std::size_t n = (std::size_t{3} << 20) / 4;  // three chunks: two read after the fill
    if (*c.spec != '\0') shim().set_fault(c.spec);
    SnapshotOutcome r = snapshot_job(e, n);
    const int fired = shim().fired();
    shim().reset_faults();
    EXPECT_EQ(r.hang, "") << "errors:\n" << ::testing::PrintToString(r.errors);
    EXPECT_EQ(r.snapshots, 1u);
    EXPECT_FALSE(r.dst_ok && !r.dst_correct) << "the copy's destination is WRONG";
    // A failed snapshot fails the copy, not the command that overwrites
    // the source: it waits for the snapshot only for the order.
    EXPECT_TRUE(r.src_correct) << "the fill of the source failed or is WRONG: " << ::testing::PrintToString(r.errors);
    EXPECT_EQ(r.fill_scope_error, "") << "the fill's error scope got the snapshot's failure";
    EXPECT_EQ(r.copy_callbacks, 1);
    EXPECT_LE(listener_calls(r.errors), 1) << ::testing::PrintToString(r.errors);
    if (*c.spec == '\0') {
      EXPECT_TRUE(r.dst_correct && r.src_correct) << ::testing::PrintToString(r.errors);
      EXPECT_TRUE(r.errors.empty()) << ::testing::PrintToString(r.errors);
    } else {
      EXPECT_GT(fired, 0) << c.spec << " was not reached";
      if (fired > 0 && !r.dst_correct) {
        expect_named(r.errors, c);
      }
    }
    SnapshotOutcome again = snapshot_job(e, n);
    EXPECT_TRUE(again.dst_correct && again.src_correct)
        << "a snapshot after the fault: " << again.hang << " " << ::testing::PrintToString(again.errors);
    EXPECT_EQ(le.destroy(), 0);
  }
  balance.expect_unchanged();
}

std::string cross_name(const ::testing::TestParamInfo<CrossCase>& info) {
  std::string s = *info.param.spec ? info.param.spec : "no_fault";
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Faults, TwoDevices,
    ::testing::Values(CrossCase{"", "", ""},
                      CrossCase{"clCreateUserEvent:1:CL_OUT_OF_RESOURCES", "clCreateUserEvent", "CL_OUT_OF_RESOURCES"},
                      CrossCase{"clSetUserEventStatus:1:CL_OUT_OF_RESOURCES", "clSetUserEventStatus",
                                "CL_OUT_OF_RESOURCES"},
                      CrossCase{"clRetainEvent:1:CL_OUT_OF_HOST_MEMORY", "clRetainEvent", "CL_OUT_OF_HOST_MEMORY"},
                      CrossCase{"clRetainMemObject:1:CL_OUT_OF_HOST_MEMORY", "clRetainMemObject",
                                "CL_OUT_OF_HOST_MEMORY"},
                      CrossCase{"clEnqueueReadBuffer:2:CL_OUT_OF_RESOURCES", "clEnqueueReadBuffer", "CL_OUT_OF_RESOURCES"},
                      CrossCase{"clEnqueueWriteBuffer:3:CL_OUT_OF_RESOURCES", "clEnqueueWriteBuffer", "CL_OUT_OF_RESOURCES"},
                      CrossCase{"event:clEnqueueReadBuffer:2:CL_OUT_OF_RESOURCES", "clEnqueueReadBuffer",
                                "CL_OUT_OF_RESOURCES"},
                      CrossCase{"event:clEnqueueWriteBuffer:3:CL_OUT_OF_RESOURCES", "clEnqueueWriteBuffer",
                                "CL_OUT_OF_RESOURCES"},
                      CrossCase{"clSetEventCallback:2:CL_OUT_OF_HOST_MEMORY", "clSetEventCallback",
                                "CL_OUT_OF_HOST_MEMORY"}),
    cross_name);

// The snapshot is the job's only device copy (clEnqueueCopyBuffer) and its
// second user event (the copy's destination command is the first), and it
// retains the source and the snapshot (the second and third
// clRetainMemObject; the first is the copy's destination).
INSTANTIATE_TEST_SUITE_P(
    Faults, Snapshots,
    ::testing::Values(CrossCase{"", "", ""},
                      CrossCase{"clEnqueueCopyBuffer:1:CL_OUT_OF_RESOURCES", "clEnqueueCopyBuffer",
                                "CL_OUT_OF_RESOURCES"},
                      CrossCase{"event:clEnqueueCopyBuffer:1:CL_OUT_OF_RESOURCES", "CL_OUT_OF_RESOURCES",
                                "clEnqueueCopyBuffer"},
                      CrossCase{"clCreateUserEvent:2:CL_OUT_OF_RESOURCES", "clCreateUserEvent", "CL_OUT_OF_RESOURCES"},
                      CrossCase{"clRetainMemObject:2:CL_OUT_OF_HOST_MEMORY", "clRetainMemObject",
                                "CL_OUT_OF_HOST_MEMORY"},
                      CrossCase{"clRetainMemObject:3:CL_OUT_OF_HOST_MEMORY", "clRetainMemObject",
                                "CL_OUT_OF_HOST_MEMORY"},
                      CrossCase{"clSetUserEventStatus:1:CL_OUT_OF_RESOURCES", "clSetUserEventStatus",
                                "CL_OUT_OF_RESOURCES"}),
    cross_name);

}  // namespace
}  // namespace uvcl::faults::two_devices_test
