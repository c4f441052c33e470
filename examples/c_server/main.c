/* c_server — a small C libuv program using uvcl's C API (uvcl/uvcl.h).
 *
 * The program owns the loop; uvcl joins it. A repeating timer accepts one
 * request per tick: a fill of the request's buffer with its number, a
 * launch that squares every element, and a read whose callback checks the
 * result and releases the buffer. After the last answer the timer stops and
 * the engine is closed without blocking (uvcl_close); uv_run returns once
 * every handle is closed, and uv_loop_close must return 0.
 *
 *   c_server [REQUESTS]     (default 16)
 *
 * Exit 0: every result right and the loop closed cleanly; 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include <uvcl/uvcl.h>

#define ITEMS 1024

static const char* const kSource =
    "__kernel void square(__global uint* x) { size_t i = get_global_id(0); x[i] = x[i] * x[i]; }\n";

typedef struct {
  uv_loop_t loop;
  uv_timer_t tick;
  uvcl_engine_t* engine;
  uvcl_kernel_t kernel;
  int requests, sent, answered, right;
} server_t;

typedef struct {
  server_t* server;
  unsigned number;
  uvcl_buffer_t buffer;
} request_t;

static void on_closed(void* user_data) { printf("c_server: engine closed\n"); (void)user_data; }

static void on_answer(int status, const char* message, const void* data, size_t bytes, void* user_data) {
  request_t* r = (request_t*)user_data;
  server_t* s = r->server;
  const unsigned* x = (const unsigned*)data;
  if (status != 0) fprintf(stderr, "c_server: request %u: %s\n", r->number, message);
  else if (bytes == ITEMS * sizeof(unsigned) && x[0] == r->number * r->number && x[ITEMS - 1] == x[0]) s->right++;
  uvcl_buffer_release(s->engine, r->buffer);  /* freed once its last use is done */
  free(r);
  if (++s->answered == s->requests && uvcl_close(s->engine, on_closed, s) != 0)
    fprintf(stderr, "c_server: close: %s\n", uvcl_engine_last_error(s->engine));
}

static void on_tick(uv_timer_t* t) {
  server_t* s = (server_t*)t->data;
  request_t* r = (request_t*)calloc(1, sizeof *r);
  r->server = s;
  r->number = (unsigned)++s->sent;
  uvcl_arg_t arg;
  uvcl_launch_t l;
  memset(&l, 0, sizeof l);
  int rc = uvcl_buffer_allocate(s->engine, 0, ITEMS * sizeof(unsigned), &r->buffer);
  if (rc == 0)
    rc = uvcl_fill(s->engine, r->buffer, &r->number, sizeof r->number, 0, ITEMS * sizeof(unsigned), NULL, NULL);
  arg = uvcl_arg_buffer(r->buffer);
  l.kernel = s->kernel;
  l.args = &arg;
  l.arg_count = 1;
  l.dims = 1;
  l.global[0] = ITEMS;
  if (rc == 0) rc = uvcl_launch(s->engine, &l, NULL, NULL);
  if (rc == 0) rc = uvcl_read(s->engine, r->buffer, 0, ITEMS * sizeof(unsigned), on_answer, r);
  if (rc != 0) {
    fprintf(stderr, "c_server: request %u: %s\n", r->number, uvcl_engine_last_error(s->engine));
    exit(1);
  }
  if (s->sent == s->requests) uv_close((uv_handle_t*)t, NULL);
}

int main(int argc, char** argv) {
  server_t s;
  memset(&s, 0, sizeof s);
  s.requests = argc > 1 ? atoi(argv[1]) : 16;
  if (s.requests < 1) s.requests = 1;
  uv_loop_init(&s.loop);
  uvcl_program_t program;
  if (uvcl_engine_create(&s.engine, NULL, &s.loop) != 0 ||
      uvcl_compile_sync(s.engine, 0, kSource, NULL, UVCL_BUILD_OPTIONS_ADD, &program) != 0 ||
      uvcl_kernel_create(s.engine, program, "square", NULL, 0, &s.kernel) != 0) {
    fprintf(stderr, "c_server: %s\n", uvcl_engine_last_error(s.engine));
    uvcl_engine_destroy(s.engine);
    uv_run(&s.loop, UV_RUN_DEFAULT);
    uv_loop_close(&s.loop);
    return 1;
  }
  uv_timer_init(&s.loop, &s.tick);
  s.tick.data = &s;
  uv_timer_start(&s.tick, on_tick, 1, 1);

  uv_run(&s.loop, UV_RUN_DEFAULT);  /* returns once the timer and the engine are closed */
  uvcl_engine_destroy(s.engine);
  const int closed = uv_loop_close(&s.loop);
  printf("c_server: %d/%d results\n", s.right, s.requests);
  printf("c_server: uv_loop_close: %d\n", closed);
  return s.right == s.requests && closed == 0 ? 0 : 1;
}
