// clshim.cpp — a counting, fault-injecting OpenCL library for uvcl's tests.
//
// Built as the shared library uvcl_clshim. It exports exactly the OpenCL
// entry points of UVCL_CL_ENTRY_POINTS (src/cl/api.hpp) with their Khronos
// signatures, dlopens the real ICD loader ($UVCL_SHIM_REAL, default
// libOpenCL.so.1) and forwards every call. The engine loads it through
// Config::library.
//
// Counting: every context, queue, mem object, program, kernel and event
// handed to the caller (events through out-params and user events included)
// is tracked per handle with its reference count; it is live while the count
// is above zero. A release of a handle that is not live, or a use of one in
// the calls checked below, is an anomaly (counted, logged, not forwarded: a
// double release would otherwise crash the real driver).
//
// Faults (environment variable UVCL_SHIM_FAULT at load time, a comma or
// semicolon separated list, and uvcl_shim_set_fault() at run time):
//   "clFoo:N:STATUS"        the N-th call of clFoo from now fails with STATUS
//                           (returned, or through errcode_ret with a null
//                           object); the real function is not called.
//   "event:clFoo:N:STATUS"  the N-th call of clFoo from now that returns an
//                           event runs for real, but the event the caller
//                           gets is a user event of the same context that
//                           completes with STATUS once the real one has
//                           completed and the caller asks (a status read,
//                           clWaitForEvents, clFinish) — on the caller's
//                           thread, not from a driver thread: PoCL 3.1
//                           mishandles a user event failed from another
//                           thread while commands that wait on it are being
//                           enqueued (such a command can stay CL_QUEUED for
//                           good, hanging clFinish, or trip the assertion in
//                           pocl_update_event_finished). UVCL_SHIM_ASYNC_EVENTS
//                           set at load time completes them from the driver's
//                           callback instead, to study that race.
//   "lost:clFoo:N[:STATUS]" from the N-th call of clFoo on, every entry point
//                           fails with STATUS (default CL_DEVICE_NOT_AVAILABLE)
//                           — a lost device. Releases (clRelease*) and
//                           clRetainEvent still work, so cleanup can finish.
// STATUS is a Khronos error name (CL_OUT_OF_RESOURCES, ...) or a number.
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#ifndef CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#endif
#include <CL/cl.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cl/api.hpp"  // UVCL_CL_ENTRY_POINTS: the one list of entry points

extern "C" {
int uvcl_shim_live(const char* kind);
void uvcl_shim_reset_faults();
void uvcl_shim_set_fault(const char* spec);
long uvcl_shim_calls(const char* entry_point);
void uvcl_shim_mark_order();
long uvcl_shim_nth_call_since_mark(const char* entry_point, int n);
int uvcl_shim_faults_fired();
int uvcl_shim_faults_armed();
int uvcl_shim_lost();
int uvcl_shim_anomalies();
const char* uvcl_shim_anomaly_log();
int uvcl_shim_rescue_user_events(int status);
}

namespace {

// --- entry points --------------------------------------------------------

enum class Ep : int {
#define UVCL_SHIM_ENUM(name) name,
  UVCL_CL_ENTRY_POINTS(UVCL_SHIM_ENUM)
#undef UVCL_SHIM_ENUM
      kCount
};
constexpr std::size_t kEpCount = static_cast<std::size_t>(Ep::kCount);

constexpr std::array<const char*, kEpCount> kEpNames = {
#define UVCL_SHIM_NAME(name) #name,
    UVCL_CL_ENTRY_POINTS(UVCL_SHIM_NAME)
#undef UVCL_SHIM_NAME
};

int ep_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kEpCount; ++i)
    if (name == kEpNames[i]) return static_cast<int>(i);
  return -1;
}

// Calls that keep working on a lost device: cleanup must be able to finish.
bool survives_loss(Ep ep) {
  switch (ep) {
    case Ep::clReleaseContext:
    case Ep::clReleaseCommandQueue:
    case Ep::clReleaseMemObject:
    case Ep::clReleaseProgram:
    case Ep::clReleaseKernel:
    case Ep::clReleaseEvent:
    case Ep::clRetainEvent: return true;
    default: return false;
  }
}

// The real library's functions, resolved by name.
struct Real {
#define UVCL_SHIM_REAL(name) decltype(&::name) name = nullptr;
  UVCL_CL_ENTRY_POINTS(UVCL_SHIM_REAL)
#undef UVCL_SHIM_REAL
  bool ok = false;
};

// Taking the address of every export makes the link (-Wl,--no-undefined)
// fail if one of the entry points of the list is not defined here.
struct Exports {
#define UVCL_SHIM_EXPORT(name) decltype(&::name) name = &::name;
  UVCL_CL_ENTRY_POINTS(UVCL_SHIM_EXPORT)
#undef UVCL_SHIM_EXPORT
};
[[maybe_unused]] const Exports kExports{};

// --- status names ----------------------------------------------------------

#define UVCL_SHIM_STATUSES(X)                                                                            \
  X(CL_SUCCESS) X(CL_DEVICE_NOT_FOUND) X(CL_DEVICE_NOT_AVAILABLE) X(CL_COMPILER_NOT_AVAILABLE)             \
  X(CL_MEM_OBJECT_ALLOCATION_FAILURE) X(CL_OUT_OF_RESOURCES) X(CL_OUT_OF_HOST_MEMORY)                      \
  X(CL_PROFILING_INFO_NOT_AVAILABLE) X(CL_MEM_COPY_OVERLAP) X(CL_IMAGE_FORMAT_MISMATCH)                     \
  X(CL_IMAGE_FORMAT_NOT_SUPPORTED) X(CL_BUILD_PROGRAM_FAILURE) X(CL_MAP_FAILURE)                           \
  X(CL_MISALIGNED_SUB_BUFFER_OFFSET) X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)                       \
  X(CL_COMPILE_PROGRAM_FAILURE) X(CL_LINKER_NOT_AVAILABLE) X(CL_LINK_PROGRAM_FAILURE)                      \
  X(CL_DEVICE_PARTITION_FAILED) X(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) X(CL_INVALID_VALUE)                    \
  X(CL_INVALID_DEVICE_TYPE) X(CL_INVALID_PLATFORM) X(CL_INVALID_DEVICE) X(CL_INVALID_CONTEXT)              \
  X(CL_INVALID_QUEUE_PROPERTIES) X(CL_INVALID_COMMAND_QUEUE) X(CL_INVALID_HOST_PTR)                        \
  X(CL_INVALID_MEM_OBJECT) X(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) X(CL_INVALID_IMAGE_SIZE)                  \
  X(CL_INVALID_SAMPLER) X(CL_INVALID_BINARY) X(CL_INVALID_BUILD_OPTIONS) X(CL_INVALID_PROGRAM)              \
  X(CL_INVALID_PROGRAM_EXECUTABLE) X(CL_INVALID_KERNEL_NAME) X(CL_INVALID_KERNEL_DEFINITION)               \
  X(CL_INVALID_KERNEL) X(CL_INVALID_ARG_INDEX) X(CL_INVALID_ARG_VALUE) X(CL_INVALID_ARG_SIZE)               \
  X(CL_INVALID_KERNEL_ARGS) X(CL_INVALID_WORK_DIMENSION) X(CL_INVALID_WORK_GROUP_SIZE)                     \
  X(CL_INVALID_WORK_ITEM_SIZE) X(CL_INVALID_GLOBAL_OFFSET) X(CL_INVALID_EVENT_WAIT_LIST)                   \
  X(CL_INVALID_EVENT) X(CL_INVALID_OPERATION) X(CL_INVALID_GL_OBJECT) X(CL_INVALID_BUFFER_SIZE)            \
  X(CL_INVALID_MIP_LEVEL) X(CL_INVALID_GLOBAL_WORK_SIZE) X(CL_INVALID_PROPERTY)                            \
  X(CL_INVALID_IMAGE_DESCRIPTOR) X(CL_INVALID_COMPILER_OPTIONS) X(CL_INVALID_LINKER_OPTIONS)               \
  X(CL_INVALID_DEVICE_PARTITION_COUNT) X(CL_INVALID_PIPE_SIZE) X(CL_INVALID_DEVICE_QUEUE)                  \
  X(CL_INVALID_SPEC_ID) X(CL_MAX_SIZE_RESTRICTION_EXCEEDED)

bool status_from_name(std::string_view s, cl_int& out) {
#define UVCL_SHIM_STATUS_CASE(name) \
  if (s == #name) {                 \
    out = name;                     \
    return true;                    \
  }
  UVCL_SHIM_STATUSES(UVCL_SHIM_STATUS_CASE)
#undef UVCL_SHIM_STATUS_CASE
  if (s.empty()) return false;
  char* end = nullptr;
  const std::string copy(s);
  const long v = std::strtol(copy.c_str(), &end, 10);
  if (end == nullptr || *end != '\0' || v > 0 || v < -100000) return false;
  out = static_cast<cl_int>(v);
  return true;
}

// --- state -----------------------------------------------------------------

enum class Kind : int { Context, Queue, Mem, Program, Kernel, Event, kCount };
constexpr const char* kKindNames[] = {"context", "queue", "mem", "program", "kernel", "event"};

struct Obj {
  Kind kind = Kind::Event;
  long refs = 0;
};

enum class FaultType { Return, Event, Lost };

struct Fault {
  FaultType type = FaultType::Return;
  Ep ep = Ep::kCount;
  long remaining = 0;
  cl_int status = CL_OUT_OF_RESOURCES;
};

// The event the caller got for an "event:" fault: a user event that
// completes with `status` once the real command's event has completed.
struct Wrapper {
  std::uint64_t id = 0;
  cl_event user = nullptr;  // what the caller holds
  cl_event real = nullptr;  // the real command's event, owned here
  cl_int status = CL_OUT_OF_RESOURCES;
  bool completed = false;        // user event status set
  bool callback_done = false;    // the real event's callback has run
  bool caller_released = false;  // the caller's last reference is gone
};

struct State {
  std::mutex mutex;
  Real real;
  std::array<long, kEpCount> calls{};
  // Call order: every call gets the next number; per entry point, the
  // numbers of its first kOrderKept calls since uvcl_shim_mark_order.
  static constexpr std::size_t kOrderKept = 64;
  long order = 0;
  std::array<std::vector<long>, kEpCount> since_mark;
  std::unordered_map<void*, Obj> objects;
  std::vector<Fault> faults;
  int fired = 0;
  bool lost = false;
  cl_int lost_status = CL_DEVICE_NOT_AVAILABLE;
  std::unordered_map<std::uint64_t, Wrapper> wrappers;  // by id
  std::unordered_map<cl_event, std::uint64_t> wrapper_of;  // user event -> id
  std::vector<cl_event> graveyard;  // real events to release outside callbacks
  std::uint64_t next_wrapper = 1;
  // The caller's user events whose status was never set, and those of them
  // the caller released already (their release is held back so that
  // uvcl_shim_rescue_user_events can still complete them: commands waiting
  // on an unset user event would otherwise block a clFinish forever).
  std::vector<cl_event> open_user_events;
  std::vector<cl_event> released_open_user_events;
  int anomalies = 0;
  std::string anomaly_log;
};

bool parse_fault_locked(State& s, std::string_view spec);

State& state() {
  // Never destroyed: driver threads may call back while the process exits.
  static State* s = [] {
    auto* st = new State;
    const char* path = std::getenv("UVCL_SHIM_REAL");
    if (path == nullptr || *path == '\0') path = "libOpenCL.so.1";
    void* h = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* why = ::dlerror();
      std::fprintf(stderr, "uvcl_clshim: cannot open the real OpenCL library %s: %s\n", path, why ? why : "?");
    } else {
      bool ok = true;
#define UVCL_SHIM_RESOLVE(name)                                                               \
  {                                                                                           \
    void* sym = ::dlsym(h, #name);                                                            \
    if (sym == nullptr) {                                                                     \
      std::fprintf(stderr, "uvcl_clshim: %s lacks " #name "\n", path);                        \
      ok = false;                                                                             \
    }                                                                                         \
    static_assert(sizeof(st->real.name) == sizeof(sym));                                      \
    std::memcpy(&st->real.name, &sym, sizeof sym);                                            \
  }
      UVCL_CL_ENTRY_POINTS(UVCL_SHIM_RESOLVE)
#undef UVCL_SHIM_RESOLVE
      st->real.ok = ok;
    }
    if (const char* env = std::getenv("UVCL_SHIM_FAULT"); env != nullptr && *env != '\0') {
      std::string_view all(env);
      while (!all.empty()) {
        const std::size_t cut = all.find_first_of(",;");
        const std::string_view one = all.substr(0, cut);
        if (!one.empty() && !parse_fault_locked(*st, one))
          std::fprintf(stderr, "uvcl_clshim: ignoring bad fault spec \"%.*s\" in UVCL_SHIM_FAULT\n",
                       static_cast<int>(one.size()), one.data());
        if (cut == std::string_view::npos) break;
        all.remove_prefix(cut + 1);
      }
    }
    return st;
  }();
  return *s;
}

const Real& real() { return state().real; }

bool parse_fault_locked(State& s, std::string_view spec) {
  std::vector<std::string_view> parts;
  while (true) {
    const std::size_t cut = spec.find(':');
    parts.push_back(spec.substr(0, cut));
    if (cut == std::string_view::npos) break;
    spec.remove_prefix(cut + 1);
  }
  Fault f;
  std::size_t i = 0;
  if (parts[0] == "event") {
    f.type = FaultType::Event;
    ++i;
  } else if (parts[0] == "lost") {
    f.type = FaultType::Lost;
    f.status = CL_DEVICE_NOT_AVAILABLE;
    ++i;
  }
  const std::size_t rest = parts.size() - i;
  const bool status_optional = f.type == FaultType::Lost;
  if (rest != 3 && !(status_optional && rest == 2)) return false;
  const int ep = ep_from_name(parts[i]);
  if (ep < 0) return false;
  f.ep = static_cast<Ep>(ep);
  const std::string n(parts[i + 1]);
  char* end = nullptr;
  f.remaining = std::strtol(n.c_str(), &end, 10);
  if (n.empty() || *end != '\0' || f.remaining < 1) return false;
  if (rest == 3 && !status_from_name(parts[i + 2], f.status)) return false;
  if (f.status == CL_SUCCESS) return false;
  if (f.type == FaultType::Event && f.status > 0) return false;
  s.faults.push_back(f);
  return true;
}

void anomaly_locked(State& s, const std::string& what) {
  ++s.anomalies;
  if (s.anomaly_log.size() < 4000) s.anomaly_log += what + "\n";
  std::fprintf(stderr, "uvcl_clshim: anomaly: %s\n", what.c_str());
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// What one call of an entry point is allowed to do.
struct Gate {
  bool fail = false;
  cl_int status = CL_SUCCESS;
  bool wrap_event = false;
  cl_int event_status = CL_SUCCESS;
};

// Counts the call and applies the armed faults. `has_event`: the call
// returns an event to the caller (only those count for "event:" faults).
Gate enter(Ep ep, bool has_event = false) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  Gate g;
  const std::size_t i_ep = static_cast<std::size_t>(ep);
  ++s.calls[i_ep];
  ++s.order;
  if (s.since_mark[i_ep].size() < State::kOrderKept) s.since_mark[i_ep].push_back(s.order);
  if (!s.real.ok) {
    g.fail = true;
    g.status = ep == Ep::clGetPlatformIDs ? -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ : CL_INVALID_OPERATION;
    return g;
  }
  for (std::size_t i = 0; i < s.faults.size();) {
    Fault& f = s.faults[i];
    if (f.ep != ep || (f.type == FaultType::Event && !has_event) || --f.remaining > 0) {
      ++i;
      continue;
    }
    ++s.fired;
    switch (f.type) {
      case FaultType::Return:
        g.fail = true;
        g.status = f.status;
        break;
      case FaultType::Event:
        g.wrap_event = true;
        g.event_status = f.status;
        break;
      case FaultType::Lost:
        s.lost = true;
        s.lost_status = f.status;
        break;
    }
    s.faults.erase(s.faults.begin() + static_cast<std::ptrdiff_t>(i));
  }
  if (s.lost && !survives_loss(ep)) {
    g.fail = true;
    g.status = s.lost_status;
    g.wrap_event = false;
  }
  return g;
}

void track(void* h, Kind k) {
  if (h == nullptr) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.objects[h] = Obj{k, 1};
}

// True if `h` is a live handle of kind `k`; logs an anomaly otherwise.
bool check_live(const void* h, Kind k, const char* call) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.objects.find(const_cast<void*>(h));
  if (it != s.objects.end() && it->second.kind == k && it->second.refs > 0) return true;
  anomaly_locked(s, std::string(call) + ": " + kKindNames[static_cast<int>(k)] + " " + hex(h) +
                        (it == s.objects.end() ? " is not live (released or never created)" : " has the wrong kind"));
  return false;
}

bool check_wait_list(cl_uint n, const cl_event* list, const char* call) {
  for (cl_uint i = 0; i < n && list != nullptr; ++i)
    if (!check_live(list[i], Kind::Event, call)) return false;
  return true;
}

// Drops one reference. Returns false (and logs) for a handle that is not live:
// the release is then not forwarded.
bool untrack(void* h, Kind k, const char* call, bool* now_dead = nullptr) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.objects.find(h);
  if (it == s.objects.end() || it->second.kind != k || it->second.refs <= 0) {
    anomaly_locked(s, std::string(call) + ": releasing " + kKindNames[static_cast<int>(k)] + " " + hex(h) +
                          " that is not live (double release?)");
    return false;
  }
  if (--it->second.refs == 0) {
    s.objects.erase(it);
    if (now_dead) *now_dead = true;
  }
  return true;
}

// --- event wrappers ("event:" faults) ----------------------------------------

void sweep_graveyard() {
  State& s = state();
  std::vector<cl_event> dead;
  {
    std::lock_guard lock(s.mutex);
    dead.swap(s.graveyard);
  }
  for (cl_event e : dead) s.real.clReleaseEvent(e);
}

// Sets the user event's status once (from a status query or clFinish, or
// with UVCL_SHIM_ASYNC_EVENTS from the callback, whichever comes first).
void complete_wrapper(std::uint64_t id) {
  State& s = state();
  cl_event user = nullptr;
  cl_int status = CL_SUCCESS;
  {
    std::lock_guard lock(s.mutex);
    auto it = s.wrappers.find(id);
    if (it == s.wrappers.end() || it->second.completed) return;
    it->second.completed = true;
    user = it->second.user;
    status = it->second.status;
  }
  s.real.clSetUserEventStatus(user, status);
  s.real.clReleaseEvent(user);  // the reference held for completion
}

// Completes the wrapper if its real event has completed.
void poll_wrapper(std::uint64_t id) {
  State& s = state();
  cl_event real_ev = nullptr;
  {
    std::lock_guard lock(s.mutex);
    auto it = s.wrappers.find(id);
    if (it == s.wrappers.end() || it->second.completed) return;
    real_ev = it->second.real;
  }
  cl_int st = CL_QUEUED;
  if (s.real.clGetEventInfo(real_ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, nullptr) != CL_SUCCESS ||
      st <= CL_COMPLETE)
    complete_wrapper(id);
}

void CL_CALLBACK on_real_done(cl_event, cl_int, void* token) {
  const auto id = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(token));
  static const bool from_driver_thread = std::getenv("UVCL_SHIM_ASYNC_EVENTS") != nullptr;
  if (from_driver_thread) complete_wrapper(id);
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.wrappers.find(id);
  if (it == s.wrappers.end()) return;
  it->second.callback_done = true;
  if (it->second.caller_released) {
    s.graveyard.push_back(it->second.real);
    s.wrappers.erase(it);
  }
}

// Replaces a real command's event by a wrapper user event.
cl_event wrap_event(cl_event real_ev, cl_int status) {
  State& s = state();
  cl_context ctx = nullptr;
  cl_int rc = s.real.clGetEventInfo(real_ev, CL_EVENT_CONTEXT, sizeof ctx, &ctx, nullptr);
  cl_event user = rc == CL_SUCCESS ? s.real.clCreateUserEvent(ctx, &rc) : nullptr;
  if (rc != CL_SUCCESS || user == nullptr) {
    std::fprintf(stderr, "uvcl_clshim: cannot wrap an event (%d); the fault is not applied\n", rc);
    return real_ev;
  }
  s.real.clRetainEvent(user);  // held until the status is set
  std::uint64_t id = 0;
  {
    std::lock_guard lock(s.mutex);
    id = s.next_wrapper++;
    Wrapper w;
    w.id = id;
    w.user = user;
    w.real = real_ev;
    w.status = status;
    s.wrappers.emplace(id, w);
    s.wrapper_of[user] = id;
  }
  // Unlocked: the callback may run at once on this thread.
  if (s.real.clSetEventCallback(real_ev, CL_COMPLETE, on_real_done,
                                reinterpret_cast<void*>(static_cast<std::uintptr_t>(id))) != CL_SUCCESS)
    poll_wrapper(id);
  return user;
}

// The wrapper id of a caller-visible event, 0 if it is a plain event.
std::uint64_t wrapper_id(cl_event e) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.wrapper_of.find(e);
  return it == s.wrapper_of.end() ? 0 : it->second;
}

cl_event real_of(std::uint64_t id) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.wrappers.find(id);
  return it == s.wrappers.end() ? nullptr : it->second.real;
}

// An enqueue's event out-parameter: counts it, or wraps it for a fault.
void returned_event(cl_event* event, const Gate& g) {
  if (event == nullptr || *event == nullptr) return;
  if (g.wrap_event) *event = wrap_event(*event, g.event_status);
  track(*event, Kind::Event);
}

template <class T>
T* fail_object(cl_int* errcode_ret, cl_int status) {
  if (errcode_ret) *errcode_ret = status;
  return nullptr;
}

// Helpers of the exported functions below, kept out of the default-visibility
// block so that no template instantiation of theirs is exported.
bool retain_tracked(void* h, Kind k, const char* call) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.objects.find(h);
  if (it == s.objects.end() || it->second.kind != k || it->second.refs <= 0) {
    anomaly_locked(s, std::string(call) + ": " + hex(h) + " is not live");
    return false;
  }
  ++it->second.refs;
  return true;
}

int live_count(const char* kind) {
  sweep_graveyard();
  State& s = state();
  std::lock_guard lock(s.mutex);
  const std::string_view k = kind ? kind : "";
  int want = -1;
  if (k != "all") {
    for (int i = 0; i < static_cast<int>(Kind::kCount); ++i)
      if (k == kKindNames[i]) want = i;
    if (want < 0) return -1;
  }
  int n = 0;
  for (const auto& [h, o] : s.objects)
    if (o.refs > 0 && (want < 0 || static_cast<int>(o.kind) == want)) ++n;
  return n;
}

void set_fault(const char* spec) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (spec == nullptr || !parse_fault_locked(s, spec))
    std::fprintf(stderr, "uvcl_clshim: bad fault spec \"%s\"\n", spec ? spec : "(null)");
}

long call_count(const char* entry_point) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const int ep = ep_from_name(entry_point ? entry_point : "");
  if (ep < 0) return -1;
  return s.calls[static_cast<std::size_t>(ep)];
}

void mark_order() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  for (std::vector<long>& v : s.since_mark) v.clear();
}

long nth_call_since_mark(const char* entry_point, int n) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const int ep = ep_from_name(entry_point ? entry_point : "");
  if (ep < 0) return -1;
  const std::vector<long>& v = s.since_mark[static_cast<std::size_t>(ep)];
  return n >= 1 && static_cast<std::size_t>(n) <= v.size() ? v[static_cast<std::size_t>(n) - 1] : 0;
}

void note_user_event(cl_event e, bool open) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = std::find(s.open_user_events.begin(), s.open_user_events.end(), e);
  if (open && it == s.open_user_events.end()) s.open_user_events.push_back(e);
  if (!open && it != s.open_user_events.end()) s.open_user_events.erase(it);
}

int rescue_user_events(cl_int status) {
  State& s = state();
  std::vector<cl_event> live, released;
  {
    std::lock_guard lock(s.mutex);
    live.swap(s.open_user_events);
    released.swap(s.released_open_user_events);
  }
  for (cl_event e : live) s.real.clSetUserEventStatus(e, status);
  for (cl_event e : released) {
    s.real.clSetUserEventStatus(e, status);
    s.real.clReleaseEvent(e);
  }
  return static_cast<int>(live.size() + released.size());
}

const char* anomaly_log() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  static thread_local std::string copy;
  copy = s.anomaly_log;
  return copy.c_str();
}

}  // namespace

// --- the entry points ----------------------------------------------------------
// Built with -fvisibility=hidden: only what this block defines is exported.
#pragma GCC visibility push(default)
extern "C" {

CL_API_ENTRY cl_int CL_API_CALL clGetPlatformIDs(cl_uint num_entries, cl_platform_id* platforms,
                                                 cl_uint* num_platforms) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clGetPlatformIDs);
  if (g.fail) return g.status;
  return real().clGetPlatformIDs(num_entries, platforms, num_platforms);
}

CL_API_ENTRY cl_int CL_API_CALL clGetPlatformInfo(cl_platform_id platform, cl_platform_info param_name,
                                                  size_t param_value_size, void* param_value,
                                                  size_t* param_value_size_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clGetPlatformInfo);
  if (g.fail) return g.status;
  return real().clGetPlatformInfo(platform, param_name, param_value_size, param_value, param_value_size_ret);
}

CL_API_ENTRY cl_int CL_API_CALL clGetDeviceIDs(cl_platform_id platform, cl_device_type device_type,
                                               cl_uint num_entries, cl_device_id* devices,
                                               cl_uint* num_devices) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clGetDeviceIDs);
  if (g.fail) return g.status;
  return real().clGetDeviceIDs(platform, device_type, num_entries, devices, num_devices);
}

CL_API_ENTRY cl_int CL_API_CALL clGetDeviceInfo(cl_device_id device, cl_device_info param_name,
                                                size_t param_value_size, void* param_value,
                                                size_t* param_value_size_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clGetDeviceInfo);
  if (g.fail) return g.status;
  return real().clGetDeviceInfo(device, param_name, param_value_size, param_value, param_value_size_ret);
}

CL_API_ENTRY cl_context CL_API_CALL clCreateContext(const cl_context_properties* properties, cl_uint num_devices,
                                                    const cl_device_id* devices,
                                                    void(CL_CALLBACK* pfn_notify)(const char* errinfo,
                                                                                  const void* private_info,
                                                                                  size_t cb, void* user_data),
                                                    void* user_data,
                                                    cl_int* errcode_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clCreateContext);
  if (g.fail) return fail_object<_cl_context>(errcode_ret, g.status);
  cl_context c = real().clCreateContext(properties, num_devices, devices, pfn_notify, user_data, errcode_ret);
  track(c, Kind::Context);
  return c;
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseContext(cl_context context) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clReleaseContext);
  if (g.fail) return g.status;
  if (!untrack(context, Kind::Context, "clReleaseContext")) return CL_INVALID_CONTEXT;
  return real().clReleaseContext(context);
}

CL_API_ENTRY cl_command_queue CL_API_CALL clCreateCommandQueue(cl_context context, cl_device_id device,
                                                               cl_command_queue_properties properties,
                                                               cl_int* errcode_ret) CL_API_SUFFIX__VERSION_1_2_DEPRECATED {
  const Gate g = enter(Ep::clCreateCommandQueue);
  if (g.fail) return fail_object<_cl_command_queue>(errcode_ret, g.status);
  if (!check_live(context, Kind::Context, "clCreateCommandQueue"))
    return fail_object<_cl_command_queue>(errcode_ret, CL_INVALID_CONTEXT);
  cl_command_queue q = real().clCreateCommandQueue(context, device, properties, errcode_ret);
  track(q, Kind::Queue);
  return q;
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseCommandQueue(cl_command_queue command_queue) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clReleaseCommandQueue);
  if (g.fail) return g.status;
  if (!untrack(command_queue, Kind::Queue, "clReleaseCommandQueue")) return CL_INVALID_COMMAND_QUEUE;
  return real().clReleaseCommandQueue(command_queue);
}

CL_API_ENTRY cl_int CL_API_CALL clFlush(cl_command_queue command_queue) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clFlush);
  if (g.fail) return g.status;
  if (!check_live(command_queue, Kind::Queue, "clFlush")) return CL_INVALID_COMMAND_QUEUE;
  return real().clFlush(command_queue);
}

CL_API_ENTRY cl_int CL_API_CALL clFinish(cl_command_queue command_queue) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clFinish);
  if (g.fail) return g.status;
  if (!check_live(command_queue, Kind::Queue, "clFinish")) return CL_INVALID_COMMAND_QUEUE;
  const cl_int rc = real().clFinish(command_queue);
  // Whatever ran on the queue is done: let its wrappers show it now, not
  // only when a driver thread gets to the callback.
  std::vector<std::uint64_t> ids;
  {
    State& s = state();
    std::lock_guard lock(s.mutex);
    for (const auto& [id, w] : s.wrappers)
      if (!w.completed) ids.push_back(id);
  }
  for (std::uint64_t id : ids) poll_wrapper(id);
  sweep_graveyard();
  return rc;
}

CL_API_ENTRY cl_mem CL_API_CALL clCreateBuffer(cl_context context, cl_mem_flags flags, size_t size, void* host_ptr,
                                               cl_int* errcode_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clCreateBuffer);
  if (g.fail) return fail_object<_cl_mem>(errcode_ret, g.status);
  if (!check_live(context, Kind::Context, "clCreateBuffer")) return fail_object<_cl_mem>(errcode_ret, CL_INVALID_CONTEXT);
  cl_mem m = real().clCreateBuffer(context, flags, size, host_ptr, errcode_ret);
  track(m, Kind::Mem);
  return m;
}

CL_API_ENTRY cl_int CL_API_CALL clRetainMemObject(cl_mem memobj) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clRetainMemObject);
  if (g.fail) return g.status;
  if (!retain_tracked(memobj, Kind::Mem, "clRetainMemObject")) return CL_INVALID_MEM_OBJECT;
  return real().clRetainMemObject(memobj);
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseMemObject(cl_mem memobj) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clReleaseMemObject);
  if (g.fail) return g.status;
  if (!untrack(memobj, Kind::Mem, "clReleaseMemObject")) return CL_INVALID_MEM_OBJECT;
  return real().clReleaseMemObject(memobj);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue command_queue, cl_mem buffer,
                                                     cl_bool blocking_write, size_t offset, size_t size,
                                                     const void* ptr, cl_uint num_events_in_wait_list,
                                                     const cl_event* event_wait_list,
                                                     cl_event* event) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clEnqueueWriteBuffer, event != nullptr);
  if (g.fail) return g.status;
  if (!check_live(command_queue, Kind::Queue, "clEnqueueWriteBuffer")) return CL_INVALID_COMMAND_QUEUE;
  if (!check_live(buffer, Kind::Mem, "clEnqueueWriteBuffer")) return CL_INVALID_MEM_OBJECT;
  if (!check_wait_list(num_events_in_wait_list, event_wait_list, "clEnqueueWriteBuffer"))
    return CL_INVALID_EVENT_WAIT_LIST;
  const cl_int rc = real().clEnqueueWriteBuffer(command_queue, buffer, blocking_write, offset, size, ptr,
                                                num_events_in_wait_list, event_wait_list, event);
  if (rc == CL_SUCCESS) returned_event(event, g);
  return rc;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadBuffer(cl_command_queue command_queue, cl_mem buffer,
                                                    cl_bool blocking_read, size_t offset, size_t size, void* ptr,
                                                    cl_uint num_events_in_wait_list,
                                                    const cl_event* event_wait_list,
                                                    cl_event* event) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clEnqueueReadBuffer, event != nullptr);
  if (g.fail) return g.status;
  if (!check_live(command_queue, Kind::Queue, "clEnqueueReadBuffer")) return CL_INVALID_COMMAND_QUEUE;
  if (!check_live(buffer, Kind::Mem, "clEnqueueReadBuffer")) return CL_INVALID_MEM_OBJECT;
  if (!check_wait_list(num_events_in_wait_list, event_wait_list, "clEnqueueReadBuffer"))
    return CL_INVALID_EVENT_WAIT_LIST;
  const cl_int rc = real().clEnqueueReadBuffer(command_queue, buffer, blocking_read, offset, size, ptr,
                                               num_events_in_wait_list, event_wait_list, event);
  if (rc == CL_SUCCESS) returned_event(event, g);
  return rc;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyBuffer(cl_command_queue command_queue, cl_mem src_buffer,
                                                    cl_mem dst_buffer, size_t src_offset, size_t dst_offset,
                                                    size_t size, cl_uint num_events_in_wait_list,
                                                    const cl_event* event_wait_list,
                                                    cl_event* event) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clEnqueueCopyBuffer, event != nullptr);
  if (g.fail) return g.status;
  if (!check_live(command_queue, Kind::Queue, "clEnqueueCopyBuffer")) return CL_INVALID_COMMAND_QUEUE;
  if (!check_live(src_buffer, Kind::Mem, "clEnqueueCopyBuffer") ||
      !check_live(dst_buffer, Kind::Mem, "clEnqueueCopyBuffer"))
    return CL_INVALID_MEM_OBJECT;
  if (!check_wait_list(num_events_in_wait_list, event_wait_list, "clEnqueueCopyBuffer"))
    return CL_INVALID_EVENT_WAIT_LIST;
  const cl_int rc = real().clEnqueueCopyBuffer(command_queue, src_buffer, dst_buffer, src_offset, dst_offset, size,
                                               num_events_in_wait_list, event_wait_list, event);
  if (rc == CL_SUCCESS) returned_event(event, g);
  return rc;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueFillBuffer(cl_command_queue command_queue, cl_mem buffer,
                                                    const void* pattern, size_t pattern_size, size_t offset,
                                                    size_t size, cl_uint num_events_in_wait_list,
                                                    const cl_event* event_wait_list,
                                                    cl_event* event) CL_API_SUFFIX__VERSION_1_2 {
  const Gate g = enter(Ep::clEnqueueFillBuffer, event != nullptr);
  if (g.fail) return g.status;
  if (!check_live(command_queue, Kind::Queue, "clEnqueueFillBuffer")) return CL_INVALID_COMMAND_QUEUE;
  if (!check_live(buffer, Kind::Mem, "clEnqueueFillBuffer")) return CL_INVALID_MEM_OBJECT;
  if (!check_wait_list(num_events_in_wait_list, event_wait_list, "clEnqueueFillBuffer"))
    return CL_INVALID_EVENT_WAIT_LIST;
  const cl_int rc = real().clEnqueueFillBuffer(command_queue, buffer, pattern, pattern_size, offset, size,
                                               num_events_in_wait_list, event_wait_list, event);
  if (rc == CL_SUCCESS) returned_event(event, g);
  return rc;
}

CL_API_ENTRY void* CL_API_CALL clEnqueueMapBuffer(cl_command_queue command_queue, cl_mem buffer,
                                                  cl_bool blocking_map, cl_map_flags map_flags, size_t offset,
                                                  size_t size, cl_uint num_events_in_wait_list,
                                                  const cl_event* event_wait_list, cl_event* event,
                                                  cl_int* errcode_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clEnqueueMapBuffer, event != nullptr);
  if (g.fail) return fail_object<void>(errcode_ret, g.status);
  if (!check_live(command_queue, Kind::Queue, "clEnqueueMapBuffer"))
    return fail_object<void>(errcode_ret, CL_INVALID_COMMAND_QUEUE);
  if (!check_live(buffer, Kind::Mem, "clEnqueueMapBuffer")) return fail_object<void>(errcode_ret, CL_INVALID_MEM_OBJECT);
  if (!check_wait_list(num_events_in_wait_list, event_wait_list, "clEnqueueMapBuffer"))
    return fail_object<void>(errcode_ret, CL_INVALID_EVENT_WAIT_LIST);
  cl_int rc = CL_SUCCESS;
  void* p = real().clEnqueueMapBuffer(command_queue, buffer, blocking_map, map_flags, offset, size,
                                      num_events_in_wait_list, event_wait_list, event, &rc);
  if (errcode_ret) *errcode_ret = rc;
  if (rc == CL_SUCCESS) returned_event(event, g);
  return p;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueUnmapMemObject(cl_command_queue command_queue, cl_mem memobj,
                                                        void* mapped_ptr, cl_uint num_events_in_wait_list,
                                                        const cl_event* event_wait_list,
                                                        cl_event* event) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clEnqueueUnmapMemObject, event != nullptr);
  if (g.fail) return g.status;
  if (!check_live(command_queue, Kind::Queue, "clEnqueueUnmapMemObject")) return CL_INVALID_COMMAND_QUEUE;
  if (!check_live(memobj, Kind::Mem, "clEnqueueUnmapMemObject")) return CL_INVALID_MEM_OBJECT;
  if (!check_wait_list(num_events_in_wait_list, event_wait_list, "clEnqueueUnmapMemObject"))
    return CL_INVALID_EVENT_WAIT_LIST;
  const cl_int rc = real().clEnqueueUnmapMemObject(command_queue, memobj, mapped_ptr, num_events_in_wait_list,
                                                   event_wait_list, event);
  if (rc == CL_SUCCESS) returned_event(event, g);
  return rc;
}

CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithSource(cl_context context, cl_uint count,
                                                              const char** strings, const size_t* lengths,
                                                              cl_int* errcode_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clCreateProgramWithSource);
  if (g.fail) return fail_object<_cl_program>(errcode_ret, g.status);
  if (!check_live(context, Kind::Context, "clCreateProgramWithSource"))
    return fail_object<_cl_program>(errcode_ret, CL_INVALID_CONTEXT);
  cl_program p = real().clCreateProgramWithSource(context, count, strings, lengths, errcode_ret);
  track(p, Kind::Program);
  return p;
}

CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithBinary(cl_context context, cl_uint num_devices,
                                                              const cl_device_id* device_list,
                                                              const size_t* lengths,
                                                              const unsigned char** binaries,
                                                              cl_int* binary_status,
                                                              cl_int* errcode_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clCreateProgramWithBinary);
  if (g.fail) return fail_object<_cl_program>(errcode_ret, g.status);
  if (!check_live(context, Kind::Context, "clCreateProgramWithBinary"))
    return fail_object<_cl_program>(errcode_ret, CL_INVALID_CONTEXT);
  cl_program p =
      real().clCreateProgramWithBinary(context, num_devices, device_list, lengths, binaries, binary_status, errcode_ret);
  track(p, Kind::Program);
  return p;
}

CL_API_ENTRY cl_int CL_API_CALL clBuildProgram(cl_program program, cl_uint num_devices,
                                               const cl_device_id* device_list, const char* options,
                                               void(CL_CALLBACK* pfn_notify)(cl_program program, void* user_data),
                                               void* user_data) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clBuildProgram);
  if (g.fail) return g.status;
  if (!check_live(program, Kind::Program, "clBuildProgram")) return CL_INVALID_PROGRAM;
  return real().clBuildProgram(program, num_devices, device_list, options, pfn_notify, user_data);
}

CL_API_ENTRY cl_int CL_API_CALL clGetProgramInfo(cl_program program, cl_program_info param_name,
                                                 size_t param_value_size, void* param_value,
                                                 size_t* param_value_size_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clGetProgramInfo);
  if (g.fail) return g.status;
  if (!check_live(program, Kind::Program, "clGetProgramInfo")) return CL_INVALID_PROGRAM;
  return real().clGetProgramInfo(program, param_name, param_value_size, param_value, param_value_size_ret);
}

CL_API_ENTRY cl_int CL_API_CALL clGetProgramBuildInfo(cl_program program, cl_device_id device,
                                                      cl_program_build_info param_name, size_t param_value_size,
                                                      void* param_value,
                                                      size_t* param_value_size_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clGetProgramBuildInfo);
  if (g.fail) return g.status;
  if (!check_live(program, Kind::Program, "clGetProgramBuildInfo")) return CL_INVALID_PROGRAM;
  return real().clGetProgramBuildInfo(program, device, param_name, param_value_size, param_value,
                                      param_value_size_ret);
}

CL_API_ENTRY cl_int CL_API_CALL clRetainProgram(cl_program program) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clRetainProgram);
  if (g.fail) return g.status;
  {
    State& s = state();
    std::lock_guard lock(s.mutex);
    auto it = s.objects.find(program);
    if (it == s.objects.end() || it->second.kind != Kind::Program || it->second.refs <= 0) {
      anomaly_locked(s, "clRetainProgram: program " + hex(program) + " is not live");
      return CL_INVALID_PROGRAM;
    }
    ++it->second.refs;
  }
  return real().clRetainProgram(program);
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseProgram(cl_program program) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clReleaseProgram);
  if (g.fail) return g.status;
  if (!untrack(program, Kind::Program, "clReleaseProgram")) return CL_INVALID_PROGRAM;
  return real().clReleaseProgram(program);
}

CL_API_ENTRY cl_kernel CL_API_CALL clCreateKernel(cl_program program, const char* kernel_name,
                                                  cl_int* errcode_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clCreateKernel);
  if (g.fail) return fail_object<_cl_kernel>(errcode_ret, g.status);
  if (!check_live(program, Kind::Program, "clCreateKernel")) return fail_object<_cl_kernel>(errcode_ret, CL_INVALID_PROGRAM);
  cl_kernel k = real().clCreateKernel(program, kernel_name, errcode_ret);
  track(k, Kind::Kernel);
  return k;
}

CL_API_ENTRY cl_int CL_API_CALL clGetKernelInfo(cl_kernel kernel, cl_kernel_info param_name, size_t param_value_size,
                                                void* param_value,
                                                size_t* param_value_size_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clGetKernelInfo);
  if (g.fail) return g.status;
  if (!check_live(kernel, Kind::Kernel, "clGetKernelInfo")) return CL_INVALID_KERNEL;
  return real().clGetKernelInfo(kernel, param_name, param_value_size, param_value, param_value_size_ret);
}

CL_API_ENTRY cl_int CL_API_CALL clGetKernelArgInfo(cl_kernel kernel, cl_uint arg_indx, cl_kernel_arg_info param_name,
                                                   size_t param_value_size, void* param_value,
                                                   size_t* param_value_size_ret) CL_API_SUFFIX__VERSION_1_2 {
  const Gate g = enter(Ep::clGetKernelArgInfo);
  if (g.fail) return g.status;
  if (!check_live(kernel, Kind::Kernel, "clGetKernelArgInfo")) return CL_INVALID_KERNEL;
  return real().clGetKernelArgInfo(kernel, arg_indx, param_name, param_value_size, param_value, param_value_size_ret);
}

CL_API_ENTRY cl_int CL_API_CALL clGetKernelWorkGroupInfo(cl_kernel kernel, cl_device_id device,
                                                         cl_kernel_work_group_info param_name,
                                                         size_t param_value_size, void* param_value,
                                                         size_t* param_value_size_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clGetKernelWorkGroupInfo);
  if (g.fail) return g.status;
  if (!check_live(kernel, Kind::Kernel, "clGetKernelWorkGroupInfo")) return CL_INVALID_KERNEL;
  return real().clGetKernelWorkGroupInfo(kernel, device, param_name, param_value_size, param_value,
                                         param_value_size_ret);
}

CL_API_ENTRY cl_int CL_API_CALL clSetKernelArg(cl_kernel kernel, cl_uint arg_index, size_t arg_size,
                                               const void* arg_value) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clSetKernelArg);
  if (g.fail) return g.status;
  if (!check_live(kernel, Kind::Kernel, "clSetKernelArg")) return CL_INVALID_KERNEL;
  return real().clSetKernelArg(kernel, arg_index, arg_size, arg_value);
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseKernel(cl_kernel kernel) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clReleaseKernel);
  if (g.fail) return g.status;
  if (!untrack(kernel, Kind::Kernel, "clReleaseKernel")) return CL_INVALID_KERNEL;
  return real().clReleaseKernel(kernel);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue command_queue, cl_kernel kernel,
                                                       cl_uint work_dim, const size_t* global_work_offset,
                                                       const size_t* global_work_size,
                                                       const size_t* local_work_size, cl_uint num_events_in_wait_list,
                                                       const cl_event* event_wait_list,
                                                       cl_event* event) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clEnqueueNDRangeKernel, event != nullptr);
  if (g.fail) return g.status;
  if (!check_live(command_queue, Kind::Queue, "clEnqueueNDRangeKernel")) return CL_INVALID_COMMAND_QUEUE;
  if (!check_live(kernel, Kind::Kernel, "clEnqueueNDRangeKernel")) return CL_INVALID_KERNEL;
  if (!check_wait_list(num_events_in_wait_list, event_wait_list, "clEnqueueNDRangeKernel"))
    return CL_INVALID_EVENT_WAIT_LIST;
  const cl_int rc = real().clEnqueueNDRangeKernel(command_queue, kernel, work_dim, global_work_offset,
                                                  global_work_size, local_work_size, num_events_in_wait_list,
                                                  event_wait_list, event);
  if (rc == CL_SUCCESS) returned_event(event, g);
  return rc;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueMarkerWithWaitList(cl_command_queue command_queue,
                                                            cl_uint num_events_in_wait_list,
                                                            const cl_event* event_wait_list,
                                                            cl_event* event) CL_API_SUFFIX__VERSION_1_2 {
  const Gate g = enter(Ep::clEnqueueMarkerWithWaitList, event != nullptr);
  if (g.fail) return g.status;
  if (!check_live(command_queue, Kind::Queue, "clEnqueueMarkerWithWaitList")) return CL_INVALID_COMMAND_QUEUE;
  if (!check_wait_list(num_events_in_wait_list, event_wait_list, "clEnqueueMarkerWithWaitList"))
    return CL_INVALID_EVENT_WAIT_LIST;
  const cl_int rc = real().clEnqueueMarkerWithWaitList(command_queue, num_events_in_wait_list, event_wait_list, event);
  if (rc == CL_SUCCESS) returned_event(event, g);
  return rc;
}

CL_API_ENTRY cl_int CL_API_CALL clGetEventInfo(cl_event event, cl_event_info param_name, size_t param_value_size,
                                               void* param_value,
                                               size_t* param_value_size_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clGetEventInfo);
  if (g.fail) return g.status;
  if (!check_live(event, Kind::Event, "clGetEventInfo")) return CL_INVALID_EVENT;
  if (const std::uint64_t w = wrapper_id(event)) {
    if (param_name == CL_EVENT_COMMAND_EXECUTION_STATUS) {
      poll_wrapper(w);
    } else if (param_name != CL_EVENT_REFERENCE_COUNT) {
      // Queue, context, command type: those of the real command.
      if (cl_event r = real_of(w))
        return real().clGetEventInfo(r, param_name, param_value_size, param_value, param_value_size_ret);
    }
  }
  return real().clGetEventInfo(event, param_name, param_value_size, param_value, param_value_size_ret);
}

CL_API_ENTRY cl_int CL_API_CALL clGetEventProfilingInfo(cl_event event, cl_profiling_info param_name,
                                                        size_t param_value_size, void* param_value,
                                                        size_t* param_value_size_ret) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clGetEventProfilingInfo);
  if (g.fail) return g.status;
  if (!check_live(event, Kind::Event, "clGetEventProfilingInfo")) return CL_INVALID_EVENT;
  cl_event target = event;
  if (const std::uint64_t w = wrapper_id(event))
    if (cl_event r = real_of(w)) target = r;
  return real().clGetEventProfilingInfo(target, param_name, param_value_size, param_value, param_value_size_ret);
}

CL_API_ENTRY cl_int CL_API_CALL clSetEventCallback(cl_event event, cl_int command_exec_callback_type,
                                                   void(CL_CALLBACK* pfn_notify)(cl_event event,
                                                                                 cl_int event_command_status,
                                                                                 void* user_data),
                                                   void* user_data) CL_API_SUFFIX__VERSION_1_1 {
  const Gate g = enter(Ep::clSetEventCallback);
  if (g.fail) return g.status;
  if (!check_live(event, Kind::Event, "clSetEventCallback")) return CL_INVALID_EVENT;
  return real().clSetEventCallback(event, command_exec_callback_type, pfn_notify, user_data);
}

CL_API_ENTRY cl_int CL_API_CALL clRetainEvent(cl_event event) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clRetainEvent);
  if (g.fail) return g.status;
  if (!retain_tracked(event, Kind::Event, "clRetainEvent")) return CL_INVALID_EVENT;
  return real().clRetainEvent(event);
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseEvent(cl_event event) CL_API_SUFFIX__VERSION_1_0 {
  const Gate g = enter(Ep::clReleaseEvent);
  if (g.fail) return g.status;
  bool dead = false;
  if (!untrack(event, Kind::Event, "clReleaseEvent", &dead)) return CL_INVALID_EVENT;
  cl_event real_to_release = nullptr;
  if (dead) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (auto u = std::find(s.open_user_events.begin(), s.open_user_events.end(), event);
        u != s.open_user_events.end()) {
      s.open_user_events.erase(u);
      s.released_open_user_events.push_back(event);
      return CL_SUCCESS;  // released for the caller; the shim keeps it for a rescue
    }
    if (auto w = s.wrapper_of.find(event); w != s.wrapper_of.end()) {
      auto it = s.wrappers.find(w->second);
      s.wrapper_of.erase(w);
      if (it != s.wrappers.end()) {
        it->second.caller_released = true;
        if (it->second.callback_done) {
          real_to_release = it->second.real;
          s.wrappers.erase(it);
        }
      }
    }
  }
  const cl_int rc = real().clReleaseEvent(event);
  if (real_to_release) real().clReleaseEvent(real_to_release);
  sweep_graveyard();
  return rc;
}

CL_API_ENTRY cl_event CL_API_CALL clCreateUserEvent(cl_context context, cl_int* errcode_ret) CL_API_SUFFIX__VERSION_1_1 {
  const Gate g = enter(Ep::clCreateUserEvent);
  if (g.fail) return fail_object<_cl_event>(errcode_ret, g.status);
  if (!check_live(context, Kind::Context, "clCreateUserEvent")) return fail_object<_cl_event>(errcode_ret, CL_INVALID_CONTEXT);
  cl_event e = real().clCreateUserEvent(context, errcode_ret);
  track(e, Kind::Event);
  if (e != nullptr) note_user_event(e, true);
  return e;
}

CL_API_ENTRY cl_int CL_API_CALL clSetUserEventStatus(cl_event event, cl_int execution_status) CL_API_SUFFIX__VERSION_1_1 {
  const Gate g = enter(Ep::clSetUserEventStatus);
  if (g.fail) return g.status;
  if (!check_live(event, Kind::Event, "clSetUserEventStatus")) return CL_INVALID_EVENT;
  const cl_int rc = real().clSetUserEventStatus(event, execution_status);
  if (rc == CL_SUCCESS) note_user_event(event, false);
  return rc;
}

// --- the shim's own interface ----------------------------------------------------

int uvcl_shim_live(const char* kind) { return live_count(kind); }

void uvcl_shim_reset_faults() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.faults.clear();
  s.lost = false;
  s.fired = 0;
}

void uvcl_shim_set_fault(const char* spec) { set_fault(spec); }

long uvcl_shim_calls(const char* entry_point) { return call_count(entry_point); }

// The order probe: uvcl_shim_mark_order(), then where an entry point's n-th
// call since (from 1; the first 64 are kept) fell among all calls, to
// compare with another's: 0 if there was none, -1 for an unknown name.
void uvcl_shim_mark_order() { mark_order(); }

long uvcl_shim_nth_call_since_mark(const char* entry_point, int n) { return nth_call_since_mark(entry_point, n); }

int uvcl_shim_faults_fired() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.fired;
}

int uvcl_shim_faults_armed() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return static_cast<int>(s.faults.size());
}

int uvcl_shim_lost() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.lost ? 1 : 0;
}

int uvcl_shim_anomalies() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.anomalies;
}

const char* uvcl_shim_anomaly_log() { return anomaly_log(); }

// Test-only escape hatch: completes every user event the caller created and
// never completed (status: CL_COMPLETE or a negative error), so a test that
// found such a hang can still tear the engine down. Returns how many.
int uvcl_shim_rescue_user_events(int status) { return rescue_user_events(status); }

}  // extern "C"
#pragma GCC visibility pop
