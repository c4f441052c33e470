// game_loop — a fixed-rate frame loop that dispatches a kernel every frame.
//
// The engine owns its loop (Engine::create(config) with no loop). Each frame:
//
//   1. engine->poll()        non-blocking: submits, collects completions and
//                            runs the read callbacks that are due
//   2. launch the particle update, then engine->read() the positions back;
//      the read's callback arrives on a LATER frame's poll
//   3. sleep until the next frame deadline
//
// It prints the time each frame spent on its work (dispatch + poll,
// including the read callbacks), the device time of the frame's kernel, and
// the read-back latency in frames, then checks every read-back against the
// exact host result. Exit 0: all read-backs right; 1: a wrong value or an
// engine error; 2: bad usage.
//
//   game_loop [--frames N] [--hz N] [--particles N] [--substeps N]
//             [--max-reads N] [--device N] [--config FILE]
//
// A frame whose read-back would exceed --max-reads in flight skips it (the
// device is behind): frames never wait for the device.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <time.h>

#include <uvcl/engine.hpp>

namespace {

using Clock = std::chrono::steady_clock;

// Exact arithmetic: velocities are multiples of 1/4 and the sub-step is a
// power of two, so every partial sum is representable and the device result
// equals p0 + frames * v bit for bit, with or without -cl-mad-enable.
const char* kSource = R"CL(
__kernel void advance(__global float2* pos, __global const float2* vel, float h, uint substeps, uint n) {
  size_t i = get_global_id(0);
  if (i >= n) return;
  float2 p = pos[i];
  const float2 v = vel[i];
  for (uint s = 0; s < substeps; ++s) p += v * h;
  pos[i] = p;
}
)CL";

struct Options {
  unsigned frames = 480;
  unsigned hz = 240;
  unsigned particles = 65536;
  unsigned substeps = 16;  // a power of two
  unsigned max_reads = 8;  // read-backs in flight; a frame skips its read beyond that
  std::size_t device = 0;
  std::string config;
};

float initial_x(std::uint32_t i) { return static_cast<float>(i % 1024); }
float initial_y(std::uint32_t i) { return static_cast<float>((i / 1024) % 1024); }
float vel_x(std::uint32_t i) { return static_cast<float>(static_cast<int>(i % 33) - 16) * 0.25f; }
float vel_y(std::uint32_t i) { return static_cast<float>(static_cast<int>(i % 7) - 3) * 0.5f; }

bool parse_uint(const char* s, unsigned lo, unsigned hi, unsigned& out) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  out = static_cast<unsigned>(v);
  return true;
}

int usage(const char* why) {
  std::fprintf(stderr,
               "game_loop: %s\nusage: game_loop [--frames N] [--hz N] [--particles N] [--substeps N] "
               "[--max-reads N] [--device N] [--config FILE]\n",
               why);
  return 2;
}

struct Stats {
  double p50 = 0, p99 = 0, max = 0;
};

Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
  };
  s.p50 = at(0.50);
  s.p99 = at(0.99);
  s.max = v.back();
  return s;
}

// This thread's CPU time: tells work from being descheduled on a busy machine.
double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

// Times this thread gave up the CPU by itself (blocked: a lock, a wait).
long voluntary_switches() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_nvcsw;
}

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

int fail(const char* what, const uvcl::Error& e) {
  std::fprintf(stderr, "game_loop: %s: %s\n", what, e.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(("missing value for " + a).c_str());
    const char* v = argv[++i];
    unsigned dev = 0;
    bool ok = true;
    if (a == "--frames") ok = parse_uint(v, 1, 1000000, o.frames);
    else if (a == "--hz") ok = parse_uint(v, 1, 10000, o.hz);
    else if (a == "--particles") ok = parse_uint(v, 1, 1u << 26, o.particles);
    else if (a == "--substeps") ok = parse_uint(v, 1, 1u << 16, o.substeps) && (o.substeps & (o.substeps - 1)) == 0;
    else if (a == "--max-reads") ok = parse_uint(v, 1, 1024, o.max_reads);
    else if (a == "--device") { ok = parse_uint(v, 0, 1023, dev); o.device = dev; }
    else if (a == "--config") o.config = v;
    else return usage(("unknown option " + a).c_str());
    if (!ok) return usage(("bad value for " + a + ": " + v).c_str());
  }
  // Positions stay exact while |p| * 4 * substeps < 2^24.
  const double max_abs = 1024.0 + 4.0 * o.frames;
  if (max_abs * 4.0 * o.substeps >= 16777216.0) return usage("--frames * --substeps too large for exact checks");

  auto config = uvcl::load_config(o.config);
  if (!config) return fail("config", config.error());
  auto created = uvcl::Engine::create(config.value());  // the engine owns its loop
  if (!created) return fail("Engine::create", created.error());
  uvcl::Engine& engine = *created.value();
  if (o.device >= engine.device_count()) {
    std::fprintf(stderr, "game_loop: device %zu not present (%zu devices)\n", o.device, engine.device_count());
    return 1;
  }
  const uvcl::DeviceInfo info = *engine.device(o.device);  // o.device < device_count(), checked above
  std::printf("game_loop: device %zu: %s (%s)\n", o.device, info.name.c_str(), info.platform_name.c_str());

  std::uint64_t device_errors = 0;
  engine.set_error_listener([&](const uvcl::Error& e) {
    ++device_errors;
    std::fprintf(stderr, "game_loop: device error: %s\n", e.to_string().c_str());
  });

  // --- setup (not timed) ---------------------------------------------------
  auto program = engine.compile_sync(o.device, kSource);
  if (!program) return fail("compile", program.error());
  auto advance = engine.kernel(program.value(), "advance");
  if (!advance) return fail("kernel", advance.error());

  const std::uint32_t n = o.particles;
  const std::size_t bytes = std::size_t{n} * 2 * sizeof(float);
  std::vector<float> pos0(std::size_t{n} * 2), vel(std::size_t{n} * 2);
  for (std::uint32_t i = 0; i < n; ++i) {
    pos0[2 * i] = initial_x(i);
    pos0[2 * i + 1] = initial_y(i);
    vel[2 * i] = vel_x(i);
    vel[2 * i + 1] = vel_y(i);
  }
  auto pos = engine.allocate(o.device, bytes);
  if (!pos) return fail("allocate", pos.error());
  auto velb = engine.allocate(o.device, bytes);
  if (!velb) return fail("allocate", velb.error());
  auto scratch = engine.allocate(o.device, bytes);
  if (!scratch) return fail("allocate", scratch.error());
  for (auto [b, src] :
       {std::pair{pos.value(), &pos0}, std::pair{velb.value(), &vel}, std::pair{scratch.value(), &pos0}})
    if (auto w = engine.write(b, 0, std::as_bytes(std::span<const float>(*src))); !w) return fail("write", w.error());

  const float h = 1.0f / static_cast<float>(o.substeps);
  auto launch_of = [&](uvcl::Buffer target, unsigned substeps) {
    return uvcl::Launch{advance.value(),
                        {uvcl::KernelArg::of(target), uvcl::KernelArg::of(velb.value()), uvcl::KernelArg::value(h),
                         uvcl::KernelArg::value<std::uint32_t>(substeps), uvcl::KernelArg::value<std::uint32_t>(n)},
                        {n}};
  };
  if (auto c = engine.check_launch(launch_of(pos.value(), o.substeps)); !c) return fail("check_launch", c.error());

  // Warm-up: the first launch JIT-compiles (PoCL); a few reads at once fill
  // the pinned staging pool so frames never create staging blocks. The
  // kernel's device time is measured on a scratch buffer.
  if (auto l = engine.launch(launch_of(pos.value(), 0)); !l) return fail("launch", l.error());  // a no-op step
  for (int i = 0; i < 4; ++i)
    if (auto r = engine.read(scratch.value(), 0, bytes, [](auto) {}); !r) return fail("read", r.error());
  double kernel_us = 0;
  for (int i = 0; i < 3; ++i) {
    bool timed = false;
    std::optional<uvcl::Error> error;
    auto t = engine.timed_launch(launch_of(scratch.value(), o.substeps), [&](uvcl::Result<uvcl::Timing> r) {
      timed = true;
      if (r) kernel_us = static_cast<double>(r->device_ns) / 1000.0;
      else error = r.error();
    });
    if (!t) return fail("timed_launch", t.error());
    if (auto r = engine.run_until([&] { return timed; }); !r) return fail("run_until", r.error());
    if (error) return fail("timed_launch", *error);
  }
  if (auto r = engine.finish(); !r) return fail("warm-up", r.error());
  (void)engine.release(scratch.value());

  std::printf("game_loop: %u particles, %u sub-steps: kernel %.1f us device time (timed_launch)\n", n, o.substeps,
              kernel_us);
  std::printf("game_loop: %u frames at %u Hz, one launch and one %zu-byte read-back per frame\n", o.frames, o.hz,
              bytes);

  // --- the frame loop ---------------------------------------------------------
  const auto period = std::chrono::nanoseconds(1000000000LL / o.hz);
  std::vector<double> work_us, engine_us, engine_cpu_us, poll_us, latency_frames;
  work_us.reserve(o.frames);
  engine_us.reserve(o.frames);
  engine_cpu_us.reserve(o.frames);
  poll_us.reserve(o.frames);
  double callback_us = 0, callback_cpu_us = 0;  // this frame's time inside our read callbacks
  latency_frames.reserve(o.frames);
  unsigned frame = 0;
  std::uint64_t issued = 0, delivered = 0, verified = 0, wrong = 0, read_errors = 0, overruns = 0, skipped = 0;
  std::uint64_t blocked = 0, blocked_frames = 0;  // voluntary context switches during a frame's work
  bool reported_wrong = false;

  auto on_read = [&](unsigned issued_at) {
    return [&, issued_at](uvcl::Result<std::span<const std::byte>> r) {
      struct Timed {
        Clock::time_point t;
        double cpu;
        double& acc;
        double& acc_cpu;
        ~Timed() {
          acc += us_since(t);
          acc_cpu += thread_cpu_us() - cpu;
        }
      } timed{Clock::now(), thread_cpu_us(), callback_us, callback_cpu_us};
      ++delivered;
      latency_frames.push_back(static_cast<double>(frame - issued_at));
      if (!r) {
        ++read_errors;
        std::fprintf(stderr, "game_loop: read-back of frame %u: %s\n", issued_at, r.error().to_string().c_str());
        return;
      }
      // After frame f's launch the state has had f + 1 steps of v.
      const float steps = static_cast<float>(issued_at + 1);
      const float* p = reinterpret_cast<const float*>(r->data());
      const std::size_t floats = pos0.size();
      std::size_t bad = 0;
      for (std::size_t k = 0; k < floats; ++k) bad += p[k] != pos0[k] + steps * vel[k];  // exact: see kSource
      if (bad == 0) {
        ++verified;
        return;
      }
      ++wrong;
      for (std::size_t k = 0; k < floats && !reported_wrong; ++k)
        if (p[k] != pos0[k] + steps * vel[k]) {
          reported_wrong = true;
          std::fprintf(stderr, "game_loop: frame %u particle %zu %c: got %g, expected %g (%zu values wrong)\n",
                       issued_at, k / 2, "xy"[k % 2], static_cast<double>(p[k]),
                       static_cast<double>(pos0[k] + steps * vel[k]), bad);
        }
    };
  };

  // After the last dispatch, frames keep polling (at most a second's worth)
  // until every read-back has arrived.
  const unsigned last_frame = o.frames + o.hz;
  auto deadline = Clock::now();
  for (; frame < last_frame; ++frame) {
    const bool dispatch = frame < o.frames;
    if (!dispatch && delivered == issued) break;
    const auto start = Clock::now();
    const double start_cpu = thread_cpu_us();
    const long start_switches = voluntary_switches();
    callback_us = callback_cpu_us = 0;

    engine.poll();  // read-backs of earlier frames land here
    poll_us.push_back(us_since(start));
    if (dispatch) {
      if (auto l = engine.launch(launch_of(pos.value(), o.substeps)); !l) return fail("launch", l.error());
      if (issued - delivered < o.max_reads) {  // else the device is behind: skip, do not wait
        if (auto r = engine.read(pos.value(), 0, bytes, on_read(frame)); !r) return fail("read", r.error());
        ++issued;
      } else {
        ++skipped;
      }
      work_us.push_back(us_since(start));
      engine_us.push_back(work_us.back() - callback_us);
      engine_cpu_us.push_back(thread_cpu_us() - start_cpu - callback_cpu_us);
      const long blocks = voluntary_switches() - start_switches;
      blocked += static_cast<std::uint64_t>(blocks);
      blocked_frames += blocks > 0;
    }

    deadline += period;
    if (const auto now = Clock::now(); now > deadline) {  // ran into the next frame's slot
      ++overruns;
      deadline = now;  // fell behind: do not try to catch up
    }
    std::this_thread::sleep_until(deadline);
  }
  const unsigned extra = frame - std::min(frame, o.frames);
  if (delivered != issued)
    if (auto r = engine.finish(); !r) return fail("finish", r.error());

  const Stats w = stats_of(work_us), u = stats_of(engine_us), c = stats_of(engine_cpu_us), p = stats_of(poll_us),
              l = stats_of(latency_frames);
  const double budget = std::chrono::duration<double, std::micro>(period).count();
  std::printf("frame work (us): p50 %.1f p99 %.1f max %.1f (budget %.0f) | in uvcl calls (us): p50 %.1f p99 %.1f "
              "max %.1f, thread CPU p50 %.1f p99 %.1f | poll incl. read callbacks (us): p50 %.1f p99 %.1f "
              "max %.1f\n",
              w.p50, w.p99, w.max, budget, u.p50, u.p99, u.max, c.p50, c.p99, p.p50, p.p99, p.max);
  std::printf("read-back latency (frames): p50 %.0f p99 %.0f max %.0f | %llu/%llu read-backs verified, %llu skipped, "
              "%u extra frames\n",
              l.p50, l.p99, l.max, static_cast<unsigned long long>(verified), static_cast<unsigned long long>(issued),
              static_cast<unsigned long long>(skipped), extra);
  std::printf("blocking: the loop thread blocked %llu times in %llu of %zu frames' work (voluntary context switches)\n",
              static_cast<unsigned long long>(blocked), static_cast<unsigned long long>(blocked_frames),
              work_us.size());
  // A frame that waited for its kernel would spend at least the kernel's
  // device time in uvcl calls, spinning (thread CPU) or blocked. Wall time
  // also counts being descheduled on a busy machine. The few voluntary
  // context switches seen on PoCL are short: its enqueue wakes its worker
  // threads (pthread_cond_broadcast), it does not wait for the kernel.
  std::printf("overruns: %llu frames; a frame spends %.1f us wall, %.1f us thread CPU (medians) in uvcl calls, its "
              "kernel %.1f us on the device",
              static_cast<unsigned long long>(overruns), u.p50, c.p50, kernel_us);
  if (c.p50 < kernel_us && l.p50 >= 1)
    std::printf(": frames do not wait on the device\n");
  else
    std::printf(": the kernel is too short to tell by time alone\n");

  (void)engine.release(pos.value());
  (void)engine.release(velb.value());
  const bool ok = verified == issued && wrong == 0 && read_errors == 0 && device_errors == 0;
  if (!ok) {
    std::fprintf(stderr, "game_loop: FAILED: %llu of %llu read-backs right, %llu wrong, %llu errors\n",
                 static_cast<unsigned long long>(verified), static_cast<unsigned long long>(issued),
                 static_cast<unsigned long long>(wrong),
                 static_cast<unsigned long long>(read_errors + device_errors));
    return 1;
  }
  return 0;
}
