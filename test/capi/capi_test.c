/* The C API (uvcl/uvcl.h), compiled as C, against PoCL.
 *
 * Each case prints GoogleTest's "[ RUN ]" / "[ OK ]" / "[ FAILED ]" lines,
 * so scripts/count_tests.py counts them like the C++ cases; exit 0 when
 * every case passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "uvcl/uvcl.h"

static int g_failed; /* checks failed in the current case */

#define CHECK(cond, engine)                                                                          \
  do {                                                                                               \
    if (!(cond)) {                                                                                   \
      ++g_failed;                                                                                    \
      printf("%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, #cond,                \
             uvcl_engine_last_error(engine));                                                        \
    }                                                                                                \
  } while (0)

static const char* const kTwice =
    "__kernel void twice(__global int* a, uint n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n) a[i] *= 2;\n"
    "}\n";

/* What a uvcl_done_cb saw. */
typedef struct {
  int calls;
  int status;
  char message[1024];
} done_t;

static void on_done(int status, const char* message, void* user_data) {
  done_t* d = (done_t*)user_data;
  d->calls++;
  d->status = status;
  snprintf(d->message, sizeof d->message, "%s", message ? message : "");
}

static int done_called(void* user_data) { return ((done_t*)user_data)->calls > 0; }

typedef struct {
  int calls;
  int status;
  int values[64];
  size_t bytes;
} read_t;

static void on_read(int status, const char* message, const void* data, size_t bytes, void* user_data) {
  read_t* r = (read_t*)user_data;
  (void)message;
  r->calls++;
  r->status = status;
  r->bytes = bytes;
  if (data && bytes <= sizeof r->values) memcpy(r->values, data, bytes);
}

static uvcl_engine_t* make_engine(const char* config) {
  uvcl_engine_t* e = NULL;
  int rc = uvcl_engine_create(&e, config, NULL);
  if (rc != 0) {
    printf("uvcl_engine_create: %d %s\n", rc, uvcl_engine_last_error(e));
    uvcl_engine_destroy(e);
    return NULL;
  }
  if (uvcl_device_count(e) == 0) {
    printf("no OpenCL device (PoCL expected)\n");
    uvcl_engine_destroy(e);
    return NULL;
  }
  return e;
}

/* A built `twice` kernel. */
static int twice_kernel(uvcl_engine_t* e, uvcl_program_t* prog, uvcl_kernel_t* k) {
  if (uvcl_compile_sync(e, 0, kTwice, NULL, UVCL_BUILD_OPTIONS_ADD, prog) != 0) return -1;
  return uvcl_kernel_create(e, *prog, "twice", NULL, 0, k);
}

/* ------------------------------------------------------------------------ */

static void test_status_names(void) {
  CHECK(strcmp(uvcl_err_name(UVCL_EINVALID_ARGUMENT), "InvalidArgument") == 0, NULL);
  CHECK(strcmp(uvcl_err_name(UVCL_ECANCELLED), "Cancelled") == 0, NULL);
  CHECK(strcmp(uvcl_err_name(0), "Ok") == 0, NULL);
  CHECK(strcmp(uvcl_err_name(-1000), "Unknown") == 0, NULL);
  CHECK(strcmp(uvcl_err_name(5), "Unknown") == 0, NULL);
  CHECK(strstr(uvcl_strerror(UVCL_EDYLIB_NOT_FOUND), "OpenCL library") != NULL, NULL);
  CHECK(strcmp(uvcl_strerror(-1000), "unknown uvcl status") == 0, NULL);
  CHECK(strcmp(uvcl_version_string(), UVCL_EXPECTED_VERSION) == 0, NULL);
}

static void test_null_and_failed_handles(void) {
  uvcl_buffer_t b = 0;
  CHECK(uvcl_buffer_allocate(NULL, 0, 64, &b) == UVCL_EINVALID_ARGUMENT, NULL);
  CHECK(strstr(uvcl_engine_last_error(NULL), "NULL") != NULL, NULL);
  CHECK(uvcl_device_count(NULL) == 0, NULL);
  CHECK(uvcl_engine_create(NULL, NULL, NULL) == UVCL_EINVALID_ARGUMENT, NULL);
  uvcl_engine_destroy(NULL); /* nothing */

  /* A config out of range: the handle carries the error, like sqlite3_open. */
  uvcl_engine_t* e = NULL;
  int rc = uvcl_engine_create(&e, "{\"opencl\": {\"queues\": 0}}", NULL);
  CHECK(rc == UVCL_EINVALID_CONFIG, e);
  CHECK(e != NULL, e);
  CHECK(strstr(uvcl_engine_last_error(e), "InvalidConfig: ") == uvcl_engine_last_error(e), e);
  CHECK(strstr(uvcl_engine_last_error(e), "opencl.queues") != NULL, e);
  CHECK(uvcl_device_count(e) == 0, e);
  CHECK(uvcl_engine_loop(e) == NULL, e);
  done_t d = {0};
  CHECK(uvcl_drain(e, on_done, &d) == UVCL_EINVALID_ARGUMENT, e);
  CHECK(strstr(uvcl_engine_last_error(e), "the engine was not created (InvalidConfig: ") != NULL, e);
  CHECK(d.calls == 0, e);
  uvcl_engine_destroy(e);

  rc = uvcl_engine_create(&e, "{not json", NULL);
  CHECK(rc == UVCL_EINVALID_CONFIG, e);
  uvcl_engine_destroy(e);
}

static void test_devices(void) {
  uvcl_engine_t* e = make_engine(NULL);
  CHECK(e != NULL, e);
  if (!e) return;
  uvcl_device_info_t info;
  CHECK(uvcl_device_info(e, 0, &info) == 0, e);
  CHECK(info.index == 0 && info.name != NULL && info.name[0] != '\0', e);
  CHECK(info.type == UVCL_DEVICE_CPU, e); /* PoCL */
  CHECK(info.compute_units > 0 && info.global_memory > 0 && info.max_work_group_size > 0, e);
  CHECK(info.max_work_item_dims >= 1 && info.max_work_item_sizes[0] > 0, e);
  CHECK(info.extensions != NULL, e);
  CHECK(uvcl_device_lost(e, 0) == 0, e);
  CHECK(uvcl_device_info(e, 99, &info) == UVCL_EINVALID_ARGUMENT, e);
  CHECK(strstr(uvcl_engine_last_error(e), "device 99 does not exist") != NULL, e);
  CHECK(uvcl_free_bytes(e, 0) > 0, e);
  CHECK(uvcl_engine_loop(e) != NULL, e);
  uvcl_engine_destroy(e);
}

/* Write, launch (with a callback), read back: the round trip. */
static void test_write_launch_read(void) {
  uvcl_engine_t* e = make_engine(NULL);
  CHECK(e != NULL, e);
  if (!e) return;

  /* An asynchronous compile. */
  done_t built = {0};
  uvcl_program_t prog = 0;
  CHECK(uvcl_compile(e, 0, kTwice, "-DUNUSED=1", UVCL_BUILD_OPTIONS_ADD, on_done, &built, &prog) == 0, e);
  CHECK(uvcl_run_until(e, done_called, &built) == 0, e);
  CHECK(built.calls == 1 && built.status == 0, e);
  uvcl_kernel_t k = 0;
  CHECK(uvcl_kernel_create(e, prog, "twice", NULL, 0, &k) == 0, e);

  int host[64];
  for (int i = 0; i < 64; ++i) host[i] = i;
  uvcl_buffer_t buf = 0;
  CHECK(uvcl_buffer_allocate(e, 0, sizeof host, &buf) == 0, e);
  size_t size = 0;
  CHECK(uvcl_buffer_size(e, buf, &size) == 0 && size == sizeof host, e);
  done_t wrote = {0};
  CHECK(uvcl_write(e, buf, 0, host, sizeof host, UVCL_WRITE_COPY, on_done, &wrote) == 0, e);

  uvcl_arg_t args[2];
  args[0] = uvcl_arg_buffer(buf);
  args[1] = uvcl_arg_uint(64);
  uvcl_launch_t l;
  memset(&l, 0, sizeof l);
  l.kernel = k;
  l.args = args;
  l.arg_count = 2;
  l.dims = 1;
  l.global[0] = 64;
  done_t launched[3];
  memset(launched, 0, sizeof launched);
  for (int i = 0; i < 3; ++i) CHECK(uvcl_launch(e, &l, on_done, &launched[i]) == 0, e);
  CHECK(uvcl_launch(e, &l, NULL, NULL) == 0, e); /* fire and forget: x16 in all */
  CHECK(uvcl_check_launch(e, &l) == 0, e);

  read_t r;
  memset(&r, 0, sizeof r);
  CHECK(uvcl_read(e, buf, 0, sizeof host, on_read, &r) == 0, e);
  CHECK(uvcl_finish(e) == 0, e);
  CHECK(wrote.calls == 1 && wrote.status == 0, e);
  for (int i = 0; i < 3; ++i) CHECK(launched[i].calls == 1 && launched[i].status == 0, e);
  CHECK(r.calls == 1 && r.status == 0 && r.bytes == sizeof host, e);
  int ok = 1;
  for (int i = 0; i < 64; ++i) ok = ok && r.values[i] == 16 * i;
  CHECK(ok, e);

  int back[64];
  memset(back, 0, sizeof back);
  CHECK(uvcl_read_sync(e, buf, 0, back, sizeof back) == 0, e);
  CHECK(back[63] == 16 * 63, e);

  uvcl_stats_t s;
  CHECK(uvcl_stats(e, &s, sizeof s) == 0, e);
  CHECK(s.launches == 4 && s.writes == 1 && s.live_buffers == 1, e);
  /* An older caller's smaller struct gets its prefix only; a newer one's
     fields beyond this library's are zeroed. */
  uint64_t older[3] = {7, 7, 7};
  CHECK(uvcl_stats(e, (uvcl_stats_t*)older, 2 * sizeof(uint64_t)) == 0, e);
  CHECK(older[0] == 4 && older[1] == 1 && older[2] == 7, e);
  struct {
    uvcl_stats_t known;
    uint64_t later[2];
  } newer;
  memset(&newer, 0xff, sizeof newer);
  CHECK(uvcl_stats(e, (uvcl_stats_t*)&newer, sizeof newer) == 0, e);
  CHECK(newer.known.launches == 4 && newer.later[0] == 0 && newer.later[1] == 0, e);
  CHECK(uvcl_stats(e, &s, 0) == UVCL_EINVALID_ARGUMENT && uvcl_stats(e, &s, 12) == UVCL_EINVALID_ARGUMENT, e);

  CHECK(uvcl_buffer_release(e, buf) == 0, e);
  CHECK(uvcl_kernel_release(e, k) == 0, e);
  CHECK(uvcl_program_release(e, prog) == 0, e);
  uvcl_engine_destroy(e);
}

/* Errors at the API edge: a negative status, a clear message, and the
 * callback never called. */
static void test_errors(void) {
  uvcl_engine_t* e = make_engine(NULL);
  CHECK(e != NULL, e);
  if (!e) return;
  uvcl_program_t prog = 0;
  uvcl_kernel_t k = 0;
  CHECK(twice_kernel(e, &prog, &k) == 0, e);
  uvcl_buffer_t buf = 0;
  CHECK(uvcl_buffer_allocate(e, 0, 256, &buf) == 0, e);
  CHECK(uvcl_buffer_release(e, buf) == 0, e);

  done_t d = {0};
  int v = 1;
  /* A released buffer. */
  int rc = uvcl_write(e, buf, 0, &v, sizeof v, UVCL_WRITE_COPY, on_done, &d);
  CHECK(rc == UVCL_EINVALID_ARGUMENT, e);
  CHECK(strncmp(uvcl_engine_last_error(e), "InvalidArgument: write: ", 24) == 0, e);
  CHECK(uvcl_buffer_release(e, buf) == UVCL_EINVALID_ARGUMENT, e);
  /* An id never made. */
  CHECK(uvcl_buffer_release(e, 123456) == UVCL_EINVALID_ARGUMENT, e);
  CHECK(strstr(uvcl_engine_last_error(e), "123456") != NULL, e);
  read_t r;
  memset(&r, 0, sizeof r);
  CHECK(uvcl_read(e, 123456, 0, 4, on_read, &r) == UVCL_EINVALID_ARGUMENT, e);
  CHECK(uvcl_read(e, buf, 0, 4, NULL, NULL) == UVCL_EINVALID_ARGUMENT, e); /* a callback is required */
  CHECK(uvcl_buffer_allocate(e, 0, 0, &buf) == UVCL_EINVALID_ARGUMENT, e);
  CHECK(strstr(uvcl_engine_last_error(e), "allocate") != NULL, e);
  CHECK(uvcl_buffer_allocate(e, 7, 64, &buf) < 0, e);

  /* Launches: a stale kernel, a wrong argument list, a bad descriptor. */
  uvcl_buffer_t live = 0;
  CHECK(uvcl_buffer_allocate(e, 0, 256, &live) == 0, e);
  uvcl_arg_t args[2];
  args[0] = uvcl_arg_buffer(live);
  args[1] = uvcl_arg_uint(64);
  uvcl_launch_t l;
  memset(&l, 0, sizeof l);
  l.kernel = k + 1000;
  l.args = args;
  l.arg_count = 2;
  l.dims = 1;
  l.global[0] = 64;
  CHECK(uvcl_launch(e, &l, on_done, &d) == UVCL_EINVALID_ARGUMENT, e);
  CHECK(strstr(uvcl_engine_last_error(e), "kernel") != NULL, e);
  l.kernel = k;
  l.arg_count = 1;
  CHECK(uvcl_launch(e, &l, on_done, &d) == UVCL_EINCORRECT_KERNEL_ARG, e);
  CHECK(uvcl_check_launch(e, &l) == UVCL_EINCORRECT_KERNEL_ARG, e);
  l.arg_count = 2;
  args[1] = uvcl_arg_float(1.0f); /* a float where a uint is declared: the same size, a different type */
  args[0] = uvcl_arg_uint(3);     /* a scalar where a buffer goes */
  CHECK(uvcl_launch(e, &l, on_done, &d) == UVCL_EINCORRECT_KERNEL_ARG, e);
  args[0] = uvcl_arg_buffer(live);
  args[1] = uvcl_arg_uint(64);
  l.dims = 4;
  CHECK(uvcl_launch(e, &l, on_done, &d) == UVCL_EINVALID_ARGUMENT, e);
  CHECK(strstr(uvcl_engine_last_error(e), "dims 4") != NULL, e);
  CHECK(uvcl_launch(e, NULL, on_done, &d) == UVCL_EINVALID_ARGUMENT, e);
  l.dims = 1;
  l.local[0] = 48; /* 64 is not a multiple of 48 */
  CHECK(uvcl_launch(e, &l, on_done, &d) < 0, e);
  CHECK(uvcl_timed_launch(e, &l, NULL, NULL) == UVCL_EINVALID_ARGUMENT, e);

  /* A build error carries the build log; the callback-free sync form. */
  uvcl_program_t bad = 0;
  CHECK(uvcl_compile_sync(e, 0, "__kernel void broken( { }", NULL, UVCL_BUILD_OPTIONS_ADD, &bad) ==
            UVCL_EKERNEL_COMPILATION, e);
  CHECK(strstr(uvcl_engine_last_error(e), "KernelCompilation: ") != NULL, e);
  CHECK(uvcl_kernel_create(e, prog, "nope", NULL, 0, &k) == UVCL_EKERNEL_COMPILATION, e);
  CHECK(strstr(uvcl_engine_last_error(e), "nope") != NULL, e);
  /* Popping with no scope open. */
  CHECK(uvcl_pop_error_scope(e, on_done, &d) == UVCL_EINVALID_ARGUMENT, e);
  /* run_until refuses to wait for what cannot happen. */
  CHECK(uvcl_run_until(e, done_called, &d) == UVCL_EINVALID_ARGUMENT, e);

  CHECK(uvcl_finish(e) == 0, e);
  CHECK(d.calls == 0, e); /* no failed call called back */
  CHECK(r.calls == 0, e);
  uvcl_engine_destroy(e);
}

/* A device-side failure reaches the callbacks of the work it concerns. A
 * build that fails fails its compile callback (asynchronously). */
static void test_async_failure(void) {
  uvcl_engine_t* e = make_engine(NULL);
  CHECK(e != NULL, e);
  if (!e) return;
  done_t built = {0};
  uvcl_program_t prog = 0;
  CHECK(uvcl_compile(e, 0, "__kernel void broken( { }", NULL, UVCL_BUILD_OPTIONS_ADD, on_done, &built, &prog) == 0,
        e);
  CHECK(uvcl_run_until(e, done_called, &built) == 0, e);
  CHECK(built.calls == 1 && built.status == UVCL_EKERNEL_COMPILATION, e);
  CHECK(strstr(built.message, "KernelCompilation: ") == built.message, e);
  CHECK(uvcl_program_release(e, prog) == 0, e);
  uvcl_engine_destroy(e);
}

/* fill, copy, pinned host memory and read_into; kernel parameters. */
static void test_transfers(void) {
  uvcl_engine_t* e = make_engine(NULL);
  CHECK(e != NULL, e);
  if (!e) return;
  uvcl_buffer_t a = 0, b = 0;
  CHECK(uvcl_buffer_allocate(e, 0, 4096, &a) == 0, e);
  CHECK(uvcl_buffer_allocate(e, 0, 4096, &b) == 0, e);
  const unsigned pattern = 0x01020304u;
  done_t filled = {0}, copied = {0}, into = {0};
  CHECK(uvcl_fill(e, a, &pattern, sizeof pattern, 0, 4096, on_done, &filled) == 0, e);
  CHECK(uvcl_fill(e, a, &pattern, 3, 0, 4096, on_done, &filled) == UVCL_EINVALID_ARGUMENT, e);
  CHECK(uvcl_copy(e, a, 0, b, 0, 4096, on_done, &copied) == 0, e);
  uvcl_host_memory_t hm;
  CHECK(uvcl_host_alloc(e, 0, 4096, &hm) == 0, e);
  CHECK(hm.data != NULL && hm.bytes == 4096, e);
  CHECK(uvcl_read_into(e, b, 0, hm.data, 4096, on_done, &into) == 0, e);
  CHECK(uvcl_host_release(e, &hm) == 0, e); /* deferred: the read is in flight */
  uvcl_stats_t s;
  CHECK(uvcl_stats(e, &s, sizeof s) == 0 && s.host_memory_bytes > 0, e);
  CHECK(uvcl_finish(e) == 0, e);
  CHECK(filled.calls == 1 && copied.calls == 1 && into.calls == 1, e);
  CHECK(filled.status == 0 && copied.status == 0 && into.status == 0, e);
  CHECK(uvcl_stats(e, &s, sizeof s) == 0 && s.host_memory_bytes == 0, e);
  unsigned last = 0;
  CHECK(uvcl_read_sync(e, b, 4092, &last, 4) == 0 && last == pattern, e);
  CHECK(uvcl_host_release(e, &hm) == UVCL_EINVALID_ARGUMENT, e);

  uvcl_program_t prog = 0;
  uvcl_kernel_t k = 0;
  CHECK(twice_kernel(e, &prog, &k) == 0, e);
  size_t n = 0;
  CHECK(uvcl_kernel_params(e, k, NULL, 0, &n) == 0 && n == 2, e);
  uvcl_kernel_param_t p[2];
  CHECK(uvcl_kernel_params(e, k, p, 2, &n) == 0, e);
  CHECK(strcmp(p[0].name, "a") == 0 && p[0].access == UVCL_ACCESS_WRITTEN, e);
  CHECK(strcmp(p[1].name, "n") == 0 && p[1].access == UVCL_ACCESS_SCALAR && p[1].scalar_size == 4, e);
  CHECK(p[0].unsupported == NULL, e);
  CHECK(p[0].writes_each_item == 0, e); /* a[i] *= 2 reads it */
  /* A declared access of the wrong kind. */
  const uvcl_param_access wrong[2] = {UVCL_ACCESS_SCALAR, UVCL_ACCESS_SCALAR};
  uvcl_kernel_t k2 = 0;
  CHECK(uvcl_kernel_create(e, prog, "twice", wrong, 2, &k2) == UVCL_EINCORRECT_KERNEL_ARG, e);
  const uvcl_param_access right[2] = {UVCL_ACCESS_WRITE_ONLY, UVCL_ACCESS_SCALAR};
  CHECK(uvcl_kernel_create(e, prog, "twice", right, 2, &k2) == 0, e);
  CHECK(uvcl_half_to_float(uvcl_float_to_half(1.5f)) == 1.5f, e);
  uvcl_engine_destroy(e);
}

typedef struct {
  int calls;
  int status;
  uint64_t device_ns, wall_ns;
} timing_t;

static void on_timed(int status, const char* message, uint64_t device_ns, uint64_t wall_ns, void* user_data) {
  timing_t* t = (timing_t*)user_data;
  (void)message;
  t->calls++;
  t->status = status;
  t->device_ns = device_ns;
  t->wall_ns = wall_ns;
}

typedef struct {
  int entries;
  int launches;
} schedule_t;

static void on_schedule(const uvcl_schedule_entry_t* entry, void* user_data) {
  schedule_t* s = (schedule_t*)user_data;
  s->entries++;
  if (strcmp(entry->op, "launch") == 0 && entry->write_count == 1) s->launches++;
}

/* Timed launches, error scopes, drains, the schedule recorder, tracing. */
static void test_timed_scopes_drain(void) {
  uvcl_engine_t* e = make_engine("{\"opencl\": {\"profile\": true}}");
  CHECK(e != NULL, e);
  if (!e) return;
  uvcl_program_t prog = 0;
  uvcl_kernel_t k = 0;
  CHECK(twice_kernel(e, &prog, &k) == 0, e);
  uvcl_buffer_t buf = 0;
  CHECK(uvcl_buffer_allocate(e, 0, 256, &buf) == 0, e);
  const int zero = 0;
  CHECK(uvcl_fill(e, buf, &zero, sizeof zero, 0, 256, NULL, NULL) == 0, e);
  schedule_t sched = {0};
  CHECK(uvcl_set_schedule_recorder(e, on_schedule, &sched) == 0, e);
  CHECK(uvcl_set_tracing(e, 1) == 0, e);

  uvcl_arg_t args[2];
  args[0] = uvcl_arg_buffer(buf);
  args[1] = uvcl_arg_uint(1); /* the group count, read from this argument */
  uvcl_launch_t l;
  memset(&l, 0, sizeof l);
  l.kernel = k;
  l.args = args;
  l.arg_count = 2;
  l.dims = 1;
  l.global_from_arg[0] = 2; /* argument 1 */
  l.local[0] = 64;
  l.tag = 7;
  timing_t t = {0};
  CHECK(uvcl_timed_launch(e, &l, on_timed, &t) == 0, e);

  uvcl_push_error_scope(e);
  done_t launched = {0}, scope = {0}, drained = {0};
  CHECK(uvcl_launch(e, &l, on_done, &launched) == 0, e);
  CHECK(uvcl_pop_error_scope(e, on_done, &scope) == 0, e);
  CHECK(uvcl_drain(e, on_done, &drained) == 0, e);
  CHECK(uvcl_run_until(e, done_called, &drained) == 0, e);
  CHECK(t.calls == 1 && t.status == 0 && t.wall_ns > 0, e);
  CHECK(launched.calls == 1 && scope.calls == 1 && drained.calls == 1, e);
  CHECK(scope.status == 0 && drained.status == 0, e);
  CHECK(uvcl_set_schedule_recorder(e, NULL, NULL) == 0, e);
  CHECK(sched.entries >= 2 && sched.launches == 2, e);
  const char* trace = uvcl_trace_json(e);
  CHECK(trace != NULL && strstr(trace, "traceEvents") != NULL, e);
  uvcl_engine_destroy(e);
}

/* On the caller's loop, closed without blocking. */
typedef struct {
  int closed;
  read_t read;
} loop_state_t;

static void on_closed(void* user_data) { ((loop_state_t*)user_data)->closed++; }

static void test_callers_loop_and_close(void) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  uvcl_engine_t* e = NULL;
  int rc = uvcl_engine_create(&e, NULL, &loop);
  CHECK(rc == 0, e);
  if (rc != 0) {
    uvcl_engine_destroy(e);
    uv_loop_close(&loop);
    return;
  }
  CHECK(uvcl_engine_loop(e) == &loop, e);
  loop_state_t st;
  memset(&st, 0, sizeof st);
  uvcl_buffer_t buf = 0;
  CHECK(uvcl_buffer_allocate(e, 0, 64, &buf) == 0, e);
  const int seven = 7;
  CHECK(uvcl_fill(e, buf, &seven, sizeof seven, 0, 64, NULL, NULL) == 0, e);
  CHECK(uvcl_read(e, buf, 0, 64, on_read, &st.read) == 0, e);
  CHECK(uv_run(&loop, UV_RUN_DEFAULT) == 0, e); /* returns once the engine is idle */
  CHECK(st.read.calls == 1 && st.read.status == 0 && st.read.values[15] == 7, e);

  CHECK(uvcl_close(e, NULL, NULL) == UVCL_EINVALID_ARGUMENT, e); /* on_closed is required */
  CHECK(uvcl_close(e, on_closed, &st) == 0, e);
  CHECK(uvcl_buffer_allocate(e, 0, 64, &buf) == UVCL_ECANCELLED, e);
  CHECK(uvcl_close(e, on_closed, &st) < 0, e); /* a second close is refused */
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(st.closed == 1, e);
  uvcl_engine_destroy(e);
  CHECK(uv_loop_close(&loop) == 0, NULL);
}

/* A callback that destroys the engine: the handle goes once the call that
 * ran the callback returns. */
typedef struct {
  uvcl_engine_t* engine;
  int calls;
} destroyer_t;

static void destroy_in_callback(int status, const char* message, const void* data, size_t bytes, void* user_data) {
  destroyer_t* d = (destroyer_t*)user_data;
  (void)status;
  (void)message;
  (void)data;
  (void)bytes;
  d->calls++;
  uvcl_engine_destroy(d->engine);
}

static void test_destroy_in_callback(void) {
  uvcl_engine_t* e = make_engine(NULL);
  CHECK(e != NULL, e);
  if (!e) return;
  uvcl_buffer_t buf = 0;
  CHECK(uvcl_buffer_allocate(e, 0, 64, &buf) == 0, e);
  destroyer_t d = {e, 0};
  CHECK(uvcl_read(e, buf, 0, 64, destroy_in_callback, &d) == 0, e);
  done_t never = {0};
  int rc = uvcl_run_until(e, done_called, &never); /* e is gone once this returns */
  CHECK(rc == UVCL_ECANCELLED, NULL);
  CHECK(d.calls == 1, NULL);
}

/* ------------------------------------------------------------------------ */

typedef struct {
  const char* name;
  void (*fn)(void);
} test_case_t;

int main(void) {
  const test_case_t cases[] = {
      {"CApi.StatusNames", test_status_names},
      {"CApi.NullAndFailedHandles", test_null_and_failed_handles},
      {"CApi.Devices", test_devices},
      {"CApi.WriteLaunchRead", test_write_launch_read},
      {"CApi.ErrorsNeverCallBack", test_errors},
      {"CApi.AsyncFailureReachesTheCallback", test_async_failure},
      {"CApi.Transfers", test_transfers},
      {"CApi.TimedScopesDrain", test_timed_scopes_drain},
      {"CApi.CallersLoopAndClose", test_callers_loop_and_close},
      {"CApi.DestroyInCallback", test_destroy_in_callback},
  };
  const size_t n = sizeof cases / sizeof cases[0];
  int failed = 0;
  for (size_t i = 0; i < n; ++i) {
    printf("[ RUN      ] %s\n", cases[i].name);
    fflush(stdout);
    g_failed = 0;
    const uint64_t start = uv_hrtime();
    cases[i].fn();
    const unsigned long long ms = (unsigned long long)((uv_hrtime() - start) / 1000000u);
    if (g_failed)
      printf("[  FAILED  ] %s (%llu ms, %d failed checks)\n", cases[i].name, ms, g_failed);
    else
      printf("[       OK ] %s (%llu ms)\n", cases[i].name, ms);
    failed += g_failed != 0;
  }
  printf("%d of %zu C API cases failed\n", failed, n);
  return failed == 0 ? 0 : 1;
}
