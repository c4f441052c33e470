// launch.cpp — launch validation at the API edge, and the launch calls.
//
// Everything checkable without the device is checked here, synchronously,
// against the kernel's real signature and the device's limits; the message
// names the kernel and the argument or axis.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <span>
#include <utility>

#include "engine/engine_impl.hpp"
#include "cl/param_check.hpp"

namespace uvcl {

namespace {

std::string describe(const KernelParam& p, std::size_t i) {
  std::string s = "argument " + std::to_string(i);
  if (!p.type_name.empty() || !p.name.empty()) s += " (" + p.type_name + (p.name.empty() ? "" : " " + p.name) + ")";
  return s;
}

const char* kind_name(KernelArg::Kind k) {
  switch (k) {
    case KernelArg::Kind::Buffer: return "a buffer";
    case KernelArg::Kind::Scalar: return "a scalar";
    case KernelArg::Kind::Local: return "a local size";
  }
  return "?";
}

KernelArg::Kind kind_for(ParamAccess a) {
  switch (a) {
    case ParamAccess::ReadOnly:
    case ParamAccess::Written:
    case ParamAccess::WriteOnly: return KernelArg::Kind::Buffer;
    case ParamAccess::Scalar: return KernelArg::Kind::Scalar;
    case ParamAccess::Local: return KernelArg::Kind::Local;
  }
  return KernelArg::Kind::Scalar;
}

// The value of an integer scalar, for global sizes taken from an argument.
std::optional<std::uint64_t> integer_value(const Scalar& s) {
  if (scalar_is_float(s.type)) return std::nullopt;
  std::int64_t v = 0;
  switch (scalar_size(s.type)) {
    case 1: { std::int8_t x = 0; std::memcpy(&x, s.bytes.data(), 1); v = scalar_is_signed(s.type) ? x : static_cast<std::uint8_t>(x); break; }
    case 2: { std::int16_t x = 0; std::memcpy(&x, s.bytes.data(), 2); v = scalar_is_signed(s.type) ? x : static_cast<std::uint16_t>(x); break; }
    case 4: { std::int32_t x = 0; std::memcpy(&x, s.bytes.data(), 4); v = scalar_is_signed(s.type) ? x : static_cast<std::uint32_t>(x); break; }
    default: std::memcpy(&v, s.bytes.data(), 8); break;
  }
  if (v < 0) return std::nullopt;
  return static_cast<std::uint64_t>(v);
}

// A parameter inferred WriteOnly (KernelRec::write_only_inferred) whose
// launch does not store all of its buffer reads it, as hazards and failures
// go: what the launch leaves is the buffer's writer's, so the launch follows
// that writer, inherits its failure, and does not clear a poison.
void read_what_is_not_stored_whole(const Launch& l, const KernelRec& k, Command& c) {
  const std::array<std::uint64_t, 3> global{c.global[0], c.global[1], c.global[2]};
  const std::span<const std::uint64_t> range(global.data(), c.dims);
  for (std::size_t i = 0; i < k.write_only_inferred.size(); ++i) {
    if (!k.write_only_inferred[i]) continue;
    for (Access& a : c.accesses)
      if (a.buffer == l.args[i].buffer.id && !a.read && !stores_whole_buffer(k.params[i], range, a.rec->bytes))
        a.read = true;
  }
}

}  // namespace

Result<KernelRec*> Engine::Impl::launched_kernel(const Launch& l) {
  UVCL_TRY(refuse_new_work("launch"));
  auto kit = progs.kernels.find(l.kernel.id);
  if (kit == progs.kernels.end() || kit->second.released)
    return Error{Status::InvalidArgument, "launch: kernel " + std::to_string(l.kernel.id) + " is not a live kernel"};
  return &kit->second;
}

Result<void> Engine::Impl::resolve_launch(const Launch& l, Op op, KernelRec& k, Command& c) {
  // Messages are built only on error: a launch must not pay for them.
  auto where = [&k] { return "launch of kernel " + k.name; };
  DeviceCtx& d = *devices[k.device];
  if (d.state == sched::DeviceState::Lost)
    return Error{Status::DeviceLost, where() + ": device " + std::to_string(k.device) + " is lost"};
  if (l.args.size() != k.params.size())
    return Error{Status::IncorrectKernelArg, where() + ": the kernel takes " + std::to_string(k.params.size()) +
                                                 " arguments, got " + std::to_string(l.args.size())};
  c.op = op;
  c.tag = l.tag;
  c.kernel = l.kernel.id;
  c.kernel_rec = &k;
  for (std::size_t i = 0; i < l.args.size(); ++i) {
    const KernelArg& a = l.args[i];
    const KernelParam& p = k.params[i];
    if (p.unsupported)
      return Error{Status::IncorrectKernelArg, where() + ": " + describe(p, i) + " is " + p.unsupported};
    if (a.kind != kind_for(p.access))
      return Error{Status::IncorrectKernelArg, where() + ": " + describe(p, i) + " expects " +
                                                   param_kind_text(p.access) + ", got " + kind_name(a.kind)};
    if (a.kind == KernelArg::Kind::Buffer) {
      BufferRec* b = memory.buffers.find(a.buffer.id);
      if (!b || b->state != sched::BufferState::Live)
        return memory.live_buffer(a.buffer, where().c_str()).error().context(describe(p, i));
      if (b->device != k.device)
        return Error{Status::IncorrectKernelArg, where() + ": " + describe(p, i) + ": buffer " +
                                                     std::to_string(a.buffer.id) + " is on device " +
                                                     std::to_string(b->device) + ", the kernel on device " +
                                                     std::to_string(k.device)};
      const bool reads = p.access != ParamAccess::WriteOnly;
      const bool writes = p.access != ParamAccess::ReadOnly;
      auto same = std::find_if(c.accesses.begin(), c.accesses.end(),
                               [&](const Access& x) { return x.buffer == a.buffer.id; });
      if (same == c.accesses.end()) {
        c.accesses.push_back(Access{a.buffer.id, reads, writes, b});
      } else {
        same->read = same->read || reads;
        same->write = same->write || writes;
      }
    } else if (a.kind == KernelArg::Kind::Scalar) {
      if (p.scalar_size != a.scalar.size())  // a size uvcl does not know is refused above (unsupported)
        return Error{Status::IncorrectKernelArg, where() + ": " + describe(p, i) + " is " +
                                                     std::to_string(p.scalar_size) + " bytes, got a " +
                                                     std::to_string(a.scalar.size()) + "-byte " +
                                                     std::string(scalar_type_name(a.scalar.type))};
    } else {
      if (a.local_bytes == 0 || a.local_bytes > d.dev.info.local_memory)
        return Error{Status::IncorrectKernelArg, where() + ": " + describe(p, i) + ": local size " +
                                                     std::to_string(a.local_bytes) + " bytes, the device allows 1.." +
                                                     std::to_string(d.dev.info.local_memory)};
    }
  }
  c.args.assign(l.args.begin(), l.args.end());

  const DeviceInfo& info = d.dev.info;
  if (l.global.empty() || l.global.size() > 3 || l.global.size() > info.max_work_item_dims)
    return Error{Status::KernelLaunch, where() + ": global size has " + std::to_string(l.global.size()) +
                                           " axes, expected 1.." + std::to_string(std::min<std::uint32_t>(3, info.max_work_item_dims))};
  if (!l.local.empty() && l.local.size() != l.global.size())
    return Error{Status::KernelLaunch, where() + ": local size has " + std::to_string(l.local.size()) +
                                           " axes, global size " + std::to_string(l.global.size())};
  c.dims = static_cast<std::uint32_t>(l.global.size());
  c.has_local = !l.local.empty();
  std::size_t group = 1;
  std::size_t work_items = 1;  // product of the global sizes
  constexpr std::size_t kMaxSize = std::numeric_limits<std::size_t>::max();
  for (std::uint32_t ax = 0; ax < c.dims; ++ax) {
    auto axis = [ax] { return "axis " + std::to_string(ax); };
    std::size_t local = c.has_local ? l.local[ax] : 0;
    if (c.has_local) {
      if (local == 0) return Error{Status::KernelLaunch, where() + ": local size of " + axis() + " must not be 0"};
      if (local > info.max_work_item_sizes[ax])
        return Error{Status::KernelLaunch, where() + ": local size " + std::to_string(local) + " on " + axis() +
                                               " exceeds the device's " + std::to_string(info.max_work_item_sizes[ax])};
      group *= local;
    }
    std::size_t global = l.global[ax].items;
    if (const int arg = l.global[ax].groups_from_arg; arg >= 0) {
      if (!c.has_local)
        return Error{Status::KernelLaunch, where() + ": global size of " + axis() +
                                               " is taken from an argument: a local size is required"};
      std::optional<std::uint64_t> groups;
      if (static_cast<std::size_t>(arg) < l.args.size() && l.args[arg].kind == KernelArg::Kind::Scalar)
        groups = integer_value(l.args[arg].scalar);
      if (!groups)
        return Error{Status::KernelLaunch, where() + ": global size of " + axis() + " names argument " +
                                               std::to_string(arg) + ", which is not a non-negative integer scalar"};
      if (*groups > kMaxSize / local)
        return Error{Status::KernelLaunch, where() + ": global size of " + axis() + ": " + std::to_string(*groups) +
                                               " groups of " + std::to_string(local) + " overflow size_t"};
      global = static_cast<std::size_t>(*groups) * local;
    }
    if (global == 0) return Error{Status::KernelLaunch, where() + ": global size of " + axis() + " must not be 0"};
    if (ax < info.max_global_sizes.size() && global > info.max_global_sizes[ax])
      return Error{Status::KernelLaunch, where() + ": global size " + std::to_string(global) + " on " + axis() +
                                             " exceeds the device grid (" + std::to_string(info.max_global_sizes[ax]) + ")"};
    if (c.has_local && global % local != 0)
      return Error{Status::KernelLaunch, where() + ": global size " + std::to_string(global) + " on " + axis() +
                                             " is not a multiple of the local size " + std::to_string(local)};
    if (global > kMaxSize / work_items)
      return Error{Status::KernelLaunch, where() + ": global size " + std::to_string(global) + " on " + axis() +
                                             " makes the work-item count overflow size_t"};
    work_items *= global;
    c.global[ax] = global;
    c.local[ax] = local;
  }
  if (k.any_write_only_inferred) read_what_is_not_stored_whole(l, k, c);
  const std::size_t max_group = std::min(info.max_work_group_size, k.max_work_group ? k.max_work_group : info.max_work_group_size);
  if (c.has_local && group > max_group)
    return Error{Status::KernelLaunch, where() + ": work-group of " + std::to_string(group) +
                                           " work-items exceeds the limit " + std::to_string(max_group)};
  return {};
}

template <class Finish>
Result<void> Engine::Impl::enqueue_launch(const Launch& l, Op op, Finish&& finish) {
  auto k = launched_kernel(l);
  if (!k) return std::move(k).error();
  const std::uint32_t device = (*k)->device;
  Command& c = submitter.stage(device);
  if (auto ok = resolve_launch(l, op, **k, c); !ok) {
    submitter.unstage(device);
    return ok;
  }
  finish(c);
  ++counters.launches;
  submitter.commit(device);
  return {};
}

Result<void> Engine::launch(const Launch& l) { return impl_->enqueue_launch(l, Op::Launch, [](Command&) {}); }

Result<void> Engine::launch(const Launch& l, LaunchDoneFn on_done, void* user_data) {
  if (on_done == nullptr) return launch(l);
  return impl_->enqueue_launch(l, Op::Launch, [on_done, user_data](Command& cmd) {
    cmd.wants_callback = true;  // someone waits: ask the driver for a completion callback
    // Two pointers: held inside the std::function, no allocation.
    cmd.on_final = [on_done, user_data](CommandId, const std::optional<Error>& err) {
      if (!err) {
        on_done(0, nullptr, user_data);
        return;
      }
      const std::string text = err->to_string();
      on_done(-static_cast<int>(err->status), text.c_str(), user_data);
    };
  });
}

std::weak_ptr<const void> Engine::lifetime() const { return impl_->lifetime; }

BusyHold Engine::hold_busy() {
  ++impl_->loop_holds;
  impl_->update_busy();
  return BusyHold(this, impl_->lifetime);
}

BusyHold::BusyHold(BusyHold&& other) noexcept
    : engine_(std::exchange(other.engine_, nullptr)), alive_(std::move(other.alive_)) {}

BusyHold& BusyHold::operator=(BusyHold&& other) noexcept {
  if (this != &other) {
    release();
    engine_ = std::exchange(other.engine_, nullptr);
    alive_ = std::move(other.alive_);
  }
  return *this;
}

BusyHold::~BusyHold() { release(); }

void BusyHold::release() {
  Engine* engine = std::exchange(engine_, nullptr);
  if (engine == nullptr || alive_.expired()) return;
  alive_.reset();
  --engine->impl_->loop_holds;
  engine->impl_->update_busy();
}

Result<void> Engine::check_launch(const Launch& l) {
  auto k = impl_->launched_kernel(l);
  if (!k) return std::move(k).error();
  Command c;
  return impl_->resolve_launch(l, Op::Launch, **k, c);
}

Result<void> Engine::timed_launch(const Launch& l, TimingCallback on_timed) {
  Impl& e = *impl_;
  if (!on_timed) return Error{Status::InvalidArgument, "timed_launch: a callback is required (it receives the timing)"};
  std::uint32_t device = 0;
  UVCL_TRY(e.enqueue_launch(l, Op::Timed, [&e, &on_timed, &device](Command& cmd) {
    cmd.wants_callback = true;
    device = cmd.kernel_rec->device;
    cmd.on_final = [&e, cb = std::move(on_timed)](CommandId id, const std::optional<Error>& err) {
      std::optional<Result<Timing>> t = e.commands.find(id)->take_timing();  // the record lives until after this
      if (err) cb(*err);
      else if (!t) cb(Error{Status::KernelSync, "timed launch: no profiling information"});
      else cb(std::move(*t));
    };
  }));
  e.submitter.submit_window(device);  // a sync point
  return {};
}

}  // namespace uvcl
