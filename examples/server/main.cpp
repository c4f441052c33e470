// server — a minimal libuv program that embeds uvcl on ITS OWN loop.
//
// The program owns the loop (uv_loop_init) and its handles: a repeating
// "tick" timer that accepts one request per tick, and an unref'd watchdog
// timer. uvcl joins the same loop (Engine::create(config, &loop)); no idle
// handle, so the loop sleeps whenever neither the ticks nor the device have
// anything to do.
//
// Each request: a Borrow write of its input (the host vector stays alive
// until the write's on_done), a launch, and a read whose callback checks the
// result and releases the request's buffers. After --requests results the
// tick stops, uv_run returns, the engine is destroyed, the loop runs once
// more to finish the close callbacks, and uv_loop_close must return 0.
//
//   server [--requests K] [--in-flight N] [--tick-ms N] [--device N] [--config FILE]
//
// Exit 0: every result right and the loop closed cleanly; 1 otherwise.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <uv.h>

#include <uvcl/engine.hpp>

namespace {

const char* kSource = R"CL(
__kernel void serve(__global const uint* in, __global uint* out, uint salt) {
  size_t i = get_global_id(0);
  uint x = in[i];
  out[i] = x * x + salt;
}
)CL";

constexpr std::uint32_t kItems = 4096;

struct Request {
  std::uint32_t id = 0;
  std::vector<std::uint32_t> input;  // borrowed by the write until its on_done
  uvcl::Buffer in, out;
  std::uint64_t start_ns = 0;
  bool written = false, answered = false;
};

struct Server {
  uv_loop_t loop{};
  uv_timer_t tick{};
  uv_timer_t watchdog{};
  std::unique_ptr<uvcl::Engine> engine;
  uvcl::Program program;
  uvcl::Kernel kernel;
  std::size_t device = 0;

  unsigned requests = 64, max_in_flight = 4, tick_ms = 1;
  std::uint32_t next_id = 0;
  std::map<std::uint32_t, std::unique_ptr<Request>> live;
  unsigned results = 0, wrong = 0, errors = 0;
  std::vector<double> latency_us;
  bool timed_out = false, stopping = false;

  void fail(const char* what, const uvcl::Error& e) {
    std::fprintf(stderr, "server: %s: %s\n", what, e.to_string().c_str());
    ++errors;
    stop();
  }

  // Closing our handles is all it takes: the engine's handles are unref'd
  // while it is idle, so uv_run returns once its last callback has run.
  void stop() {
    if (stopping) return;
    stopping = true;
    uv_timer_stop(&tick);
    uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
  }

  void on_tick() {
    if (live.size() >= max_in_flight || next_id >= requests) return;
    auto req = std::make_unique<Request>();
    Request& r = *req;
    r.id = next_id++;
    r.input.resize(kItems);
    for (std::uint32_t i = 0; i < kItems; ++i) r.input[i] = r.id * 7919u + i;
    r.start_ns = uv_hrtime();
    const std::size_t bytes = kItems * sizeof(std::uint32_t);
    auto in = engine->allocate(device, bytes);
    if (!in) return fail("allocate", in.error());
    r.in = in.value();
    auto out = engine->allocate(device, bytes);
    if (!out) return fail("allocate", out.error());
    r.out = out.value();
    live.emplace(r.id, std::move(req));

    const std::uint32_t id = r.id;
    auto w = engine->write(r.in, 0, std::as_bytes(std::span<const std::uint32_t>(r.input)), uvcl::WriteMode::Borrow,
                           [this, id](uvcl::Result<void> done) {
                             if (!done) return fail("write", done.error());
                             live.at(id)->written = true;  // the input may be freed now
                             finish_if_done(id);
                           });
    if (!w) return fail("write", w.error());
    uvcl::Launch l{kernel, {uvcl::KernelArg::of(r.in), uvcl::KernelArg::of(r.out), uvcl::KernelArg::value(id)},
                   {kItems}};
    if (auto rc = engine->launch(l); !rc) return fail("launch", rc.error());
    auto rd = engine->read(r.out, 0, bytes, [this, id](uvcl::Result<std::span<const std::byte>> data) {
      if (!data) return fail("read", data.error());
      Request& q = *live.at(id);
      const auto* got = reinterpret_cast<const std::uint32_t*>(data->data());
      for (std::uint32_t i = 0; i < kItems; ++i) {
        const std::uint32_t x = q.input[i];
        if (got[i] != x * x + q.id) {
          if (wrong == 0)
            std::fprintf(stderr, "server: request %u item %u: got %u, expected %u\n", q.id, i, got[i], x * x + q.id);
          ++wrong;
          break;
        }
      }
      latency_us.push_back(static_cast<double>(uv_hrtime() - q.start_ns) / 1000.0);
      q.answered = true;
      ++results;
      finish_if_done(id);
      if (results == requests) stop();
    });
    if (!rd) return fail("read", rd.error());
  }

  // Both callbacks in: release the buffers (from inside a callback: fine,
  // they are freed once their last uses complete) and drop the request.
  void finish_if_done(std::uint32_t id) {
    auto it = live.find(id);
    if (it == live.end() || !it->second->written || !it->second->answered) return;
    (void)engine->release(it->second->in);
    (void)engine->release(it->second->out);
    live.erase(it);
  }
};

bool parse_uint(const char* s, unsigned lo, unsigned hi, unsigned& out) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  out = static_cast<unsigned>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Server s;
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "server: missing value for %s\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    unsigned dev = 0;
    bool ok = true;
    if (a == "--requests") ok = parse_uint(v, 1, 1000000, s.requests);
    else if (a == "--in-flight") ok = parse_uint(v, 1, 1024, s.max_in_flight);
    else if (a == "--tick-ms") ok = parse_uint(v, 1, 10000, s.tick_ms);
    else if (a == "--device") { ok = parse_uint(v, 0, 1023, dev); s.device = dev; }
    else if (a == "--config") config_path = v;
    else ok = false;
    if (!ok) {
      std::fprintf(stderr,
                   "server: bad argument %s %s\nusage: server [--requests K] [--in-flight N] [--tick-ms N] "
                   "[--device N] [--config FILE]\n",
                   a.c_str(), v);
      return 2;
    }
  }

  if (int rc = uv_loop_init(&s.loop); rc != 0) {
    std::fprintf(stderr, "server: uv_loop_init: %s\n", uv_strerror(rc));
    return 1;
  }
  auto config = uvcl::load_config(config_path);
  if (!config) {
    std::fprintf(stderr, "server: config: %s\n", config.error().to_string().c_str());
    return 1;
  }
  auto engine = uvcl::Engine::create(config.value(), &s.loop);  // joins OUR loop
  if (!engine) {
    std::fprintf(stderr, "server: Engine::create: %s\n", engine.error().to_string().c_str());
    uv_loop_close(&s.loop);
    return 1;
  }
  s.engine = std::move(engine.value());
  if (s.device >= s.engine->device_count()) {
    std::fprintf(stderr, "server: device %zu not present\n", s.device);
    return 1;
  }
  std::printf("server: device %zu: %s (%s)\n", s.device, s.engine->device(s.device)->name.c_str(),
              s.engine->device(s.device)->platform_name.c_str());
  s.engine->set_error_listener([](const uvcl::Error& e) {
    std::fprintf(stderr, "server: device error: %s\n", e.to_string().c_str());
  });

  uv_timer_init(&s.loop, &s.tick);
  s.tick.data = &s;
  uv_timer_init(&s.loop, &s.watchdog);
  s.watchdog.data = &s;

  // Asynchronous build: the loop keeps running; ticks start once it is built.
  auto prog = s.engine->compile(s.device, kSource, "", [&s](uvcl::Result<void> built) {
    if (!built) return s.fail("compile", built.error());
    auto k = s.engine->kernel(s.program, "serve");
    if (!k) return s.fail("kernel", k.error());
    s.kernel = k.value();
    uv_timer_start(&s.tick, [](uv_timer_t* t) { static_cast<Server*>(t->data)->on_tick(); }, 0, s.tick_ms);
  });
  if (!prog) {
    std::fprintf(stderr, "server: compile: %s\n", prog.error().to_string().c_str());
    return 1;
  }
  s.program = prog.value();

  // A watchdog that must not keep the loop alive by itself.
  uv_timer_start(&s.watchdog, [](uv_timer_t* t) {
    auto* srv = static_cast<Server*>(t->data);
    std::fprintf(stderr, "server: watchdog: no finish after 60 s\n");
    srv->timed_out = true;
    uv_stop(&srv->loop);
  }, 60000, 0);
  uv_unref(reinterpret_cast<uv_handle_t*>(&s.watchdog));

  const std::uint64_t t0 = uv_hrtime();
  uv_run(&s.loop, UV_RUN_DEFAULT);  // returns when the tick is closed and the engine is idle
  const double ms = static_cast<double>(uv_hrtime() - t0) / 1e6;

  std::sort(s.latency_us.begin(), s.latency_us.end());
  auto pct = [&](double q) {
    const std::vector<double>& v = s.latency_us;
    return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
  };
  std::printf("server: %u/%u results in %.1f ms, %u wrong; request latency (us): p50 %.0f p99 %.0f max %.0f\n",
              s.results, s.requests, ms, s.wrong, pct(0.5), pct(0.99), pct(1.0));
  const uvcl::EngineStats st = s.engine->stats();
  std::printf("server: engine: %llu launches, %llu writes, %llu reads, %llu live buffers, %llu in flight\n",
              static_cast<unsigned long long>(st.launches), static_cast<unsigned long long>(st.writes),
              static_cast<unsigned long long>(st.reads), static_cast<unsigned long long>(st.live_buffers),
              static_cast<unsigned long long>(st.in_flight));

  // Teardown: our watchdog, then the engine (it closes its handles on our
  // loop), then one more run for the close callbacks, then the loop itself.
  uv_timer_stop(&s.watchdog);
  uv_close(reinterpret_cast<uv_handle_t*>(&s.watchdog), nullptr);
  if (!s.stopping) uv_close(reinterpret_cast<uv_handle_t*>(&s.tick), nullptr);  // watchdog fired or setup failed
  (void)s.engine->release(s.kernel);
  (void)s.engine->release(s.program);
  s.live.clear();
  s.engine.reset();
  uv_run(&s.loop, UV_RUN_DEFAULT);
  const int close_rc = uv_loop_close(&s.loop);
  std::printf("server: uv_loop_close: %d%s%s\n", close_rc, close_rc == 0 ? "" : " ",
              close_rc == 0 ? "" : uv_strerror(close_rc));

  const bool ok = close_rc == 0 && !s.timed_out && s.errors == 0 && s.wrong == 0 && s.results == s.requests;
  return ok ? 0 : 1;
}
