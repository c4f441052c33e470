// The lifecycle matrix through the C API (include/uvcl/uvcl.h): the same
// callback kinds times the same actions as lifecycle_matrix_test.cpp, made
// with the C calls and C callbacks (function pointer and user data) a C host
// writes. Each case asserts the action's answer (negated status), every
// accepted callback run exactly once and refused ones never, no hang
// (watchdog), nothing leaked (the shim's live objects, the loop's handles).
#include <uvcl/uvcl.h>

#include "../faults/harness.hpp"
#include "matrix.hpp"

namespace uvcl::embedding::capi_lifecycle_matrix {
namespace {

using faults::kShimPath;
using faults::kSource;
using faults::shim;
using faults::shim_ok;
using testing::Watchdog;

using matrix::Action;
using matrix::Case;
using matrix::Probe;
using matrix::Trigger;

class CapiLifecycleMatrix : public ::testing::TestWithParam<Case> {
 protected:
  static constexpr std::uint32_t kN = 256;

  void SetUp() override {
    ASSERT_TRUE(shim_ok());
    shim().reset_faults();
    live0_ = shim().live("all");
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    loop_open_ = true;
    const std::string config = std::string(R"({"opencl": {"library": ")") + kShimPath +
                               R"(", "compile": "inline", "queues": 2}})";
    ASSERT_EQ(uvcl_engine_create(&engine_, config.c_str(), &loop_), UVCL_OK) << uvcl_engine_last_error(engine_);
    ASSERT_EQ(uvcl_compile_sync(engine_, 0, kSource, nullptr, UVCL_BUILD_OPTIONS_ADD, &program_), UVCL_OK)
        << uvcl_engine_last_error(engine_);
    ASSERT_EQ(uvcl_kernel_create(engine_, program_, "advance", nullptr, 0, &kernel_), UVCL_OK)
        << uvcl_engine_last_error(engine_);
    for (uvcl_buffer_t* b : {&in_, &out_}) ASSERT_EQ(uvcl_buffer_allocate(engine_, 0, kN * 4, b), UVCL_OK);
    const std::vector<std::uint32_t> ones(kN, 1);
    ASSERT_EQ(uvcl_write(engine_, in_, 0, ones.data(), kN * 4, UVCL_WRITE_COPY, nullptr, nullptr), UVCL_OK)
        << uvcl_engine_last_error(engine_);
    ASSERT_EQ(uvcl_host_alloc(engine_, 0, 4096, &host_), UVCL_OK) << uvcl_engine_last_error(engine_);
    ASSERT_EQ(uvcl_finish(engine_), UVCL_OK) << uvcl_engine_last_error(engine_);
    args_[0] = buffer_arg(in_);
    args_[1] = buffer_arg(out_);
    args_[2] = uint_arg(3);
    args_[3] = uint_arg(1);
    args_[4] = uint_arg(kN);
    launch_.kernel = kernel_;
    launch_.args = args_;
    launch_.arg_count = 5;
    launch_.dims = 1;
    launch_.global[0] = kN;
    launch_.local[0] = 64;
  }
  void TearDown() override {
    shim().reset_faults();
    uvcl_engine_destroy(engine_);
    engine_ = nullptr;
    if (loop_open_) {
      for (int i = 0; i < 8; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
      EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle of the engine was left open";
    }
    EXPECT_EQ(shim().live("all") - live0_, 0) << "OpenCL objects leaked";
  }

  static uvcl_arg_t buffer_arg(uvcl_buffer_t b) {
    uvcl_arg_t a{};
    a.kind = UVCL_ARG_BUFFER;
    a.buffer = b;
    return a;
  }
  static uvcl_arg_t uint_arg(std::uint32_t v) {
    uvcl_arg_t a{};
    a.kind = UVCL_ARG_SCALAR;
    a.scalar_type = UVCL_UINT;
    std::memcpy(a.scalar, &v, sizeof v);
    return a;
  }

  Probe& probe(std::string what, int rc = UVCL_OK) {
    probes_.push_back(std::make_unique<Probe>(Probe{std::move(what)}));
    probes_.back()->expected = rc == UVCL_OK ? 1 : 0;
    return *probes_.back();
  }
  // The C callbacks: user data is the probe; the trigger's also acts.
  static void count_done(int, const char*, void* p) { ++static_cast<Probe*>(p)->ran; }
  static void count_read(int, const char*, const void*, std::size_t, void* p) { ++static_cast<Probe*>(p)->ran; }
  static void count_closed(void* p) { ++static_cast<Probe*>(p)->ran; }
  static void trigger_done(int, const char*, void* self) {
    auto* m = static_cast<CapiLifecycleMatrix*>(self);
    ++m->trigger_probe_->ran;
    m->act();
  }
  static void trigger_read(int, const char*, const void*, std::size_t, void* self) { trigger_done(0, nullptr, self); }
  static void trigger_closed(void* self) { trigger_done(0, nullptr, self); }
  static void trigger_listener(int, const char*, void* self) { static_cast<CapiLifecycleMatrix*>(self)->act(); }
  static void trigger_timer(uv_timer_t* h) { static_cast<CapiLifecycleMatrix*>(h->data)->act(); }
  static void replaced_listener(int, const char*, void*) {}

  void act() {
    if (acted_) return;
    acted_ = true;
    const auto [t, a] = GetParam();
    const bool closed = t == Trigger::Closed;
    const bool lost = t == Trigger::DeviceLost;
    if (lost) {
      EXPECT_EQ(uvcl_device_lost(engine_, 0), 1) << "the listener heard of no lost device";
    }
    switch (a) {
      case Action::Destroy:
        uvcl_engine_destroy(engine_);  // deferred until the outermost uvcl call returns
        engine_ = nullptr;
        return;
      case Action::Close: {
        Probe& p = probe("on_closed of a close from the callback");
        const int rc = uvcl_close(engine_, count_closed, &p);
        p.expected = rc == UVCL_OK ? 1 : 0;
        EXPECT_EQ(rc, closed ? UVCL_ECANCELLED : UVCL_OK) << uvcl_engine_last_error(engine_);
        return;
      }
      case Action::ReleaseBuffer:
        EXPECT_EQ(uvcl_buffer_release(engine_, out_), UVCL_OK) << uvcl_engine_last_error(engine_);
        return;
      case Action::ReleaseKernel:
        EXPECT_EQ(uvcl_kernel_release(engine_, kernel_), UVCL_OK) << uvcl_engine_last_error(engine_);
        return;
      case Action::ReleaseProgram:
        EXPECT_EQ(uvcl_program_release(engine_, program_), UVCL_OK) << uvcl_engine_last_error(engine_);
        return;
      case Action::ReleaseHostMemory:
        EXPECT_EQ(uvcl_host_release(engine_, &host_), UVCL_OK) << uvcl_engine_last_error(engine_);
        return;
      case Action::Submit: {
        const int want = closed ? UVCL_ECANCELLED : lost ? UVCL_EDEVICE_LOST : UVCL_OK;
        Probe& l = probe("on_done of a launch from the callback");
        const int lrc = uvcl_launch(engine_, &launch_, count_done, &l);
        l.expected = lrc == UVCL_OK ? 1 : 0;
        EXPECT_EQ(lrc, want) << uvcl_engine_last_error(engine_);
        Probe& r = probe("on_data of a read from the callback");
        const int rrc = uvcl_read(engine_, out_, 0, kN * 4, count_read, &r);
        r.expected = rrc == UVCL_OK ? 1 : 0;
        EXPECT_EQ(rrc, want) << uvcl_engine_last_error(engine_);
        return;
      }
      case Action::Drain: {
        Probe& p = probe("on_done of a drain from the callback");
        const int rc = uvcl_drain(engine_, count_done, &p);
        p.expected = rc == UVCL_OK ? 1 : 0;
        EXPECT_EQ(rc, UVCL_OK) << uvcl_engine_last_error(engine_);
        if (closed) {
          EXPECT_EQ(p.ran, 1) << "a drain of a closed engine calls back at once";
        }
        return;
      }
      case Action::ReplaceListener:
        EXPECT_EQ(uvcl_set_error_listener(engine_, replaced_listener, nullptr), UVCL_OK);
        return;
      case Action::Blocking: {
        const int rc = uvcl_finish(engine_);
        EXPECT_NE(rc, UVCL_OK) << "uvcl_finish nested uv_run inside a loop callback";
        if (!closed) {
          EXPECT_EQ(rc, UVCL_EINVALID_ARGUMENT) << uvcl_engine_last_error(engine_);
        }
        return;
      }
    }
  }

  void arm() {
    const auto [t, a] = GetParam();
    switch (t) {
      case Trigger::Build: {
        trigger_probe_ = &probe("on_built");
        ASSERT_EQ(uvcl_compile(engine_, 0, kSource, "-DMATRIX_BUILD", UVCL_BUILD_OPTIONS_ADD, trigger_done, this,
                               &built_),
                  UVCL_OK)
            << uvcl_engine_last_error(engine_);
        return;
      }
      case Trigger::LaunchDone:
        trigger_probe_ = &probe("launch on_done");
        ASSERT_EQ(uvcl_launch(engine_, &launch_, trigger_done, this), UVCL_OK) << uvcl_engine_last_error(engine_);
        return;
      case Trigger::Read:
        trigger_probe_ = &probe("read on_data");
        ASSERT_EQ(uvcl_read(engine_, in_, 0, kN * 4, trigger_read, this), UVCL_OK) << uvcl_engine_last_error(engine_);
        return;
      case Trigger::Drain:
        trigger_probe_ = &probe("drain on_done");
        ASSERT_EQ(uvcl_drain(engine_, trigger_done, this), UVCL_OK) << uvcl_engine_last_error(engine_);
        return;
      case Trigger::Listener:
      case Trigger::DeviceLost:
        ASSERT_EQ(uvcl_set_error_listener(engine_, trigger_listener, this), UVCL_OK);
        shim().set_fault(t == Trigger::Listener ? "event:clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES"
                                                : "clEnqueueNDRangeKernel:1:CL_DEVICE_NOT_AVAILABLE");
        ASSERT_EQ(uvcl_launch(engine_, &launch_, nullptr, nullptr), UVCL_OK) << uvcl_engine_last_error(engine_);
        return;
      case Trigger::Closed:
        trigger_probe_ = &probe("on_closed");
        ASSERT_EQ(uvcl_close(engine_, trigger_closed, this), UVCL_OK) << uvcl_engine_last_error(engine_);
        return;
      case Trigger::HostTimer:
        timer_.data = this;
        uv_timer_init(&loop_, &timer_);
        timer_open_ = true;
        uv_timer_start(&timer_, trigger_timer, 1, 0);
        return;
    }
    (void)a;
  }

  bool settled() const {
    if (!acted_) return false;
    for (const auto& p : probes_)
      if (p->ran < p->expected) return false;
    return true;
  }

  uv_loop_t loop_{};
  bool loop_open_ = false;
  uvcl_engine_t* engine_ = nullptr;
  int live0_ = 0;
  uvcl_program_t program_ = 0, built_ = 0;
  uvcl_kernel_t kernel_ = 0;
  uvcl_buffer_t in_ = 0, out_ = 0;
  uvcl_host_memory_t host_{};
  uvcl_arg_t args_[5]{};
  uvcl_launch_t launch_{};
  std::vector<std::unique_ptr<Probe>> probes_;
  Probe* trigger_probe_ = nullptr;
  uv_timer_t timer_{};
  bool timer_open_ = false;
  bool acted_ = false;
};

TEST_P(CapiLifecycleMatrix, EveryActionFromEveryCallback) {
  Watchdog wd("C API: " + matrix::describe(GetParam()), 60);
  arm();
  matrix::turn_loop(&loop_, [this] { return settled(); }, [this] {
    EXPECT_TRUE(acted_) << "the trigger's callback never ran";
    shim().reset_faults();
    uvcl_engine_destroy(engine_);  // what it still holds is cancelled: those callbacks run now
    engine_ = nullptr;
    if (timer_open_) uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
  });
  for (const auto& p : probes_) EXPECT_EQ(p->ran, p->expected) << p->what;
}

INSTANTIATE_TEST_SUITE_P(CApi, CapiLifecycleMatrix, matrix::all_cases(), matrix::case_name);

}  // namespace
}  // namespace uvcl::embedding::capi_lifecycle_matrix
