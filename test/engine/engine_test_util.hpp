// Helpers shared by the end-to-end engine tests (test/engine/*_test.cpp).
//
// - kKernels: every kernel the tests launch, in ONE OpenCL C source. Each test
//   builds it on a fresh engine; after the first build PoCL serves it from its
//   kernel cache (POCL_CACHE_DIR), so a test pays ~0.1 s, not ~1 s.
// - spin: slow work with an exact result. Each work-item applies `iters` steps
//   of a 32-bit LCG to its input; lcg_steps() computes the same value on the
//   host in O(log iters), so a 300 ms kernel is checked exactly and cheaply.
//   Its speed is measured once per process (spin_iters_for).
// - time_call: wall time of a call, and whether the thread was preempted
//   meanwhile (the machine running the suite may be loaded: a call that was
//   descheduled did not block).
// - ScheduleLog / HappensBefore: the schedule the engine recorded, and the
//   happens-before relation it implies (same-queue order + waits,
//   transitively), with a check that every hazard pair is ordered.
#pragma once

#include <sys/resource.h>
#include <uv.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine_fixture.hpp"

namespace uvcl::testing::util {

inline constexpr const char* kKernels = R"CL(
__kernel void axpbc(__global const uint* a, __global const uint* b, __global uint* out, uint c, uint n) {
  size_t i = get_global_id(0);
  if (i < n) out[i] = a[i] * 3u + b[i] + c;
}
__kernel void mix_inplace(__global uint* x, uint c, uint n) {
  size_t i = get_global_id(0);
  if (i < n) { uint v = x[i]; x[i] = (v ^ (v >> 7)) * 2654435761u + c; }
}
__kernel void permute(__global const uint* a, __global uint* out, uint s, uint n) {
  size_t i = get_global_id(0);
  if (i < n) out[i] = a[(i * 7u + s) % n] + s;
}
__kernel void spin(__global const uint* in, __global uint* out, uint iters, uint n) {
  size_t i = get_global_id(0);
  if (i >= n) return;
  uint x = in[i];
  for (uint k = 0; k < iters; ++k) x = x * 1664525u + 1013904223u;
  out[i] = x;
}
__kernel void gate6(__global uint* b0, __global uint* b1, __global uint* b2, __global uint* b3,
                    __global uint* b4, __global uint* b5, uint n, uint iters, uint seed) {
  if (get_global_id(0) != 0) return;
  uint x = seed;
  for (uint k = 0; k < iters; ++k) x = x * 1664525u + 1013904223u;
  for (uint i = 0; i < n; ++i) {
    b0[i] = (i * 2246822519u ^ 0x00000000u) + x;
    b1[i] = (i * 2246822519u ^ 0x9e3779b9u) + x;
    b2[i] = (i * 2246822519u ^ 0x3c6ef372u) + x;
    b3[i] = (i * 2246822519u ^ 0xdaa66d2bu) + x;
    b4[i] = (i * 2246822519u ^ 0x78dde6e4u) + x;
    b5[i] = (i * 2246822519u ^ 0x1715609du) + x;
  }
}
__kernel void set_value(__global uint* out, uint v, uint n) {
  size_t i = get_global_id(0);
  if (i < n) out[i] = v + (uint)i;
}
__kernel void add_offset(__global const uint* in, __global uint* out, uint off, uint add, uint n) {
  size_t i = get_global_id(0);
  if (i < n) out[i] = in[off + i] + add;
}
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void reqd64(__global const uint* in, __global uint* out) {
  size_t i = get_global_id(0);
  out[i] = in[i] + 1u;
}
__kernel void with_local(__global uint* out, __local uint* tmp) {
  size_t l = get_local_id(0);
  tmp[l] = (uint)l;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = tmp[get_local_size(0) - 1 - l];
}
)CL";

// The values gate6 writes: buffer k, element i, after `iters` LCG steps of seed.
inline constexpr std::uint32_t kGateSalt[6] = {0x00000000u, 0x9e3779b9u, 0x3c6ef372u,
                                               0xdaa66d2bu, 0x78dde6e4u, 0x1715609du};

// x after `steps` applications of x -> x * 1664525 + 1013904223 (mod 2^32).
inline std::uint32_t lcg_steps(std::uint32_t x, std::uint64_t steps) {
  std::uint32_t ra = 1, rc = 0;                   // accumulated map: x -> ra x + rc
  std::uint32_t a = 1664525u, c = 1013904223u;    // the map applied 2^bit times
  while (steps != 0) {
    if (steps & 1) {
      ra = a * ra;
      rc = a * rc + c;
    }
    c = a * c + c;
    a = a * a;
    steps >>= 1;
  }
  return ra * x + rc;
}

inline std::uint32_t gate_value(std::size_t buffer, std::uint32_t i, std::uint32_t seed, std::uint32_t iters) {
  return ((i * 2246822519u) ^ kGateSalt[buffer]) + lcg_steps(seed, iters);
}

inline Launch make_launch(Kernel k, std::vector<KernelArg> args, std::vector<GlobalAxis> global,
                          std::vector<std::size_t> local = {}, std::uint64_t tag = 0) {
  Launch l;
  l.kernel = k;
  l.args = std::move(args);
  l.global = std::move(global);
  l.local = std::move(local);
  l.tag = tag;
  return l;
}

inline KernelArg u32(std::uint32_t v) { return KernelArg::value<std::uint32_t>(v); }
inline KernelArg buf(Buffer b) { return KernelArg::of(b); }

// Nanoseconds per spin step of ONE work-item, measured once per process with
// a timed launch (after a warm-up that absorbs PoCL's first-launch JIT).
inline double& spin_ns_cache() {
  static double ns = 0;
  return ns;
}

inline double spin_ns_per_iter(Engine& e, Kernel spin) {
  double& cached = spin_ns_cache();
  if (cached > 0) return cached;
  auto in = e.allocate(0, 4);
  auto out = e.allocate(0, 4);
  if (!in.ok() || !out.ok()) return 2.0;
  const std::uint32_t zero = 0;
  (void)e.write(in.value(), 0, std::as_bytes(std::span<const std::uint32_t>(&zero, 1)));
  double best = 0;
  for (std::uint32_t iters : {1000u, 1u << 21, 1u << 21}) {
    bool done = false;
    std::uint64_t ns = 0;
    auto r = e.timed_launch(make_launch(spin, {buf(in.value()), buf(out.value()), u32(iters), u32(1)}, {1}, {1}),
                            [&](Result<Timing> t) {
                              done = true;
                              if (t.ok()) ns = t->device_ns;
                            });
    if (!r.ok() || !e.run_until([&] { return done; }).ok()) break;
    if (iters > 1000u && ns > 0) {
      const double per = static_cast<double>(ns) / iters;
      best = best == 0 ? per : std::min(best, per);  // the faster run: the other was disturbed
    }
  }
  (void)e.release(in.value());
  (void)e.release(out.value());
  cached = best > 0.05 ? best : 2.0;
  return cached;
}

// Iterations for a spin of about `ms` milliseconds over `items` work-items of
// ONE work-group (they run one after another on one PoCL thread).
inline std::uint32_t spin_iters_for(Engine& e, Kernel spin, double ms, std::uint32_t items = 1) {
  const double per = spin_ns_per_iter(e, spin) * items;
  const double iters = ms * 1e6 / per;
  return static_cast<std::uint32_t>(std::clamp(iters, 1000.0, 4.0e9));
}

struct CallTime {
  std::uint64_t ns = 0;
  bool preempted = false;  // an involuntary context switch happened during the call
};

template <class Fn>
CallTime time_call(Fn&& fn) {
  rusage before{}, after{};
  getrusage(RUSAGE_THREAD, &before);
  const std::uint64_t t0 = uv_hrtime();
  fn();
  const std::uint64_t t1 = uv_hrtime();
  getrusage(RUSAGE_THREAD, &after);
  return CallTime{t1 - t0, after.ru_nivcsw != before.ru_nivcsw};
}

inline constexpr std::uint64_t kMs = 1000000;

// --- schedules ----------------------------------------------------------------

struct Recorded {
  ScheduleEntry entry;
  std::uint64_t at_ns = 0;  // when the recorder saw it (after its enqueue)
};

// Records while attached; detaches itself when destroyed (an assertion that
// returns early must not leave the engine writing into a dead log).
class ScheduleLog {
 public:
  ScheduleLog() = default;
  ScheduleLog(const ScheduleLog&) = delete;
  ScheduleLog& operator=(const ScheduleLog&) = delete;
  ~ScheduleLog() { detach(); }
  void attach(Engine& e) {
    engine_ = &e;
    e.set_schedule_recorder([this](const ScheduleEntry& s) { log.push_back(Recorded{s, uv_hrtime()}); });
  }
  void detach() {
    if (engine_) engine_->set_schedule_recorder({});
    engine_ = nullptr;
  }
  std::vector<ScheduleEntry> entries() const {
    std::vector<ScheduleEntry> out;
    for (const Recorded& r : log) out.push_back(r.entry);
    return out;
  }
  const ScheduleEntry* find_tag(const char* op, std::uint64_t tag) const {
    for (const Recorded& r : log)
      if (std::string(r.entry.op) == op && r.entry.tag == tag) return &r.entry;
    return nullptr;
  }
  std::vector<Recorded> log;

 private:
  Engine* engine_ = nullptr;
};

inline std::string describe(const ScheduleEntry& s) {
  std::string out = std::string(s.op) + " #" + std::to_string(s.id) + " (tag " + std::to_string(s.tag) + ", device " +
                    std::to_string(s.device) + ", queue " + std::to_string(s.queue) + ", reads {";
  for (Buffer b : s.reads) out += " " + std::to_string(b.id);
  out += " }, writes {";
  for (Buffer b : s.writes) out += " " + std::to_string(b.id);
  out += " }, waits {";
  for (std::uint64_t w : s.waits) out += " " + std::to_string(w);
  return out + " })";
}

// The happens-before relation of a recorded schedule: an entry follows the
// previous entry of its (device, queue) — in-order queues — every command it
// waits for, and every producer whose wait was dropped because it had
// completed (ScheduleEntry::completed), transitively. Entries must be given in submission order.
class HappensBefore {
 public:
  explicit HappensBefore(std::vector<ScheduleEntry> s) : s_(std::move(s)) {
    const std::size_t n = s_.size();
    words_ = (n + 63) / 64;
    anc_.assign(n, std::vector<std::uint64_t>(words_, 0));
    std::map<std::pair<std::size_t, std::uint32_t>, std::size_t> last_on_queue;
    for (std::size_t i = 0; i < n; ++i) {
      pos_[s_[i].id] = i;
      std::vector<std::size_t> preds;
      // kNoQueue (a user event) is not an in-order queue: no queue edge.
      if (s_[i].queue != 0xffffffffu) {
        const auto key = std::make_pair(s_[i].device, s_[i].queue);
        if (auto it = last_on_queue.find(key); it != last_on_queue.end()) preds.push_back(it->second);
        last_on_queue[key] = i;
      }
      std::vector<std::uint64_t> before = s_[i].waits;
      before.insert(before.end(), s_[i].completed.begin(), s_[i].completed.end());
      for (std::uint64_t w : before) {
        auto it = pos_.find(w);
        if (it == pos_.end()) {
          ++unknown_waits_;  // earlier than the log, or not (yet) submitted: a bug if so
          continue;
        }
        preds.push_back(it->second);
      }
      for (std::size_t p : preds) {
        for (std::size_t k = 0; k < words_; ++k) anc_[i][k] |= anc_[p][k];
        anc_[i][p / 64] |= std::uint64_t{1} << (p % 64);
      }
    }
  }

  // True if command `before` happens before command `after` in the schedule.
  bool ordered(std::uint64_t before, std::uint64_t after) const {
    auto a = pos_.find(before), b = pos_.find(after);
    if (a == pos_.end() || b == pos_.end()) return false;
    return (anc_[b->second][a->second / 64] >> (a->second % 64)) & 1;
  }

  // Every pair of commands (earlier id first) on different queues that
  // touch one buffer, at least one writing it, must be ordered.
  std::vector<std::string> hazard_violations(std::size_t* cross_queue_pairs = nullptr) const {
    std::vector<std::string> out;
    std::size_t pairs = 0;
    std::vector<std::size_t> order(s_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return s_[x].id < s_[y].id; });
    for (std::size_t xi = 0; xi < order.size(); ++xi) {
      for (std::size_t yi = xi + 1; yi < order.size(); ++yi) {
        const ScheduleEntry& x = s_[order[xi]];
        const ScheduleEntry& y = s_[order[yi]];
        const bool same_queue = x.device == y.device && x.queue == y.queue && x.queue != 0xffffffffu;
        if (same_queue) continue;
        const char* kind = conflict(x, y);
        if (kind == nullptr) continue;
        ++pairs;
        if (!ordered(x.id, y.id))
          out.push_back(std::string(kind) + " hazard not ordered: " + describe(x) + " then " + describe(y));
      }
    }
    if (cross_queue_pairs) *cross_queue_pairs = pairs;
    return out;
  }

  std::size_t unknown_waits() const { return unknown_waits_; }

  // "RAW", "WAR", "WAW" or nullptr.
  static const char* conflict(const ScheduleEntry& x, const ScheduleEntry& y) {
    auto has = [](const std::vector<Buffer>& v, Buffer b) { return std::find(v.begin(), v.end(), b) != v.end(); };
    for (Buffer b : x.writes)
      if (has(y.writes, b)) return "WAW";
    for (Buffer b : x.writes)
      if (has(y.reads, b)) return "RAW";
    for (Buffer b : x.reads)
      if (has(y.writes, b)) return "WAR";
    return nullptr;
  }

 private:
  std::vector<ScheduleEntry> s_;
  std::map<std::uint64_t, std::size_t> pos_;
  std::vector<std::vector<std::uint64_t>> anc_;
  std::size_t words_ = 0;
  std::size_t unknown_waits_ = 0;
};

inline std::vector<std::uint32_t> iota_values(std::size_t n, std::uint32_t mul, std::uint32_t add) {
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint32_t>(i) * mul + add;
  return v;
}

}  // namespace uvcl::testing::util
