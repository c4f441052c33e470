// fig_dag.cpp — figure 12: DAG makespan.
//
// Small task graphs, each a list of kernel launches over buffers in program
// order (fan-out/fan-in of width 2, 4 and 8 over 4 rounds; 8 chained
// diamonds; a layered random DAG), made of one synthetic kernel whose
// duration is calibrated to about 20 us, 100 us and 1 ms. For each graph and
// size the wall time from the first enqueue to all done (median of the
// repetitions, the ways taking turns after a warm-up pass):
//   uvcl      launch() each node in program order, then finish(); the default
//             queues. Its schedule recorder gives the queues it used.
//   bare1     (a) the bare API, one in-order queue, no events, clFinish.
//   bare_hand (b) the bare API over as many in-order queues as uvcl has, as an
//             expert writes it: nodes by topological level, round-robin over
//             the queues within a level; a launch waits only on its
//             producers and write-after-read predecessors on other queues
//             (the latest one per queue), an event only where someone waits,
//             a clFlush of a queue before another waits on its event.
//   bound     (c) max(critical path, total work / usable concurrency), from
//             the kernel's measured duration d on one queue: critical path =
//             longest chain (nodes) x d, total work = nodes x d, usable
//             concurrency = min(queues, the device's measured concurrency)
//             and at least 1 (one queue runs the graph at d per node).
// The device's concurrency: one launch per queue on every queue (bare),
// several rounds of it back to back, concurrency = launches x d / wall time.
// Every way starts from the same buffers and runs the same passes, so the
// final buffers must agree (uvcl and the hand schedule against (a)).
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <span>

#include "bench_cl.hpp"
#include "bench_figure.hpp"

namespace bench {
namespace {

using uvcl::Buffer;
using uvcl::KernelArg;
using uvcl::Launch;

// Eight inputs (a node with fewer repeats them), one output; `iters` steps
// of a dependent multiply-add per work-item.
constexpr const char* kDagKernel = R"CL(
__kernel void node(__global const float* a0, __global const float* a1, __global const float* a2,
                   __global const float* a3, __global const float* a4, __global const float* a5,
                   __global const float* a6, __global const float* a7, __global float* out, uint iters) {
  const size_t i = get_global_id(0);
  const float m = (a0[i] + a1[i] + a2[i] + a3[i] + a4[i] + a5[i] + a6[i] + a7[i]) * 0.125f;
  float v = m - floor(m);
  for (uint k = 0; k < iters; ++k) v = v * 0.99999f + 0.00001f;
  out[i] = m + 1.0f + 1e-6f * v;
}
)CL";
constexpr std::size_t kInputs = 8;

struct Node {
  std::vector<std::size_t> in;  // buffers read (1..8)
  std::size_t out = 0;          // buffer written
};

struct Graph {
  std::string key, label;
  std::size_t buffers = 0;
  std::vector<Node> nodes;
  // Derived (analyse()): per node its predecessors (RAW, WAW, WAR), level,
  // the hand schedule's queue and waits (node indices).
  std::vector<std::vector<std::size_t>> preds;
  std::vector<std::size_t> level;
  std::size_t critical = 0;  // nodes on the longest chain
};

Graph fan_out(std::size_t width, std::size_t rounds) {
  // Buffers: 0 x, 1 s, 2.. b_i. Per round: source x -> s, branch i s -> b_i,
  // join (all b_i) -> x.
  Graph g;
  g.key = "fan" + std::to_string(width);
  g.label = "fan-out/fan-in width " + std::to_string(width) + ", " + std::to_string(rounds) + " rounds";
  g.buffers = 2 + width;
  for (std::size_t r = 0; r < rounds; ++r) {
    g.nodes.push_back({{0}, 1});
    for (std::size_t i = 0; i < width; ++i) g.nodes.push_back({{1}, 2 + i});
    Node join;
    join.out = 0;
    for (std::size_t i = 0; i < width; ++i) join.in.push_back(2 + i);
    g.nodes.push_back(join);
  }
  return g;
}

Graph diamonds(std::size_t n) {
  // Buffers 0 A, 1 B, 2 C, 3 D: a D -> A, b A -> B, c A -> C, d B,C -> D.
  Graph g;
  g.key = "diamond";
  g.label = std::to_string(n) + " chained diamonds";
  g.buffers = 4;
  for (std::size_t k = 0; k < n; ++k) {
    g.nodes.push_back({{3}, 0});
    g.nodes.push_back({{0}, 1});
    g.nodes.push_back({{0}, 2});
    g.nodes.push_back({{1, 2}, 3});
  }
  return g;
}

Graph layered(std::size_t layers, std::size_t width, std::uint32_t seed) {
  // Buffers 0..width-1: the inputs; then one per node. Layer 0 reads 1-3
  // inputs, every later node 1-3 outputs of the layer before.
  Graph g;
  g.key = "random";
  g.label = "layered random DAG " + std::to_string(layers) + "x" + std::to_string(width) + " (seed " +
            std::to_string(seed) + ")";
  g.buffers = width * (layers + 1);
  std::mt19937 rng(seed);
  for (std::size_t l = 0; l < layers; ++l)
    for (std::size_t j = 0; j < width; ++j) {
      Node nd;
      nd.out = width * (l + 1) + j;
      const std::size_t n = 1 + rng() % 3;
      std::set<std::size_t> picked;
      while (picked.size() < n) picked.insert(width * l + rng() % width);
      nd.in.assign(picked.begin(), picked.end());
      g.nodes.push_back(nd);
    }
  return g;
}

// Predecessors from the buffers' hazards, levels, the critical path.
void analyse(Graph& g) {
  std::vector<std::optional<std::size_t>> writer(g.buffers);
  std::vector<std::vector<std::size_t>> readers(g.buffers);
  g.preds.assign(g.nodes.size(), {});
  g.level.assign(g.nodes.size(), 0);
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    std::set<std::size_t> p;
    for (std::size_t b : g.nodes[n].in)
      if (writer[b]) p.insert(*writer[b]);
    const std::size_t o = g.nodes[n].out;
    if (writer[o]) p.insert(*writer[o]);
    for (std::size_t r : readers[o]) p.insert(r);
    p.erase(n);
    g.preds[n].assign(p.begin(), p.end());
    for (std::size_t q : p) g.level[n] = std::max(g.level[n], g.level[q] + 1);
    g.critical = std::max(g.critical, g.level[n] + 1);
    for (std::size_t b : g.nodes[n].in)
      if (b != o) readers[b].push_back(n);
    writer[o] = n;
    readers[o].clear();
  }
}

// The hand schedule: queue per node and the events it waits on.
struct HandPlan {
  std::vector<std::size_t> queue;
  std::vector<std::vector<std::size_t>> waits;  // node indices, one per other queue at most
  std::vector<bool> needs_event;
  std::size_t wait_count = 0, queues_used = 0;
};

HandPlan hand_plan(const Graph& g, std::size_t queues) {
  HandPlan h;
  h.queue.resize(g.nodes.size());
  h.waits.resize(g.nodes.size());
  h.needs_event.assign(g.nodes.size(), false);
  std::map<std::size_t, std::size_t> in_level;  // level -> nodes placed so far
  std::set<std::size_t> used;
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    h.queue[n] = in_level[g.level[n]]++ % queues;
    used.insert(h.queue[n]);
    std::map<std::size_t, std::size_t> latest;  // other queue -> latest predecessor there
    for (std::size_t p : g.preds[n])
      if (h.queue[p] != h.queue[n]) latest[h.queue[p]] = std::max(latest[h.queue[p]], p);
    for (const auto& [q, p] : latest) {
      h.waits[n].push_back(p);
      h.needs_event[p] = true;
    }
    h.wait_count += h.waits[n].size();
  }
  h.queues_used = used.size();
  return h;
}

// One pass of a way: wall time, the time of the submitting calls, and the
// calling thread's CPU time (submission, waits and, for uvcl, its loop).
struct Pass {
  double ms = 0, submit_ms = 0, cpu_ms = 0;
};

// Times `submit`, then `wait`.
template <class Submit, class Wait>
Pass timed(Submit&& submit, Wait&& wait) {
  Pass p;
  const double cpu0 = cpu_seconds(RUSAGE_THREAD);
  const std::uint64_t t0 = now_ns();
  submit();
  p.submit_ms = us_since(t0) / 1e3;
  wait();
  p.ms = us_since(t0) / 1e3;
  p.cpu_ms = (cpu_seconds(RUSAGE_THREAD) - cpu0) * 1e3;
  return p;
}

std::vector<float> initial_values(std::size_t buffer, std::size_t items) {
  std::vector<float> v(items);
  for (std::size_t i = 0; i < items; ++i) v[i] = 0.01f * static_cast<float>(buffer) + 0.001f * static_cast<float>(i);
  return v;
}

// The bare side: one context, `queues` queues; a graph's buffers per way.
class DagBare {
 public:
  DagBare(const Ctx& c, unsigned queues, std::size_t wg) : b_(*c.api, c.dev(), queues), wg_(wg) {
    cl_program p = b_.build(kDagKernel);
    k_ = b_.kernel(p, "node");
  }
  Bare& bare() { return b_; }

  std::vector<cl_mem> buffers(std::size_t n) {
    std::vector<cl_mem> out;
    for (std::size_t i = 0; i < n; ++i) {
      out.push_back(b_.buffer(wg_ * sizeof(float)));
      const std::vector<float> v = initial_values(i, wg_);
      ck(b_.api.clEnqueueWriteBuffer(b_.q(), out.back(), CL_TRUE, 0, v.size() * sizeof(float), v.data(), 0, nullptr,
                                     nullptr),
         "clEnqueueWriteBuffer");
    }
    return out;
  }
  std::vector<float> read(cl_mem m) {
    std::vector<float> v(wg_);
    ck(b_.api.clEnqueueReadBuffer(b_.q(), m, CL_TRUE, 0, v.size() * sizeof(float), v.data(), 0, nullptr, nullptr),
       "clEnqueueReadBuffer");
    return v;
  }

  void enqueue(const Node& nd, const std::vector<cl_mem>& mems, std::uint32_t iters, std::size_t q,
               const std::vector<cl_event>& waits, cl_event* ev) {
    for (std::size_t a = 0; a < kInputs; ++a) b_.arg(k_, static_cast<cl_uint>(a), mems[nd.in[a % nd.in.size()]]);
    b_.arg(k_, static_cast<cl_uint>(kInputs), mems[nd.out]);
    b_.arg(k_, static_cast<cl_uint>(kInputs + 1), static_cast<cl_uint>(iters));
    ck(b_.api.clEnqueueNDRangeKernel(b_.q(q), k_, 1, nullptr, &wg_, &wg_, static_cast<cl_uint>(waits.size()),
                                     waits.empty() ? nullptr : waits.data(), ev),
       "clEnqueueNDRangeKernel");
  }

  // (a): every node on queue 0 in program order.
  Pass run_one_queue(const Graph& g, const std::vector<cl_mem>& mems, std::uint32_t iters) {
    return timed(
        [&] {
          for (const Node& nd : g.nodes) enqueue(nd, mems, iters, 0, {}, nullptr);
        },
        [&] { ck(b_.api.clFinish(b_.q(0)), "clFinish"); });
  }

  // (b): the hand schedule.
  Pass run_hand(const Graph& g, const HandPlan& h, const std::vector<cl_mem>& mems, std::uint32_t iters) {
    std::vector<cl_event> ev(g.nodes.size(), nullptr);
    std::vector<bool> dirty(b_.queue.size(), false);
    std::vector<cl_event> waits;
    const Pass p = timed([&] { submit_hand(g, h, mems, iters, ev, dirty, waits); }, [&] { b_.finish(); });
    for (cl_event e : ev)
      if (e) b_.api.clReleaseEvent(e);
    return p;
  }
  void submit_hand(const Graph& g, const HandPlan& h, const std::vector<cl_mem>& mems, std::uint32_t iters,
                   std::vector<cl_event>& ev, std::vector<bool>& dirty, std::vector<cl_event>& waits) {
    for (std::size_t n = 0; n < g.nodes.size(); ++n) {
      waits.clear();
      for (std::size_t p : h.waits[n]) {
        if (dirty[h.queue[p]]) {  // another queue waits on its event: flush it first
          ck(b_.api.clFlush(b_.q(h.queue[p])), "clFlush");
          dirty[h.queue[p]] = false;
        }
        waits.push_back(ev[p]);
      }
      enqueue(g.nodes[n], mems, iters, h.queue[n], waits, h.needs_event[n] ? &ev[n] : nullptr);
      dirty[h.queue[n]] = true;
    }
    for (std::size_t q = 0; q < b_.queue.size(); ++q)
      if (dirty[q]) ck(b_.api.clFlush(b_.q(q)), "clFlush");
  }

  // Wall time per launch of `count` launches back to back on queue 0.
  double per_launch_us(const std::vector<cl_mem>& mems, std::uint32_t iters, int count) {
    const Node nd{{0}, 1};
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < count; ++i) enqueue(nd, mems, iters, 0, {}, nullptr);
    ck(b_.api.clFinish(b_.q(0)), "clFinish");
    return us_since(t0) / count;
  }

  // `rounds` launches on each queue, each queue its own output buffer.
  double spread_ms(const std::vector<cl_mem>& mems, std::uint32_t iters, int rounds) {
    const std::uint64_t t0 = now_ns();
    for (int r = 0; r < rounds; ++r)
      for (std::size_t q = 0; q < b_.queue.size(); ++q) enqueue(Node{{0}, 1 + q}, mems, iters, q, {}, nullptr);
    for (std::size_t q = 0; q < b_.queue.size(); ++q) ck(b_.api.clFlush(b_.q(q)), "clFlush");
    b_.finish();
    return us_since(t0) / 1e3;
  }

 private:
  Bare b_;
  std::size_t wg_;
  cl_kernel k_ = nullptr;
};

// The uvcl side: one engine with the default queues.
class DagUvcl {
 public:
  DagUvcl(const Ctx& c, std::size_t wg) : e_(make_engine(c)), dev_(c.local), wg_(wg) {}
  Engine& engine() { return *e_; }
  // A kernel of its own per size, as an application's kernels of different
  // lengths would be: the engine learns costs per kernel and range.
  void use_size(double target_us) {
    const std::string src = "// ~" + std::to_string(static_cast<int>(target_us)) + " us\n" + kDagKernel;
    uvcl::Program p = must(e_->compile_sync(dev_, src), "compile");
    k_ = must(e_->kernel(p, "node"), "kernel node");
  }

  std::vector<Buffer> buffers(std::size_t n) {
    std::vector<Buffer> out;
    for (std::size_t i = 0; i < n; ++i) {
      out.push_back(must(e_->allocate(dev_, wg_ * sizeof(float)), "allocate"));
      const std::vector<float> v = initial_values(i, wg_);
      must(e_->write(out.back(), 0, std::as_bytes(std::span(v))), "write");
    }
    must(e_->finish(), "finish");
    return out;
  }
  std::vector<float> read(Buffer b) {
    auto bytes = must(e_->read_sync(b, 0, wg_ * sizeof(float)), "read_sync");
    std::vector<float> v(wg_);
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
    return v;
  }
  Pass run(const Graph& g, const std::vector<Buffer>& bufs, std::uint32_t iters) {
    Launch l;
    l.kernel = k_;
    l.args.resize(kInputs + 2);
    l.args[kInputs + 1] = KernelArg::value(static_cast<std::uint32_t>(iters));
    l.global = {wg_};
    l.local = {wg_};
    return timed(
        [&] {
          for (std::size_t n = 0; n < g.nodes.size(); ++n) {
            const Node& nd = g.nodes[n];
            for (std::size_t a = 0; a < kInputs; ++a) l.args[a] = KernelArg::of(bufs[nd.in[a % nd.in.size()]]);
            l.args[kInputs] = KernelArg::of(bufs[nd.out]);
            l.tag = n;
            must(e_->launch(l), "launch");
          }
        },
        [&] { must(e_->finish(), "finish"); });
  }

 private:
  std::unique_ptr<Engine> e_;
  std::size_t dev_, wg_;
  uvcl::Kernel k_{};
};

// Iterations for a launch of about `target_us` on one queue, and the
// duration measured (wall time per launch, back to back on one queue).
std::pair<std::uint32_t, double> calibrate(DagBare& b, const std::vector<cl_mem>& mems, double target_us,
                                           std::uint32_t start) {
  std::uint32_t iters = start;
  const int count = static_cast<int>(std::clamp(20000.0 / target_us, 8.0, 200.0));
  (void)b.per_launch_us(mems, iters, 2);  // the first launch may include a JIT step
  double per = 0;
  for (int round = 0; round < 8; ++round) {
    per = b.per_launch_us(mems, iters, count);
    if (per > 0.9 * target_us && per < 1.1 * target_us) break;
    const double scaled = static_cast<double>(iters) * target_us / std::max(per, 0.1);
    const auto next = static_cast<std::uint32_t>(std::clamp(scaled, 1.0, 2e8));
    if (next == iters) break;  // at the clamp: a launch costs more than the target with no work
    iters = next;
  }
  // The duration used for the bound: the best of five more measurements
  // (the smaller, the lower the bound).
  std::vector<double> t;
  t.reserve(5);
  for (int i = 0; i < 5; ++i) t.push_back(b.per_launch_us(mems, iters, count));
  return {iters, min_of(t)};
}

bool agree(const std::vector<float>& x, const std::vector<float>& y) {
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::fabs(x[i] - y[i]) > 1e-4f * std::max(1.0f, std::fabs(y[i]))) return false;
  return true;
}

}  // namespace

Json fig12(Ctx& c) {
  Json fig = make_figure("12", "DAG makespan: uvcl against one queue, a hand schedule and the lower bound");
  const unsigned queues = default_queues(c);
  const std::size_t wg = std::min<std::size_t>(64, c.dev().info.max_work_group_size);
  const std::vector<double> sizes = c.opt.smoke ? std::vector<double>{20} : std::vector<double>{20, 100, 1000};
  const int reps = c.pick(7, 3, 1);
  column(fig, "kernel_us", "kernel us (measured)");
  column(fig, "nodes", "nodes");
  column(fig, "critical_path", "critical path nodes");
  column(fig, "uvcl", "uvcl ms (default queues: " + std::to_string(queues) + ")");
  column(fig, "bare1", "(a) bare, 1 queue ms");
  column(fig, "bare_hand", "(b) bare, hand schedule on " + std::to_string(queues) + " queues ms");
  column(fig, "bound", "(c) lower bound ms");
  column(fig, "uvcl_over_bare1", "uvcl/(a)");
  column(fig, "uvcl_over_hand", "uvcl/(b)");
  column(fig, "uvcl_over_bound", "uvcl/(c)");
  column(fig, "queues_used", "queues used by uvcl (median pass)");
  column(fig, "cross_queue_waits", "uvcl cross-queue waits per pass");

  std::vector<Graph> graphs = {fan_out(2, 4), fan_out(4, 4), fan_out(8, 4), diamonds(8), layered(6, 6, 12)};
  for (Graph& g : graphs) analyse(g);

  DagBare bare(c, queues, wg);
  DagUvcl u(c, wg);
  // Calibration and concurrency buffers: 0 the input, 1.. an output per queue.
  const std::vector<cl_mem> cal = bare.buffers(1 + queues);

  Json kernels = Json::array(), detail = Json::array();
  std::uint32_t start = static_cast<std::uint32_t>(c.spin_iters > 0 ? c.spin_iters / 5 : 400);
  for (const double target : sizes) {
    const auto [iters, d] = calibrate(bare, cal, target, std::max<std::uint32_t>(start, 1));
    start = iters;
    // The device's concurrency over all queues, best of three.
    const int rounds = target >= 1000 ? 2 : 6;
    (void)bare.spread_ms(cal, iters, 1);
    std::vector<double> spread;
    spread.reserve(3);
    for (int i = 0; i < 3; ++i) spread.push_back(bare.spread_ms(cal, iters, rounds));
    const double concurrency = static_cast<double>(queues) * rounds * d / 1e3 / min_of(spread);
    const double usable = std::clamp(concurrency, 1.0, static_cast<double>(queues));
    Json k = Json::object();
    k["target_us"] = target;
    k["iters"] = iters;
    k["alone_us"] = d;
    k["concurrency"] = concurrency;
    k["usable_concurrency"] = usable;
    k["spread_ms"] = Json::array_of(spread);
    kernels.push(std::move(k));
    u.use_size(target);
    std::cout << "  [12] kernel ~" << target << " us: " << iters << " iterations, " << d << " us alone, concurrency "
              << concurrency << " over " << queues << " queues" << std::endl;

    for (const Graph& g : graphs) {
      const HandPlan h = hand_plan(g, queues);
      HandPlan he = h;  // the same schedule with an event per launch, as uvcl has on PoCL
      he.needs_event.assign(g.nodes.size(), true);
      const std::vector<Buffer> ub = u.buffers(g.buffers);
      const std::vector<cl_mem> ab = bare.buffers(g.buffers), hb = bare.buffers(g.buffers),
                                heb = bare.buffers(g.buffers);
      Engine& e = u.engine();
      // Warm-up pass (every way), then the timed passes, taking turns.
      (void)u.run(g, ub, iters);
      (void)bare.run_one_queue(g, ab, iters);
      (void)bare.run_hand(g, h, hb, iters);
      (void)bare.run_hand(g, he, heb, iters);
      std::vector<Pass> up, ap, hp, hep;
      std::vector<std::uint32_t> node_queue(g.nodes.size(), 0);  // the last pass's
      std::vector<double> queues_per_pass;
      std::vector<double> submitted_at(g.nodes.size(), 0);  // ms into the last pass its enqueue was decided
      std::uint64_t pass_t0 = 0;
      std::uint64_t entry_waits = 0;  // over all timed passes
      const uvcl::EngineStats s0 = e.stats();
      e.set_schedule_recorder([&](const uvcl::ScheduleEntry& s) {
        if (std::string(s.op) == "launch" && s.tag < node_queue.size()) {
          node_queue[s.tag] = s.queue;
          submitted_at[s.tag] = static_cast<double>(now_ns() - pass_t0) / 1e6;
          entry_waits += s.waits.size();
        }
      });
      for (int r = 0; r < reps; ++r) {
        pass_t0 = now_ns();
        up.push_back(u.run(g, ub, iters));
        queues_per_pass.push_back(
            static_cast<double>(std::set<std::uint32_t>(node_queue.begin(), node_queue.end()).size()));
        ap.push_back(bare.run_one_queue(g, ab, iters));
        hp.push_back(bare.run_hand(g, h, hb, iters));
        hep.push_back(bare.run_hand(g, he, heb, iters));
      }
      e.set_schedule_recorder({});
      const uvcl::EngineStats s1 = e.stats();
      auto per_pass = [&](std::uint64_t a, std::uint64_t b) { return static_cast<double>(b - a) / reps; };
      const double cross = per_pass(s0.cross_queue_waits, s1.cross_queue_waits);
      auto field = [](const std::vector<Pass>& v, double Pass::*f) {
        std::vector<double> out;
        out.reserve(v.size());
        for (const Pass& p : v) out.push_back(p.*f);
        return out;
      };
      const std::vector<double> ut = field(up, &Pass::ms), at = field(ap, &Pass::ms), ht = field(hp, &Pass::ms);
      for (std::size_t b = 0; b < g.buffers; ++b) {
        const std::vector<float> ua = u.read(ub[b]), aa = bare.read(ab[b]), ha = bare.read(hb[b]),
                                 hea = bare.read(heb[b]);
        if (!agree(ua, aa))
          fail(g.key + " at " + std::to_string(static_cast<int>(target)) + " us: uvcl's buffer " + std::to_string(b) +
               " differs from the one-queue replay's (" + std::to_string(ua[0]) + " against " + std::to_string(aa[0]) +
               ")");
        if (!agree(ha, aa) || !agree(hea, aa))
          fail(g.key + ": the hand schedule's buffer " + std::to_string(b) + " differs from the one-queue replay's");
      }
      for (Buffer b : ub) must(e.release(b), "release");
      const double n = static_cast<double>(g.nodes.size());
      const double bound = std::max(static_cast<double>(g.critical) * d, n * d / usable) / 1e3;
      const double um = median(ut), am = median(at), hm = median(ht);
      Json& row = add_row(fig, "12." + g.key + "." + std::to_string(static_cast<int>(target)),
                          g.label + ", ~" + std::to_string(static_cast<int>(target)) + " us kernel", "ms", false);
      row["kernel_us"] = d;
      row["nodes"] = g.nodes.size();
      row["critical_path"] = g.critical;
      row["uvcl"] = um;
      row["bare1"] = am;
      row["bare_hand"] = hm;
      row["bound"] = bound;
      row["uvcl_over_bare1"] = um / am;
      row["uvcl_over_hand"] = um / hm;
      row["uvcl_over_bound"] = um / bound;
      row["queues_used"] = median(queues_per_pass);
      row["cross_queue_waits"] = cross;
      Json info = Json::object();
      info["key"] = row["key"];
      info["uvcl_ms"] = Json::array_of(ut);
      info["bare1_ms"] = Json::array_of(at);
      info["bare_hand_ms"] = Json::array_of(ht);
      info["uvcl_min_ms"] = min_of(ut);
      info["bare1_min_ms"] = min_of(at);
      info["bare_hand_min_ms"] = min_of(ht);
      for (const auto& [name, v] : {std::pair<const char*, const std::vector<Pass>*>{"uvcl", &up}, {"bare1", &ap},
                                    {"bare_hand", &hp}, {"bare_hand_all_events", &hep}}) {
        info[std::string(name) + "_median_ms"] = median(field(*v, &Pass::ms));
        info[std::string(name) + "_submit_ms"] = median(field(*v, &Pass::submit_ms));
        info[std::string(name) + "_thread_cpu_ms"] = median(field(*v, &Pass::cpu_ms));
      }
      info["uvcl_per_pass"] = counters_per(s0, s1, reps);
      info["uvcl_queue_per_node"] = Json::array_of(node_queue);
      info["uvcl_submitted_at_ms"] = Json::array_of(submitted_at);
      info["uvcl_queues_per_pass"] = Json::array_of(queues_per_pass);
      info["uvcl_waits_per_pass"] = static_cast<double>(entry_waits) / reps;
      info["hand_queue_per_node"] = Json::array_of(h.queue);
      info["hand_waits"] = h.wait_count;
      info["hand_queues_used"] = h.queues_used;
      detail.push(std::move(info));
    }
  }
  fig["kernels"] = std::move(kernels);
  fig["detail"] = std::move(detail);
  fig["tinygrad_jobs"] = "covered by figure 11 (uvcl against a bare one-queue replay, same job runner)";
  fig["params"]["queues"] = queues;
  fig["params"]["work_group"] = wg;
  fig["params"]["reps"] = reps;
  return fig;
}

}  // namespace bench
