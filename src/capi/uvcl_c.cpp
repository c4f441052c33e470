// The C API (include/uvcl/uvcl.h) over the C++ engine: translation only.
// Statuses are negated uvcl::Status values; a failed call's message is kept
// in the handle (uvcl_engine_last_error); C callbacks are carried as a
// function pointer and user data inside the engine's callbacks.
#include "uvcl/uvcl.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "uvcl/engine.hpp"

#ifndef UVCL_VERSION
#define UVCL_VERSION "unknown"
#endif

struct uvcl_engine_s {
  std::unique_ptr<uvcl::Engine> cpp;  // the engine; null: creation failed (last_error says why) or destroyed
  mutable std::string last_error;
  // The strings uvcl_kernel_params and uvcl_trace_json hand out (cppcheck
  // misses their uses, through the handle, in the extern "C" functions).
  // cppcheck-suppress unusedStructMember
  std::vector<uvcl::KernelParam> params;
  // cppcheck-suppress unusedStructMember
  std::string trace;
  // What uvcl_device_info hands out points into these, for the handle's life.
  // cppcheck-suppress unusedStructMember
  std::vector<uvcl::DeviceInfo> devices;
  // Reused by every launch: its vectors keep their capacity, so a launch
  // through the C API allocates nothing once warm.
  uvcl::Launch launch;
  // uvcl calls on the stack that may run callbacks; a callback that
  // destroys the handle leaves the freeing to the outermost of them.
  int depth = 0;
  bool doomed = false;
};

namespace {

using uvcl::Error;
using uvcl::Result;
using uvcl::Status;

static_assert(static_cast<int>(Status::Initialization) == -UVCL_EINITIALIZATION);
static_assert(static_cast<int>(Status::IncorrectKernelArg) == -UVCL_EINCORRECT_KERNEL_ARG);
static_assert(static_cast<int>(Status::InvalidArgument) == -UVCL_EINVALID_ARGUMENT);
static_assert(static_cast<int>(Status::Cancelled) == -UVCL_ECANCELLED);
static_assert(static_cast<int>(uvcl::ScalarType::Double) == UVCL_DOUBLE);
static_assert(static_cast<int>(uvcl::ParamAccess::WriteOnly) == UVCL_ACCESS_WRITE_ONLY);
static_assert(static_cast<int>(uvcl::DeviceType::Other) == UVCL_DEVICE_OTHER);

int code(Status s) { return -static_cast<int>(s); }

// Records a failure in the handle; returns its code.
int fail(const uvcl_engine_t* h, const Error& e) {
  h->last_error = e.to_string();
  return code(e.status);
}
template <class T>
int status_of(const uvcl_engine_t* h, const Result<T>& r) {
  return r.ok() ? 0 : fail(h, r.error());
}

// The engine of a handle, or why there is none (recorded in the handle).
uvcl::Engine* engine_of(const uvcl_engine_t* h, int* status) {
  if (h == nullptr) {
    *status = UVCL_EINVALID_ARGUMENT;
    return nullptr;
  }
  if (!h->cpp) {
    *status = fail(h, Error{Status::InvalidArgument, "the engine was not created (" + h->last_error + ")"});
    return nullptr;
  }
  return h->cpp.get();
}

#define UVCL_ENGINE(h)                             \
  int status_ = 0;                                 \
  uvcl::Engine* eng = engine_of((h), &status_);    \
  if (eng == nullptr) return status_

int invalid(const uvcl_engine_t* h, const std::string& what) {
  return fail(h, Error{Status::InvalidArgument, what});
}

// Marks a call that may run callbacks (a callback may destroy the handle).
class Depth {
 public:
  explicit Depth(uvcl_engine_t* h) : h_(h) { ++h_->depth; }
  ~Depth() {
    if (--h_->depth == 0 && h_->doomed) delete h_;
  }
  Depth(const Depth&) = delete;
  Depth& operator=(const Depth&) = delete;

 private:
  uvcl_engine_t* h_;
};

// C callbacks inside C++ ones. The lambdas capture two pointers: the
// std::function holds them without allocating.
const char* message_of(const Result<void>& r, std::string& text) {
  if (r.ok()) return nullptr;
  text = r.error().to_string();
  return text.c_str();
}
uvcl::DoneCallback done_cb(uvcl_done_cb fn, void* ud) {
  if (fn == nullptr) return {};
  return [fn, ud](const Result<void>& r) {
    std::string text;
    const char* m = message_of(r, text);
    fn(code(r.status()), m, ud);
  };
}

std::span<const std::byte> bytes_in(const void* p, std::size_t n) { return {static_cast<const std::byte*>(p), n}; }
std::span<std::byte> bytes_out(void* p, std::size_t n) { return {static_cast<std::byte*>(p), n}; }

// uvcl_launch_t -> the handle's reusable uvcl::Launch.
int to_launch(uvcl_engine_t* h, const uvcl_launch_t* in, uvcl::Launch*& out) {
  if (in == nullptr) return invalid(h, "launch: the launch descriptor is NULL");
  if (in->arg_count > 0 && in->args == nullptr) return invalid(h, "launch: args is NULL with arg_count > 0");
  if (in->dims > 3) return invalid(h, "launch: dims " + std::to_string(in->dims) + " is not 1..3");
  uvcl::Launch& l = h->launch;
  l.kernel = uvcl::Kernel{in->kernel};
  l.tag = in->tag;
  l.args.clear();
  for (std::size_t i = 0; i < in->arg_count; ++i) {
    const uvcl_arg_t& a = in->args[i];
    uvcl::KernelArg k;
    switch (a.kind) {
      case UVCL_ARG_BUFFER: k = uvcl::KernelArg::of(uvcl::Buffer{a.buffer}); break;
      case UVCL_ARG_LOCAL: k = uvcl::KernelArg::local(a.local_bytes); break;
      case UVCL_ARG_SCALAR: {
        if (a.scalar_type < UVCL_CHAR || a.scalar_type > UVCL_DOUBLE)
          return invalid(h, "launch: argument " + std::to_string(i) + " has an unknown scalar type " +
                                std::to_string(static_cast<int>(a.scalar_type)));
        uvcl::Scalar s;
        s.type = static_cast<uvcl::ScalarType>(a.scalar_type);
        std::memcpy(s.bytes.data(), a.scalar, sizeof a.scalar);
        k = uvcl::KernelArg::of(s);
        break;
      }
      default:
        return invalid(h, "launch: argument " + std::to_string(i) + " has an unknown kind " +
                              std::to_string(static_cast<int>(a.kind)));
    }
    l.args.push_back(k);
  }
  l.global.clear();
  l.local.clear();
  bool any_local = false;
  for (std::uint32_t d = 0; d < in->dims; ++d) {
    if (in->global_from_arg[d] > 0)
      l.global.push_back(uvcl::GlobalAxis::groups_in_arg(static_cast<int>(in->global_from_arg[d] - 1)));
    else
      l.global.emplace_back(in->global[d]);
    any_local = any_local || in->local[d] != 0;
  }
  if (any_local) l.local.assign(in->local, in->local + in->dims);
  out = &l;
  return 0;
}

}  // namespace

extern "C" {

const char* uvcl_err_name(int status) {
  if (status > 0 || status < UVCL_ECANCELLED) return "Unknown";
  // A view of a string literal: NUL-terminated.
  return uvcl::status_name(static_cast<Status>(-status)).data();
}

const char* uvcl_strerror(int status) {
  switch (status) {
    case UVCL_OK: return "success";
    case UVCL_EINITIALIZATION: return "an OpenCL context or queue could not be created";
    case UVCL_EDYLIB_NOT_FOUND: return "the OpenCL library could not be loaded";
    case UVCL_EDEVICE_ENUMERATION: return "OpenCL platforms or devices could not be listed";
    case UVCL_EDEVICE_QUERY: return "a device's properties could not be read";
    case UVCL_EMEMORY_ALLOCATION: return "device or host memory could not be allocated";
    case UVCL_EMEMORY_COPY_H2P: return "a transfer to the device failed";
    case UVCL_EMEMORY_COPY_P2H: return "a transfer from the device failed";
    case UVCL_EKERNEL_COMPILATION: return "a program did not build, or a kernel is missing";
    case UVCL_EKERNEL_LAUNCH: return "a kernel could not be launched";
    case UVCL_EKERNEL_SYNC: return "a command failed on the device";
    case UVCL_EINCORRECT_KERNEL_ARG: return "a kernel argument does not match its parameter";
    case UVCL_EINVALID_ARGUMENT: return "a bad argument at the API edge (unknown handle, bad size)";
    case UVCL_EINVALID_CONFIG: return "the configuration does not parse or validate";
    case UVCL_EINVALID_JOB: return "a job file does not parse or validate";
    case UVCL_EMISSING_SYMBOL: return "the OpenCL library lacks an entry point uvcl needs";
    case UVCL_EDEVICE_LOST: return "the device stopped working";
    case UVCL_EIO: return "a file could not be read or written";
    case UVCL_ECANCELLED: return "cancelled: the engine was closed or destroyed first";
    default: return "unknown uvcl status";
  }
}

const char* uvcl_version_string(void) { return UVCL_VERSION; }

// --- the engine ---------------------------------------------------------

int uvcl_engine_create(uvcl_engine_t** out, const char* config_json, struct uv_loop_s* loop) {
  if (out == nullptr) return UVCL_EINVALID_ARGUMENT;
  auto* engine = new (std::nothrow) uvcl_engine_s;
  *out = engine;
  if (engine == nullptr) return UVCL_EMEMORY_ALLOCATION;
  uvcl::Config config;
  if (config_json != nullptr) {
    auto parsed = uvcl::parse_config(config_json, "config_json");
    if (!parsed) return fail(engine, parsed.error());
    config = std::move(parsed.value());
  }
  auto made = uvcl::Engine::create(config, loop);
  if (!made) return fail(engine, made.error());
  engine->cpp = std::move(made.value());
  for (std::size_t i = 0; i < engine->cpp->device_count(); ++i) engine->devices.push_back(*engine->cpp->device(i));
  return 0;
}

void uvcl_engine_destroy(uvcl_engine_t* engine) {
  if (engine == nullptr) return;
  if (engine->depth > 0) {  // inside a callback of a call on this handle
    engine->cpp.reset();  // the C++ engine defers its own teardown likewise
    engine->doomed = true;
    return;
  }
  delete engine;
}

int uvcl_close(uvcl_engine_t* engine, uvcl_closed_cb on_closed, void* user_data) {
  UVCL_ENGINE(engine);
  std::function<void()> cb;
  if (on_closed != nullptr) cb = [on_closed, user_data] { on_closed(user_data); };
  return status_of(engine, eng->close(std::move(cb)));
}

const char* uvcl_engine_last_error(const uvcl_engine_t* engine) {
  if (engine == nullptr) return "InvalidArgument: the engine handle is NULL";
  return engine->last_error.c_str();
}

struct uv_loop_s* uvcl_engine_loop(const uvcl_engine_t* engine) {
  return engine != nullptr && engine->cpp ? engine->cpp->loop() : nullptr;
}

// --- devices ------------------------------------------------------------

size_t uvcl_device_count(const uvcl_engine_t* engine) {
  return engine != nullptr && engine->cpp ? engine->cpp->device_count() : 0;
}

int uvcl_device_info(const uvcl_engine_t* engine, size_t device, uvcl_device_info_t* out) {
  UVCL_ENGINE(engine);
  if (out == nullptr) return invalid(engine, "device_info: out is NULL");
  if (device >= eng->device_count())
    return invalid(engine, "device_info: device " + std::to_string(device) + " does not exist (" +
                          std::to_string(eng->device_count()) + " devices)");
  const uvcl::DeviceInfo& d = engine->devices[device];
  *out = uvcl_device_info_t{};
  out->index = d.index;
  out->platform_index = d.platform_index;
  out->platform_name = d.platform_name.c_str();
  out->platform_vendor = d.platform_vendor.c_str();
  out->platform_version = d.platform_version.c_str();
  out->name = d.name.c_str();
  out->vendor = d.vendor.c_str();
  out->driver_version = d.driver_version.c_str();
  out->device_version = d.device_version.c_str();
  out->opencl_c_version = d.opencl_c_version.c_str();
  out->type = static_cast<uvcl_device_type>(d.type);
  out->compute_units = d.compute_units;
  out->max_clock_mhz = d.max_clock_mhz;
  out->global_memory = d.global_memory;
  out->max_allocation = d.max_allocation;
  out->local_memory = d.local_memory;
  out->max_work_group_size = d.max_work_group_size;
  out->max_work_item_dims = d.max_work_item_dims;
  for (std::size_t i = 0; i < 3 && i < d.max_work_item_sizes.size(); ++i)
    out->max_work_item_sizes[i] = d.max_work_item_sizes[i];
  for (std::size_t i = 0; i < 3 && i < d.max_global_sizes.size(); ++i) out->max_global_sizes[i] = d.max_global_sizes[i];
  out->preferred_float_vector_width = d.preferred_float_vector_width;
  out->warp_size = d.warp_size;
  out->fp16 = d.fp16;
  out->fp64 = d.fp64;
  out->matrix_units = d.matrix_units;
  out->profiling_timer_resolution_ns = d.profiling_timer_resolution_ns;
  out->extensions = d.extensions.c_str();
  return 0;
}

int uvcl_device_lost(const uvcl_engine_t* engine, size_t device) {
  UVCL_ENGINE(engine);
  return eng->device_lost(device) ? 1 : 0;
}

// --- memory -------------------------------------------------------------

int uvcl_buffer_allocate(uvcl_engine_t* engine, size_t device, size_t bytes, uvcl_buffer_t* out) {
  UVCL_ENGINE(engine);
  if (out == nullptr) return invalid(engine, "allocate: out is NULL");
  auto b = eng->allocate(device, bytes);
  if (!b) return fail(engine, b.error());
  *out = b->id;
  return 0;
}

int uvcl_buffer_retain(uvcl_engine_t* engine, uvcl_buffer_t b) {
  UVCL_ENGINE(engine);
  return status_of(engine, eng->retain(uvcl::Buffer{b}));
}

int uvcl_buffer_release(uvcl_engine_t* engine, uvcl_buffer_t b) {
  UVCL_ENGINE(engine);
  return status_of(engine, eng->release(uvcl::Buffer{b}));
}

int uvcl_buffer_size(uvcl_engine_t* engine, uvcl_buffer_t b, size_t* out) {
  UVCL_ENGINE(engine);
  if (out == nullptr) return invalid(engine, "buffer_size: out is NULL");
  auto s = eng->buffer_size(uvcl::Buffer{b});
  if (!s) return fail(engine, s.error());
  *out = s.value();
  return 0;
}

uint64_t uvcl_free_bytes(const uvcl_engine_t* engine, size_t device) {
  return engine != nullptr && engine->cpp ? engine->cpp->free_bytes(device) : 0;
}

int uvcl_host_alloc(uvcl_engine_t* engine, size_t device, size_t bytes, uvcl_host_memory_t* out) {
  UVCL_ENGINE(engine);
  if (out == nullptr) return invalid(engine, "alloc_host: out is NULL");
  auto m = eng->alloc_host(device, bytes);
  if (!m) return fail(engine, m.error());
  out->id = m->id;
  out->data = m->bytes.data();
  out->bytes = m->bytes.size();
  return 0;
}

int uvcl_host_release(uvcl_engine_t* engine, const uvcl_host_memory_t* m) {
  UVCL_ENGINE(engine);
  if (m == nullptr) return invalid(engine, "release: the host memory is NULL");
  return status_of(engine, eng->release(uvcl::HostMemory{m->id, bytes_out(m->data, m->bytes)}));
}

// --- transfers ----------------------------------------------------------

int uvcl_write(uvcl_engine_t* engine, uvcl_buffer_t dst, size_t offset, const void* src, size_t bytes,
               uvcl_write_mode mode, uvcl_done_cb on_done, void* user_data) {
  UVCL_ENGINE(engine);
  if (src == nullptr && bytes > 0) return invalid(engine, "write: src is NULL");
  if (mode != UVCL_WRITE_COPY && mode != UVCL_WRITE_BORROW)
    return invalid(engine, "write: unknown mode " + std::to_string(static_cast<int>(mode)));
  return status_of(engine, eng->write(uvcl::Buffer{dst}, offset, bytes_in(src, bytes),
                                 mode == UVCL_WRITE_BORROW ? uvcl::WriteMode::Borrow : uvcl::WriteMode::Copy,
                                 done_cb(on_done, user_data)));
}

int uvcl_fill(uvcl_engine_t* engine, uvcl_buffer_t dst, const void* pattern, size_t pattern_bytes, size_t offset,
              size_t bytes, uvcl_done_cb on_done, void* user_data) {
  UVCL_ENGINE(engine);
  if (pattern == nullptr && pattern_bytes > 0) return invalid(engine, "fill: pattern is NULL");
  return status_of(engine, eng->fill(uvcl::Buffer{dst}, bytes_in(pattern, pattern_bytes), offset, bytes,
                                done_cb(on_done, user_data)));
}

int uvcl_read(uvcl_engine_t* engine, uvcl_buffer_t src, size_t offset, size_t bytes, uvcl_read_cb on_data,
              void* user_data) {
  UVCL_ENGINE(engine);
  uvcl::ReadCallback cb;
  if (on_data != nullptr)
    cb = [on_data, user_data](Result<std::span<const std::byte>> r) {
      if (r) {
        on_data(0, nullptr, r->data(), r->size(), user_data);
        return;
      }
      const std::string text = r.error().to_string();
      on_data(code(r.status()), text.c_str(), nullptr, 0, user_data);
    };
  return status_of(engine, eng->read(uvcl::Buffer{src}, offset, bytes, std::move(cb)));
}

int uvcl_read_into(uvcl_engine_t* engine, uvcl_buffer_t src, size_t offset, void* dst, size_t bytes,
                   uvcl_done_cb on_done, void* user_data) {
  UVCL_ENGINE(engine);
  if (dst == nullptr && bytes > 0) return invalid(engine, "read_into: dst is NULL");
  return status_of(engine,
                   eng->read_into(uvcl::Buffer{src}, offset, bytes_out(dst, bytes), done_cb(on_done, user_data)));
}

int uvcl_copy(uvcl_engine_t* engine, uvcl_buffer_t src, size_t src_offset, uvcl_buffer_t dst, size_t dst_offset,
              size_t bytes, uvcl_done_cb on_done, void* user_data) {
  UVCL_ENGINE(engine);
  return status_of(engine, eng->copy(uvcl::Buffer{src}, src_offset, uvcl::Buffer{dst}, dst_offset, bytes,
                                done_cb(on_done, user_data)));
}

// --- programs and kernels -------------------------------------------------

int uvcl_compile(uvcl_engine_t* engine, size_t device, const char* source, const char* options,
                 uvcl_build_options_mode mode, uvcl_done_cb on_built, void* user_data, uvcl_program_t* out) {
  UVCL_ENGINE(engine);
  if (source == nullptr) return invalid(engine, "compile: source is NULL");
  if (out == nullptr) return invalid(engine, "compile: out is NULL");
  auto p = eng->compile(device, source, options != nullptr ? options : "", done_cb(on_built, user_data),
                        mode == UVCL_BUILD_OPTIONS_REPLACE ? uvcl::BuildOptionsMode::Replace
                                                           : uvcl::BuildOptionsMode::Add);
  if (!p) return fail(engine, p.error());
  *out = p->id;
  return 0;
}

int uvcl_compile_sync(uvcl_engine_t* engine, size_t device, const char* source, const char* options,
                      uvcl_build_options_mode mode, uvcl_program_t* out) {
  UVCL_ENGINE(engine);
  if (source == nullptr) return invalid(engine, "compile_sync: source is NULL");
  if (out == nullptr) return invalid(engine, "compile_sync: out is NULL");
  Depth depth(engine);
  auto p = eng->compile_sync(device, source, options != nullptr ? options : "",
                             mode == UVCL_BUILD_OPTIONS_REPLACE ? uvcl::BuildOptionsMode::Replace
                                                                : uvcl::BuildOptionsMode::Add);
  if (!p) return fail(engine, p.error());
  *out = p->id;
  return 0;
}

int uvcl_program_release(uvcl_engine_t* engine, uvcl_program_t p) {
  UVCL_ENGINE(engine);
  return status_of(engine, eng->release(uvcl::Program{p}));
}

int uvcl_kernel_create(uvcl_engine_t* engine, uvcl_program_t program, const char* entry,
                       const uvcl_param_access* declared, size_t declared_count, uvcl_kernel_t* out) {
  UVCL_ENGINE(engine);
  if (entry == nullptr) return invalid(engine, "kernel: entry is NULL");
  if (out == nullptr) return invalid(engine, "kernel: out is NULL");
  if (declared == nullptr && declared_count > 0)
    return invalid(engine, "kernel: declared is NULL with declared_count > 0");
  std::vector<uvcl::ParamAccess> access;
  for (std::size_t i = 0; i < declared_count; ++i) {
    if (declared[i] < UVCL_ACCESS_READ_ONLY || declared[i] > UVCL_ACCESS_WRITE_ONLY)
      return invalid(engine, "kernel: declared access " + std::to_string(i) + " is unknown (" +
                            std::to_string(static_cast<int>(declared[i])) + ")");
    access.push_back(static_cast<uvcl::ParamAccess>(declared[i]));
  }
  auto k = eng->kernel(uvcl::Program{program}, entry, std::move(access));
  if (!k) return fail(engine, k.error());
  *out = k->id;
  return 0;
}

int uvcl_kernel_release(uvcl_engine_t* engine, uvcl_kernel_t k) {
  UVCL_ENGINE(engine);
  return status_of(engine, eng->release(uvcl::Kernel{k}));
}

int uvcl_kernel_params(uvcl_engine_t* engine, uvcl_kernel_t k, uvcl_kernel_param_t* out, size_t capacity,
                       size_t* count) {
  UVCL_ENGINE(engine);
  if (out == nullptr && capacity > 0) return invalid(engine, "kernel_params: out is NULL with capacity > 0");
  auto params = eng->kernel_params(uvcl::Kernel{k});
  if (!params) return fail(engine, params.error());
  engine->params = std::move(params.value());
  for (std::size_t i = 0; i < capacity && i < engine->params.size(); ++i) {
    const uvcl::KernelParam& p = engine->params[i];
    out[i] = uvcl_kernel_param_t{p.name.c_str(), p.type_name.c_str(), static_cast<uvcl_param_access>(p.access),
                                 p.scalar_size, p.unsupported, p.writes_each_item ? 1 : 0};
  }
  if (count != nullptr) *count = engine->params.size();
  return 0;
}

// --- launches -----------------------------------------------------------

int uvcl_launch(uvcl_engine_t* engine, const uvcl_launch_t* launch, uvcl_done_cb on_done, void* user_data) {
  UVCL_ENGINE(engine);
  uvcl::Launch* l = nullptr;
  if (int s = to_launch(engine, launch, l); s != 0) return s;
  // uvcl_done_cb has the C++ overload's shape: passed as is, no allocation.
  return status_of(engine, eng->launch(*l, on_done, user_data));
}

int uvcl_check_launch(uvcl_engine_t* engine, const uvcl_launch_t* launch) {
  UVCL_ENGINE(engine);
  uvcl::Launch* l = nullptr;
  if (int s = to_launch(engine, launch, l); s != 0) return s;
  return status_of(engine, eng->check_launch(*l));
}

int uvcl_choose_device(uvcl_engine_t* engine, const uvcl_device_option_t* options, size_t count, size_t* chosen) {
  UVCL_ENGINE(engine);
  if (chosen == nullptr) return invalid(engine, "choose_device: chosen is NULL");
  if (options == nullptr && count > 0) return invalid(engine, "choose_device: options is NULL");
  std::vector<uvcl::DeviceOption> list(count);
  for (size_t i = 0; i < count; ++i) {
    const uvcl_device_option_t& o = options[i];
    if (o.inputs == nullptr && o.input_count > 0)
      return invalid(engine, "choose_device: options[" + std::to_string(i) + "].inputs is NULL");
    list[i].kernel = uvcl::Kernel{o.kernel};
    list[i].work_items = o.work_items;
    for (size_t j = 0; j < o.input_count; ++j) list[i].inputs.push_back({o.inputs[j].from_device, o.inputs[j].bytes});
  }
  auto r = eng->choose_device(list);
  if (r) *chosen = *r;
  return status_of(engine, r);
}

int uvcl_timed_launch(uvcl_engine_t* engine, const uvcl_launch_t* launch, uvcl_timing_cb on_timed, void* user_data) {
  UVCL_ENGINE(engine);
  uvcl::Launch* l = nullptr;
  if (int s = to_launch(engine, launch, l); s != 0) return s;
  uvcl::TimingCallback cb;
  if (on_timed != nullptr)
    cb = [on_timed, user_data](Result<uvcl::Timing> r) {
      if (r) {
        on_timed(0, nullptr, r->device_ns, r->wall_ns, user_data);
        return;
      }
      const std::string text = r.error().to_string();
      on_timed(code(r.status()), text.c_str(), 0, 0, user_data);
    };
  return status_of(engine, eng->timed_launch(*l, std::move(cb)));
}

uint16_t uvcl_float_to_half(float f) { return uvcl::float_to_half(f); }
float uvcl_half_to_float(uint16_t bits) { return uvcl::half_to_float(bits); }

// --- sync points and error scopes ------------------------------------------

int uvcl_drain(uvcl_engine_t* engine, uvcl_done_cb on_done, void* user_data) {
  UVCL_ENGINE(engine);
  Depth depth(engine);  // on a closed engine the callback runs at once
  eng->drain(done_cb(on_done, user_data));
  return 0;
}

int uvcl_push_error_scope(uvcl_engine_t* engine) {
  UVCL_ENGINE(engine);
  eng->push_error_scope();
  return 0;
}

int uvcl_pop_error_scope(uvcl_engine_t* engine, uvcl_done_cb on_done, void* user_data) {
  UVCL_ENGINE(engine);
  return status_of(engine, eng->pop_error_scope(done_cb(on_done, user_data)));
}

// --- driving the loop ---------------------------------------------------

int uvcl_poll(uvcl_engine_t* engine) {
  UVCL_ENGINE(engine);
  Depth depth(engine);
  eng->poll();
  return 0;
}

int uvcl_run_until(uvcl_engine_t* engine, uvcl_done_fn done, void* user_data) {
  UVCL_ENGINE(engine);
  if (done == nullptr) return invalid(engine, "run_until: done is NULL");
  Depth depth(engine);
  return status_of(engine, eng->run_until([done, user_data] { return done(user_data) != 0; }));
}

int uvcl_finish(uvcl_engine_t* engine) {
  UVCL_ENGINE(engine);
  Depth depth(engine);
  return status_of(engine, eng->finish());
}

int uvcl_read_sync(uvcl_engine_t* engine, uvcl_buffer_t src, size_t offset, void* dst, size_t bytes) {
  UVCL_ENGINE(engine);
  if (dst == nullptr && bytes > 0) return invalid(engine, "read_sync: dst is NULL");
  Depth depth(engine);
  auto data = eng->read_sync(uvcl::Buffer{src}, offset, bytes);
  if (!data) return fail(engine, data.error());
  if (!data->empty()) std::memcpy(dst, data->data(), data->size());
  return 0;
}

// --- observing ----------------------------------------------------------

int uvcl_set_error_listener(uvcl_engine_t* engine, uvcl_done_cb listener, void* user_data) {
  UVCL_ENGINE(engine);
  uvcl::ErrorListener l;
  if (listener != nullptr)
    l = [listener, user_data](const Error& e) {
      const std::string text = e.to_string();
      listener(code(e.status), text.c_str(), user_data);
    };
  eng->set_error_listener(std::move(l));
  return 0;
}

int uvcl_set_tracing(uvcl_engine_t* engine, int on) {
  UVCL_ENGINE(engine);
  eng->set_tracing(on != 0);
  return 0;
}

const char* uvcl_trace_json(uvcl_engine_t* engine) {
  int status = 0;
  uvcl::Engine* eng = engine_of(engine, &status);
  if (eng == nullptr) return nullptr;
  engine->trace = eng->trace_json();
  return engine->trace.c_str();
}

int uvcl_set_schedule_recorder(uvcl_engine_t* engine, uvcl_schedule_cb recorder, void* user_data) {
  UVCL_ENGINE(engine);
  std::function<void(const uvcl::ScheduleEntry&)> r;
  if (recorder != nullptr)
    r = [recorder, user_data](const uvcl::ScheduleEntry& e) {
      std::vector<uvcl_buffer_t> reads, writes;
      for (uvcl::Buffer b : e.reads) reads.push_back(b.id);
      for (uvcl::Buffer b : e.writes) writes.push_back(b.id);
      const uvcl_schedule_entry_t c{e.id, e.op, e.tag, e.device, e.queue,
                                    reads.data(), reads.size(), writes.data(), writes.size(),
                                    e.waits.data(), e.waits.size(), e.completed.data(), e.completed.size()};
      recorder(&c, user_data);
    };
  eng->set_schedule_recorder(std::move(r));
  return 0;
}

int uvcl_stats(const uvcl_engine_t* engine, uvcl_stats_t* out, size_t out_size) {
  UVCL_ENGINE(engine);
  if (out == nullptr) return invalid(engine, "stats: out is NULL");
  if (out_size == 0 || out_size % sizeof(std::uint64_t) != 0)
    return invalid(engine, "stats: out_size (" + std::to_string(out_size) +
                               ") is not a non-zero multiple of 8 (sizeof(uvcl_stats_t) is " +
                               std::to_string(sizeof(uvcl_stats_t)) + ")");
  const uvcl::EngineStats s = eng->stats();
  const uvcl_stats_t all{s.launches, s.writes, s.reads, s.copies,
                      s.bytes_to_device, s.bytes_from_device, s.bytes_copied,
                      s.submitted, s.failed, s.flushes, s.cross_queue_waits,
                      s.status_queries, s.events, s.fences,
                      s.in_flight, s.pending, s.unfinished,
                      s.live_buffers, s.host_memory_bytes, s.staging_bytes,
                      s.program_memo_hits, s.program_memo_misses,
                      s.process_builds, s.inline_builds, s.compiler_starts, s.compiler_failures, s.compiler_fallbacks,
                      s.callbacks, s.spin_ns, s.snapshots, s.polls};
  const std::size_t known = std::min(out_size, sizeof all);
  std::memcpy(out, &all, known);
  std::memset(reinterpret_cast<unsigned char*>(out) + known, 0, out_size - known);
  return 0;
}

}  // extern "C"
