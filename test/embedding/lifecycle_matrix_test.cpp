// The lifecycle matrix (docs/api.md, "Lifecycle"): every kind of callback a
// host gets — a build's, a launch's, a read's, a drain's, the error
// listener's, the listener hearing of a lost device, on_closed, a timer of
// the host's own loop — times every action a host may take there — destroy,
// close, release each kind of object, submit, drain, replace the listener,
// call a blocking helper. Each case asserts the action's answer as the
// table gives it for the engine's state, that every callback the engine
// accepted ran exactly once (those it refused never), that nothing hangs
// (watchdog) and that nothing leaks (the shim's live objects, the loop's
// handles). Run under ASan+UBSan with the rest of the suite.
#include "../faults/harness.hpp"
#include "matrix.hpp"

namespace uvcl::embedding::lifecycle_matrix {
namespace {

using faults::kSource;
using faults::LoopEngine;
using faults::shim;
using faults::shim_config;
using faults::shim_ok;
using testing::Watchdog;

using matrix::Action;
using matrix::Case;
using matrix::Probe;
using matrix::Trigger;

class LifecycleMatrix : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(shim_ok());
    shim().reset_faults();
    live0_ = shim().live("all");
    ASSERT_TRUE(le_.create(shim_config(2)).ok());
    auto p = e().compile_sync(0, kSource);
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    program_ = *p;
    auto k = e().kernel(program_, "advance");
    ASSERT_TRUE(k.ok()) << k.error().to_string();
    kernel_ = *k;
    for (Buffer* b : {&in_, &out_}) {
      auto made = e().allocate(0, kN * 4);
      ASSERT_TRUE(made.ok());
      *b = *made;
    }
    const std::vector<std::uint32_t> ones(kN, 1);
    ASSERT_TRUE(e().write(in_, 0, std::as_bytes(std::span(ones))).ok());
    auto h = e().alloc_host(0, 4096);
    ASSERT_TRUE(h.ok()) << h.error().to_string();
    host_ = *h;
    ASSERT_TRUE(e().finish().ok());
  }
  void TearDown() override {
    shim().reset_faults();
    EXPECT_EQ(le_.destroy(), 0) << "uv_loop_close: a handle of the engine was left open";
    EXPECT_EQ(shim().live("all") - live0_, 0) << "OpenCL objects leaked";
  }

  Engine& e() { return *le_.engine; }
  uv_loop_t* loop() { return le_.loop.get(); }
  Launch advance() const {
    return Launch{kernel_,
                  {KernelArg::of(in_), KernelArg::of(out_), KernelArg::value<std::uint32_t>(3),
                   KernelArg::value<std::uint32_t>(1), KernelArg::value<std::uint32_t>(kN)},
                  {kN},
                  {64}};
  }
  Probe& probe(std::string what) {
    probes_.push_back(std::make_unique<Probe>(Probe{std::move(what)}));
    return *probes_.back();
  }
  // Counts the probe's callback in, if the call took it.
  template <class R>
  void taken(Probe& p, const R& r) {
    if (r.ok()) p.expected = 1;
  }

  // The action, once, from inside the trigger's callback; its answer is
  // checked against the table for the engine's state there.
  void act(Trigger t, Action a) {
    if (acted_) return;
    acted_ = true;
    Engine* engine = le_.engine.get();
    ASSERT_NE(engine, nullptr);
    const bool closed = t == Trigger::Closed;
    const bool lost = t == Trigger::DeviceLost;
    if (lost) {
      EXPECT_TRUE(engine->device_lost(0)) << "the listener heard of no lost device";
    }
    switch (a) {
      case Action::Destroy:
        le_.engine.reset();  // deferred until the engine's frames return
        return;
      case Action::Close: {
        Probe& p = probe("on_closed of a close from the callback");
        auto r = engine->close([&p] { ++p.ran; });
        taken(p, r);
        if (closed) {
          EXPECT_EQ(r.status(), Status::Cancelled) << "a second close";
        } else {
          EXPECT_TRUE(r.ok()) << r.error().to_string();
        }
        return;
      }
      case Action::ReleaseBuffer: {
        auto r = engine->release(out_);
        EXPECT_TRUE(r.ok()) << r.error().to_string();
        return;
      }
      case Action::ReleaseKernel: {
        auto r = engine->release(kernel_);
        EXPECT_TRUE(r.ok()) << r.error().to_string();
        return;
      }
      case Action::ReleaseProgram: {
        auto r = engine->release(program_);
        EXPECT_TRUE(r.ok()) << r.error().to_string();
        return;
      }
      case Action::ReleaseHostMemory: {
        auto r = engine->release(host_);
        EXPECT_TRUE(r.ok()) << r.error().to_string();
        return;
      }
      case Action::Submit: {
        auto l = engine->launch(advance());
        Probe& p = probe("on_data of a read from the callback");
        auto r = engine->read(out_, 0, kN * 4, [&p](Result<std::span<const std::byte>>) { ++p.ran; });
        taken(p, r);
        const Status want = closed ? Status::Cancelled : lost ? Status::DeviceLost : Status::Ok;
        EXPECT_EQ(l.status(), want) << (l ? "" : l.error().to_string());
        EXPECT_EQ(r.status(), want) << (r ? "" : r.error().to_string());
        return;
      }
      case Action::Drain: {
        Probe& p = probe("on_done of a drain from the callback");
        p.expected = 1;  // drain takes every callback
        engine->drain([&p, closed](Result<void> r) {
          ++p.ran;
          if (closed) {
            EXPECT_EQ(r.status(), Status::Cancelled);
          }
        });
        if (closed) {
          EXPECT_EQ(p.ran, 1) << "a drain of a closed engine calls back at once";
        }
        return;
      }
      case Action::ReplaceListener: {
        engine->set_error_listener([this](const Error&) { ++replaced_heard_; });
        return;
      }
      case Action::Blocking: {
        auto r = engine->finish();
        EXPECT_FALSE(r.ok()) << "finish() nested uv_run inside a loop callback";
        if (!closed) {
          EXPECT_EQ(r.status(), Status::InvalidArgument) << r.error().to_string();
        }
        return;
      }
    }
  }

  // Arms the trigger; its callback runs `act` (with a probe of its own).
  void arm(Trigger t, Action a) {
    switch (t) {
      case Trigger::Build: {
        Probe& p = probe("on_built");
        auto r = e().compile(0, kSource, "-DMATRIX_BUILD", [this, t, a, &p](Result<void>) {
          ++p.ran;
          act(t, a);
        });
        taken(p, r);
        ASSERT_TRUE(r.ok()) << r.error().to_string();
        built_ = *r;
        return;
      }
      case Trigger::LaunchDone: {
        Probe& p = probe("launch on_done");
        trampoline_ = [this, t, a, &p] {
          ++p.ran;
          act(t, a);
        };
        auto r = e().launch(
            advance(), [](int, const char*, void* self) { static_cast<LifecycleMatrix*>(self)->trampoline_(); }, this);
        taken(p, r);
        ASSERT_TRUE(r.ok()) << r.error().to_string();
        return;
      }
      case Trigger::Read: {
        Probe& p = probe("read on_data");
        auto r = e().read(in_, 0, kN * 4, [this, t, a, &p](Result<std::span<const std::byte>>) {
          ++p.ran;
          act(t, a);
        });
        taken(p, r);
        ASSERT_TRUE(r.ok()) << r.error().to_string();
        return;
      }
      case Trigger::Drain: {
        Probe& p = probe("drain on_done");
        p.expected = 1;
        e().drain([this, t, a, &p](Result<void>) {
          ++p.ran;
          act(t, a);
        });
        return;
      }
      case Trigger::Listener:
      case Trigger::DeviceLost: {
        e().set_error_listener([this, t, a](const Error&) { act(t, a); });
        shim().set_fault(t == Trigger::Listener ? "event:clEnqueueNDRangeKernel:1:CL_OUT_OF_RESOURCES"
                                                : "clEnqueueNDRangeKernel:1:CL_DEVICE_NOT_AVAILABLE");
        auto r = e().launch(advance());
        ASSERT_TRUE(r.ok()) << r.error().to_string();
        return;
      }
      case Trigger::Closed: {
        Probe& p = probe("on_closed");
        auto r = e().close([this, t, a, &p] {
          ++p.ran;
          act(t, a);
        });
        taken(p, r);
        ASSERT_TRUE(r.ok()) << r.error().to_string();
        return;
      }
      case Trigger::HostTimer: {
        timer_.data = this;
        uv_timer_init(loop(), &timer_);
        timer_open_ = true;
        timer_act_ = [this, t, a] { act(t, a); };
        uv_timer_start(&timer_, [](uv_timer_t* h) { static_cast<LifecycleMatrix*>(h->data)->timer_act_(); }, 1, 0);
        return;
      }
    }
  }

  bool settled() const {
    if (!acted_) return false;
    for (const auto& p : probes_)
      if (p->ran < p->expected) return false;
    return true;
  }

  static constexpr std::uint32_t kN = 256;
  LoopEngine le_;
  int live0_ = 0;
  Program program_{}, built_{};
  Kernel kernel_{};
  Buffer in_{}, out_{};
  HostMemory host_{};
  std::vector<std::unique_ptr<Probe>> probes_;
  std::function<void()> trampoline_, timer_act_;
  uv_timer_t timer_{};
  bool timer_open_ = false;
  bool acted_ = false;
  int replaced_heard_ = 0;
};

TEST_P(LifecycleMatrix, EveryActionFromEveryCallback) {
  const auto [t, a] = GetParam();
  Watchdog wd(matrix::describe(GetParam()), 60);
  arm(t, a);
  matrix::turn_loop(loop(), [this] { return settled(); }, [this] {
    EXPECT_TRUE(acted_) << "the trigger's callback never ran";
    shim().reset_faults();
    le_.engine.reset();  // what a still-open engine holds is cancelled: those callbacks run now
    if (timer_open_) uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
  });
  for (const auto& p : probes_) EXPECT_EQ(p->ran, p->expected) << p->what;
}

INSTANTIATE_TEST_SUITE_P(Embedding, LifecycleMatrix, matrix::all_cases(), matrix::case_name);

}  // namespace
}  // namespace uvcl::embedding::lifecycle_matrix
