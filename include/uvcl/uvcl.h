/* uvcl/uvcl.h — the C API of uvcl: OpenCL on every device, from one libuv loop.
 *
 * A thin layer over the C++ engine (uvcl/engine.hpp), in libuv's style, for
 * C programs and for bindings from other languages. docs/api.md, "The C API",
 * describes it; the C++ sections say what each call does.
 *
 * Conventions:
 * - An engine is an opaque handle (uvcl_engine_t*). Buffers, programs,
 *   kernels and host memory are plain integer ids; a stale or foreign id is
 *   an error (UVCL_EINVALID_ARGUMENT), never undefined behaviour.
 * - Every call that can fail returns an int: 0 on success, a negative
 *   uvcl_status on failure. uvcl_err_name() and uvcl_strerror() name a
 *   status; uvcl_engine_last_error() gives the message of the engine's last
 *   failed call ("InvalidArgument: write: buffer 7 is not a live buffer").
 * - Callbacks are plain functions with a void* user_data, run on the loop
 *   thread. As in libuv: when a call that takes a callback fails, the
 *   callback is never called; otherwise it is called exactly once (with
 *   success, the error that concerned the operation, or UVCL_ECANCELLED at
 *   engine destruction). A callback's `message` is NULL on success, else
 *   the error's text, valid during the call.
 * - One thread: every call is made on the loop thread.
 * - No call throws or longjmps; running out of memory aborts the process.
 */
#ifndef UVCL_UVCL_H
#define UVCL_UVCL_H

/* A C header: C++'s modernize checks do not apply. NOLINTBEGIN(modernize-deprecated-headers, modernize-use-using) */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "uvcl/export.h"

#ifdef __cplusplus
extern "C" {
#endif

struct uv_loop_s; /* uv_loop_t */

/* uvcl::Status, negated. */
typedef enum {
  UVCL_OK = 0,
  UVCL_EINITIALIZATION = -1,
  UVCL_EDYLIB_NOT_FOUND = -2,
  UVCL_EDEVICE_ENUMERATION = -3,
  UVCL_EDEVICE_QUERY = -4,
  UVCL_EMEMORY_ALLOCATION = -5,
  UVCL_EMEMORY_COPY_H2P = -6,
  UVCL_EMEMORY_COPY_P2H = -7,
  UVCL_EKERNEL_COMPILATION = -8,
  UVCL_EKERNEL_LAUNCH = -9,
  UVCL_EKERNEL_SYNC = -10,
  UVCL_EINCORRECT_KERNEL_ARG = -11,
  UVCL_EINVALID_ARGUMENT = -12,
  UVCL_EINVALID_CONFIG = -13,
  UVCL_EINVALID_JOB = -14,
  UVCL_EMISSING_SYMBOL = -15,
  UVCL_EDEVICE_LOST = -16,
  UVCL_EIO = -17,
  UVCL_ECANCELLED = -18
} uvcl_status;

/* "InvalidArgument" (uvcl::status_name), "Ok" for 0, "Unknown" otherwise. */
UVCL_EXPORT const char* uvcl_err_name(int status);
/* A sentence describing the status ("a bad argument at the API edge"). */
UVCL_EXPORT const char* uvcl_strerror(int status);
/* The library's version, "MAJOR.MINOR.PATCH". */
UVCL_EXPORT const char* uvcl_version_string(void);

typedef struct uvcl_engine_s uvcl_engine_t;
typedef uint64_t uvcl_buffer_t;
typedef uint64_t uvcl_program_t;
typedef uint64_t uvcl_kernel_t;

/* Every callback: `status` 0 or negative; `message` NULL on success, else
 * "Status: what went wrong", valid during the call. */
typedef void (*uvcl_done_cb)(int status, const char* message, void* user_data);
/* `data` (NULL on failure) points into pinned staging, valid during the call. */
typedef void (*uvcl_read_cb)(int status, const char* message, const void* data, size_t bytes, void* user_data);
typedef void (*uvcl_timing_cb)(int status, const char* message, uint64_t device_ns, uint64_t wall_ns,
                               void* user_data);
typedef void (*uvcl_closed_cb)(void* user_data);
/* Returns non-zero once what uvcl_run_until waits for has happened. */
typedef int (*uvcl_done_fn)(void* user_data);

/* --- the engine ----------------------------------------------------------- */

/* Creates an engine. `config_json`: a config document (docs/config.md), or
 * NULL for the defaults. `loop`: the caller's loop, or NULL for a loop the
 * engine owns. As sqlite3_open does, *out is set even on failure (to a
 * handle that only holds the error, NULL only when out of memory): read
 * uvcl_engine_last_error(*out), then uvcl_engine_destroy(*out). */
UVCL_EXPORT int uvcl_engine_create(uvcl_engine_t** out, const char* config_json, struct uv_loop_s* loop);
/* Destroys the engine (blocking on work already on the devices; see
 * uvcl_close for the non-blocking way). Callbacks of unfinished work run,
 * with UVCL_ECANCELLED. On a caller's loop, run it once more afterwards for
 * the handles' close callbacks. NULL: nothing. Allowed inside a callback:
 * deferred until the outermost uvcl call on the stack returns. */
UVCL_EXPORT void uvcl_engine_destroy(uvcl_engine_t* engine);
/* Closes without blocking the loop; on_closed (required) runs on the loop
 * once every handle is closed. Destroy the engine afterwards. */
UVCL_EXPORT int uvcl_close(uvcl_engine_t* engine, uvcl_closed_cb on_closed, void* user_data);
/* The message of the engine's last failed call ("" if none); valid until the
 * next failed call on the engine. NULL engine: a message saying so. */
UVCL_EXPORT const char* uvcl_engine_last_error(const uvcl_engine_t* engine);
/* The loop the engine runs on (its own, or the caller's). */
UVCL_EXPORT struct uv_loop_s* uvcl_engine_loop(const uvcl_engine_t* engine);

/* --- devices -------------------------------------------------------------- */

typedef enum { UVCL_DEVICE_CPU, UVCL_DEVICE_GPU, UVCL_DEVICE_ACCELERATOR, UVCL_DEVICE_CUSTOM, UVCL_DEVICE_OTHER }
    uvcl_device_type;

/* uvcl::DeviceInfo. Strings belong to the engine and live as long as it. */
typedef struct {
  size_t index, platform_index;
  const char *platform_name, *platform_vendor, *platform_version;
  const char *name, *vendor, *driver_version, *device_version, *opencl_c_version;
  uvcl_device_type type;
  uint32_t compute_units, max_clock_mhz;
  uint64_t global_memory, max_allocation, local_memory; /* bytes */
  size_t max_work_group_size;
  uint32_t max_work_item_dims;
  size_t max_work_item_sizes[3];  /* per axis; unused axes 0 */
  uint64_t max_global_sizes[3];
  uint32_t preferred_float_vector_width, warp_size;
  int fp16, fp64, matrix_units;
  uint64_t profiling_timer_resolution_ns;
  const char* extensions;
} uvcl_device_info_t;

UVCL_EXPORT size_t uvcl_device_count(const uvcl_engine_t* engine); /* 0 for NULL or a failed engine */
UVCL_EXPORT int uvcl_device_info(const uvcl_engine_t* engine, size_t device, uvcl_device_info_t* out);
/* 1 if the device stopped working, 0 if not, negative on error. */
UVCL_EXPORT int uvcl_device_lost(const uvcl_engine_t* engine, size_t device);

/* --- memory --------------------------------------------------------------- */

UVCL_EXPORT int uvcl_buffer_allocate(uvcl_engine_t* engine, size_t device, size_t bytes, uvcl_buffer_t* out);
UVCL_EXPORT int uvcl_buffer_retain(uvcl_engine_t* engine, uvcl_buffer_t buffer);
/* At zero references the buffer is freed once its last uses complete. */
UVCL_EXPORT int uvcl_buffer_release(uvcl_engine_t* engine, uvcl_buffer_t buffer);
UVCL_EXPORT int uvcl_buffer_size(uvcl_engine_t* engine, uvcl_buffer_t buffer, size_t* out);
UVCL_EXPORT uint64_t uvcl_free_bytes(const uvcl_engine_t* engine, size_t device);

/* Pinned host memory of a device's context (uvcl::HostMemory): write from
 * it with UVCL_WRITE_BORROW and read into it with uvcl_read_into at the
 * pinned rate. `data` stays valid until uvcl_host_release. */
typedef struct {
  uint64_t id;
  void* data;
  size_t bytes;
} uvcl_host_memory_t;
UVCL_EXPORT int uvcl_host_alloc(uvcl_engine_t* engine, size_t device, size_t bytes, uvcl_host_memory_t* out);
/* Takes effect once no transfer in flight uses it. */
UVCL_EXPORT int uvcl_host_release(uvcl_engine_t* engine, const uvcl_host_memory_t* memory);

/* --- transfers (asynchronous, hazard-tracked) ------------------------------ */

typedef enum {
  UVCL_WRITE_COPY,   /* the bytes are copied before uvcl_write returns */
  UVCL_WRITE_BORROW  /* the caller keeps them alive and unchanged until on_done */
} uvcl_write_mode;

/* on_done may be NULL (fire and forget) in write, fill and copy. */
UVCL_EXPORT int uvcl_write(uvcl_engine_t* engine, uvcl_buffer_t dst, size_t offset, const void* src, size_t bytes,
               uvcl_write_mode mode, uvcl_done_cb on_done, void* user_data);
/* Repeats a pattern of 1..128 bytes (a power of two); offset and bytes are
 * multiples of it. */
UVCL_EXPORT int uvcl_fill(uvcl_engine_t* engine, uvcl_buffer_t dst, const void* pattern, size_t pattern_bytes, size_t offset,
              size_t bytes, uvcl_done_cb on_done, void* user_data);
/* A sync point for the buffer's last writer. on_data is required. */
UVCL_EXPORT int uvcl_read(uvcl_engine_t* engine, uvcl_buffer_t src, size_t offset, size_t bytes, uvcl_read_cb on_data,
              void* user_data);
/* Into caller memory, which stays alive and untouched until on_done. */
UVCL_EXPORT int uvcl_read_into(uvcl_engine_t* engine, uvcl_buffer_t src, size_t offset, void* dst, size_t bytes,
                   uvcl_done_cb on_done, void* user_data);
UVCL_EXPORT int uvcl_copy(uvcl_engine_t* engine, uvcl_buffer_t src, size_t src_offset, uvcl_buffer_t dst, size_t dst_offset,
              size_t bytes, uvcl_done_cb on_done, void* user_data);

/* --- programs and kernels ------------------------------------------------- */

typedef enum {
  UVCL_BUILD_OPTIONS_ADD,     /* after opencl.build_options */
  UVCL_BUILD_OPTIONS_REPLACE  /* instead of them */
} uvcl_build_options_mode;

/* Builds OpenCL C for a device in a compiler process. The id in *out is
 * valid at once; on_built reports the build (a KernelCompilation message
 * carries the build log). `options` may be NULL. */
UVCL_EXPORT int uvcl_compile(uvcl_engine_t* engine, size_t device, const char* source, const char* options,
                 uvcl_build_options_mode mode, uvcl_done_cb on_built, void* user_data, uvcl_program_t* out);
/* Compiles and runs the loop until built. Not from inside a callback. */
UVCL_EXPORT int uvcl_compile_sync(uvcl_engine_t* engine, size_t device, const char* source, const char* options,
                      uvcl_build_options_mode mode, uvcl_program_t* out);
UVCL_EXPORT int uvcl_program_release(uvcl_engine_t* engine, uvcl_program_t program);

/* uvcl::ParamAccess. */
typedef enum {
  UVCL_ACCESS_READ_ONLY,
  UVCL_ACCESS_WRITTEN,
  UVCL_ACCESS_SCALAR,
  UVCL_ACCESS_LOCAL,
  UVCL_ACCESS_WRITE_ONLY
} uvcl_param_access;

/* A kernel of a built program. `declared` (NULL, or one access per
 * parameter: declared_count) overrides what kernel argument info infers. */
UVCL_EXPORT int uvcl_kernel_create(uvcl_engine_t* engine, uvcl_program_t program, const char* entry,
                       const uvcl_param_access* declared, size_t declared_count, uvcl_kernel_t* out);
UVCL_EXPORT int uvcl_kernel_release(uvcl_engine_t* engine, uvcl_kernel_t kernel);

/* uvcl::KernelParam. Strings stay valid until the next uvcl_kernel_params
 * call on the engine. */
typedef struct {
  const char* name;
  const char* type_name;
  uvcl_param_access access;
  size_t scalar_size;
  const char* unsupported; /* why uvcl cannot pass it, or NULL */
  int writes_each_item;    /* 1: each work-item g of dimension 0 stores element g (KernelParam) */
} uvcl_kernel_param_t;
/* Writes up to `capacity` parameters to `out` (NULL with capacity 0 to
 * count them) and their number to *count. */
UVCL_EXPORT int uvcl_kernel_params(uvcl_engine_t* engine, uvcl_kernel_t kernel, uvcl_kernel_param_t* out, size_t capacity,
                       size_t* count);

/* --- launches ------------------------------------------------------------- */

/* uvcl::ScalarType. */
typedef enum {
  UVCL_CHAR, UVCL_UCHAR, UVCL_SHORT, UVCL_USHORT, UVCL_INT, UVCL_UINT,
  UVCL_LONG, UVCL_ULONG, UVCL_HALF, UVCL_FLOAT, UVCL_DOUBLE
} uvcl_scalar_type;

typedef enum { UVCL_ARG_BUFFER, UVCL_ARG_SCALAR, UVCL_ARG_LOCAL } uvcl_arg_kind;

/* One kernel argument (uvcl::KernelArg); make them with the uvcl_arg_*
 * functions below. */
typedef struct {
  uvcl_arg_kind kind;
  uvcl_scalar_type scalar_type; /* UVCL_ARG_SCALAR */
  unsigned char scalar[8];      /* UVCL_ARG_SCALAR: the value's bytes, host order */
  uvcl_buffer_t buffer;         /* UVCL_ARG_BUFFER */
  size_t local_bytes;           /* UVCL_ARG_LOCAL */
} uvcl_arg_t;

/* A launch (uvcl::Launch), with nothing for the caller to allocate: the
 * arguments in the caller's array, sizes inline. Zero-initialise, then set
 * what is needed. */
typedef struct {
  uvcl_kernel_t kernel;
  const uvcl_arg_t* args;
  size_t arg_count;
  uint32_t dims;     /* 1..3 */
  size_t global[3];  /* work-items per axis */
  /* 0, or 1 + the index of an integer scalar argument: that axis' size is
   * then the argument's value times local[axis] (uvcl::GlobalAxis::groups_in_arg). */
  uint32_t global_from_arg[3];
  size_t local[3];   /* all 0: the driver's choice */
  uint64_t tag;      /* echoed to the schedule recorder and traces */
} uvcl_launch_t;

/* Fire and forget. on_done: NULL, or called once the launch is final (its
 * own failure, one it inherits, or UVCL_ECANCELLED); no heap allocation
 * for the callback. */
UVCL_EXPORT int uvcl_launch(uvcl_engine_t* engine, const uvcl_launch_t* launch, uvcl_done_cb on_done, void* user_data);
/* The checks uvcl_launch makes, without launching. */
UVCL_EXPORT int uvcl_check_launch(uvcl_engine_t* engine, const uvcl_launch_t* launch);
/* Data a launch reads that is on another device (uvcl::InputMove). */
typedef struct {
  size_t from_device;
  uint64_t bytes;
} uvcl_input_move_t;

/* A device a launch could run on (uvcl::DeviceOption). */
typedef struct {
  uvcl_kernel_t kernel; /* from a program built for that device */
  uint64_t work_items;  /* the launch's global size, its axes multiplied */
  const uvcl_input_move_t* inputs; /* what would have to move there first */
  size_t input_count;
} uvcl_device_option_t;

/* Which of `count` options the launch would end first on: its index in
 * *chosen (uvcl::Engine::choose_device says what is counted). The engine
 * moves nothing: copy the inputs there, then launch there. */
UVCL_EXPORT int uvcl_choose_device(uvcl_engine_t* engine, const uvcl_device_option_t* options, size_t count, size_t* chosen);
/* Runs the kernel alone once the device's earlier work is done and reports
 * device and wall nanoseconds (device times need "profile": true). */
UVCL_EXPORT int uvcl_timed_launch(uvcl_engine_t* engine, const uvcl_launch_t* launch, uvcl_timing_cb on_timed,
                      void* user_data);

static inline uvcl_arg_t uvcl_arg_buffer(uvcl_buffer_t b) {
  uvcl_arg_t a;
  memset(&a, 0, sizeof a);
  a.kind = UVCL_ARG_BUFFER;
  a.buffer = b;
  return a;
}
static inline uvcl_arg_t uvcl_arg_local(size_t bytes) {
  uvcl_arg_t a;
  memset(&a, 0, sizeof a);
  a.kind = UVCL_ARG_LOCAL;
  a.local_bytes = bytes;
  return a;
}
/* `value` points to a value of the type's size (2 bytes of IEEE binary16
 * bits for UVCL_HALF). */
static inline uvcl_arg_t uvcl_arg_scalar(uvcl_scalar_type type, const void* value, size_t size) {
  uvcl_arg_t a;
  memset(&a, 0, sizeof a);
  a.kind = UVCL_ARG_SCALAR;
  a.scalar_type = type;
  memcpy(a.scalar, value, size <= sizeof a.scalar ? size : sizeof a.scalar);
  return a;
}
static inline uvcl_arg_t uvcl_arg_int(int32_t v) { return uvcl_arg_scalar(UVCL_INT, &v, sizeof v); }
static inline uvcl_arg_t uvcl_arg_uint(uint32_t v) { return uvcl_arg_scalar(UVCL_UINT, &v, sizeof v); }
static inline uvcl_arg_t uvcl_arg_long(int64_t v) { return uvcl_arg_scalar(UVCL_LONG, &v, sizeof v); }
static inline uvcl_arg_t uvcl_arg_ulong(uint64_t v) { return uvcl_arg_scalar(UVCL_ULONG, &v, sizeof v); }
static inline uvcl_arg_t uvcl_arg_float(float v) { return uvcl_arg_scalar(UVCL_FLOAT, &v, sizeof v); }
static inline uvcl_arg_t uvcl_arg_double(double v) { return uvcl_arg_scalar(UVCL_DOUBLE, &v, sizeof v); }
static inline uvcl_arg_t uvcl_arg_half_bits(uint16_t bits) { return uvcl_arg_scalar(UVCL_HALF, &bits, sizeof bits); }

/* IEEE binary16 <-> binary32, round to nearest even. */
UVCL_EXPORT uint16_t uvcl_float_to_half(float f);
UVCL_EXPORT float uvcl_half_to_float(uint16_t bits);

/* --- sync points and error scopes ------------------------------------------ */

/* on_done runs once everything submitted so far is done, with the first
 * error of the commands made since the previous drain outside any error
 * scope. on_done may be NULL. */
UVCL_EXPORT int uvcl_drain(uvcl_engine_t* engine, uvcl_done_cb on_done, void* user_data);
/* Errors of the commands made until the matching pop go to that scope. */
UVCL_EXPORT int uvcl_push_error_scope(uvcl_engine_t* engine);
/* Closes the innermost scope; on_done (required) runs once every command made
 * before the call is done, with the first error of the scope's commands. */
UVCL_EXPORT int uvcl_pop_error_scope(uvcl_engine_t* engine, uvcl_done_cb on_done, void* user_data);

/* --- driving the loop ------------------------------------------------------ */

/* Non-blocking: submits windows, collects completions, runs due callbacks. */
UVCL_EXPORT int uvcl_poll(uvcl_engine_t* engine);
/* Runs the loop until done(user_data) returns non-zero; an error inside a
 * callback, or when nothing in flight could make it true. */
UVCL_EXPORT int uvcl_run_until(uvcl_engine_t* engine, uvcl_done_fn done, void* user_data);
/* Drains and runs the loop until the drain completes: its result. */
UVCL_EXPORT int uvcl_finish(uvcl_engine_t* engine);
/* Reads `bytes` bytes into dst and runs the loop until they are there. */
UVCL_EXPORT int uvcl_read_sync(uvcl_engine_t* engine, uvcl_buffer_t src, size_t offset, void* dst, size_t bytes);

/* --- observing ------------------------------------------------------------- */

/* Called once per failure, where it started, at the end of the engine's
 * step. NULL: none. */
UVCL_EXPORT int uvcl_set_error_listener(uvcl_engine_t* engine, uvcl_done_cb listener, void* user_data);
UVCL_EXPORT int uvcl_set_tracing(uvcl_engine_t* engine, int on);
/* Chrome trace-event JSON of what was recorded; valid until the next call of
 * uvcl_trace_json on the engine. NULL on error. */
UVCL_EXPORT const char* uvcl_trace_json(uvcl_engine_t* engine);

/* uvcl::ScheduleEntry; its arrays are valid during the recorder's call. */
typedef struct {
  uint64_t id;
  const char* op; /* "launch" | "write" | "read" | "copy" | "fill" */
  uint64_t tag;
  size_t device;
  uint32_t queue;
  const uvcl_buffer_t* reads;
  size_t read_count;
  const uvcl_buffer_t* writes;
  size_t write_count;
  const uint64_t* waits;
  size_t wait_count;
  const uint64_t* completed;
  size_t completed_count;
} uvcl_schedule_entry_t;
typedef void (*uvcl_schedule_cb)(const uvcl_schedule_entry_t* entry, void* user_data);
/* NULL recorder: stop recording. */
UVCL_EXPORT int uvcl_set_schedule_recorder(uvcl_engine_t* engine, uvcl_schedule_cb recorder, void* user_data);

/* uvcl::EngineStats. Later versions add fields at the end only: pass
 * sizeof(uvcl_stats_t) as out_size. The library writes the fields it has
 * that fit in out_size and sets the rest of out_size's bytes to 0, so a
 * program built against an older or newer uvcl.h reads what both know.
 * out_size: a non-zero multiple of 8. */
typedef struct {
  uint64_t launches, writes, reads, copies;
  uint64_t bytes_to_device, bytes_from_device, bytes_copied;
  uint64_t submitted, failed, flushes, cross_queue_waits;
  uint64_t status_queries, events, fences;
  uint64_t in_flight, pending, unfinished;
  uint64_t live_buffers, host_memory_bytes, staging_bytes;
  uint64_t program_memo_hits, program_memo_misses;
  uint64_t process_builds, inline_builds, compiler_starts, compiler_failures, compiler_fallbacks;
  uint64_t callbacks, spin_ns, snapshots, polls;
} uvcl_stats_t;
UVCL_EXPORT int uvcl_stats(const uvcl_engine_t* engine, uvcl_stats_t* out, size_t out_size);

#ifdef __cplusplus
}
#endif

/* NOLINTEND(modernize-deprecated-headers, modernize-use-using) */
#endif /* UVCL_UVCL_H */
