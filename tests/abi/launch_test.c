// Kernel launch on the host device: real host kernels packed with accel-pack
// into an .axe, loaded and launched (vector add; a reduction across
// work-groups), results checked against a reference computed here;
// signature mismatches rejected at enqueue; kernel failures poisoning the
// stream; run-time kernels registered with accel_kernel_register.
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "fault_driver.h"
#include "test_support.h"

typedef struct fixture {
  test_env_t *env;
  char dir[64];
  accel_executable_t *exe;
  accel_stream_t *stream;
} fixture_t;

static fixture_t g;

static accel_buffer_t *alloc_buffer(uint64_t size) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = size};
  accel_buffer_t *b;
  assert_accel_ok(accel_buffer_alloc(g.env->device, &d, &b));
  return b;
}

static void *host(accel_buffer_t *b) {
  void *p;
  assert_accel_ok(accel_buffer_host_pointer(b, &p));
  return p;
}

static accel_kernel_t *kernel(const char *name) {
  accel_kernel_t *k;
  assert_accel_ok(accel_executable_kernel(g.exe, name, &k));
  return k;
}

// vector_add over random lengths (partial last work-group included) matches
// a + b computed on the host.
static void test_launch_vector_add_from_packed_executable(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 8; ++round) {
    uint32_t n = (uint32_t)test_rng_range(&rng, 1, 100000);
    uint64_t bytes = (uint64_t)n * sizeof(float);
    accel_buffer_t *a = alloc_buffer(bytes), *b = alloc_buffer(bytes),
                   *out = alloc_buffer(bytes);
    float *pa = host(a), *pb = host(b), *po = host(out);
    float *want = malloc(bytes);
    for (uint32_t i = 0; i < n; ++i) {
      pa[i] = (float)(int32_t)(test_rng_next(&rng) % 2001) - 1000.0f;
      pb[i] = (float)(test_rng_next(&rng) % 1000) / 8.0f;
      want[i] = pa[i] + pb[i];
    }
    accel_launch_binding_t bind[3] = {{.buffer = a}, {.buffer = b},
                                      {.buffer = out}};
    accel_launch_desc_t d = {.struct_size = sizeof(d),
                             .workgroup_count = {(n + 255) / 256, 1, 1},
                             .binding_count = 3, .bindings = bind,
                             .constants_size = 4, .constants = &n};
    assert_accel_ok(accel_launch(g.stream, kernel("vector_add"), &d));
    // The launch holds its own references.
    accel_buffer_release(a);
    accel_buffer_release(b);
    assert_accel_ok(accel_stream_synchronize(g.stream, ACCEL_TIMEOUT_INFINITE));
    for (uint32_t i = 0; i < n; ++i) {
      if (po[i] != want[i]) {
        print_error("n %u: out[%u] = %g, want %g\n", n, i, po[i], want[i]);
        fail();
      }
    }
    free(want);
    accel_buffer_release(out);
  }
}

// reduce_sum combines partial sums across work-groups (the last group to
// arrive adds them); the result equals the same summation order done here,
// bit for bit, and a repeated launch gives it again.
static void test_launch_reduction_across_workgroups(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 6; ++round) {
    uint32_t n = (uint32_t)test_rng_range(&rng, 1, 300000);
    uint32_t per = (uint32_t)test_rng_range(&rng, 64, 8192);
    uint32_t groups = (n + per - 1) / per;
    accel_buffer_t *in = alloc_buffer((uint64_t)n * 4);
    accel_buffer_t *out = alloc_buffer(8);
    accel_buffer_t *scratch = alloc_buffer(64 + 8ull * groups);
    // The kernel's arrival counter starts at zero; allocators reuse memory
    // without clearing it (ACCEL_BUFFER_FLAG_ZERO would).
    memset(host(scratch), 0, 64);
    float *pi = host(in);
    for (uint32_t i = 0; i < n; ++i) {
      pi[i] = (float)((double)(test_rng_next(&rng) % 1000000) / 1000.0 - 500.0);
    }
    double want = 0;
    for (uint32_t gi = 0; gi < groups; ++gi) {
      double part = 0;
      for (uint64_t i = (uint64_t)gi * per; i < n && i < (uint64_t)(gi + 1) * per;
           ++i) {
        part += pi[i];
      }
      want += part;
    }
    uint32_t c[2] = {n, per};
    accel_launch_binding_t bind[3] = {{.buffer = in}, {.buffer = out},
                                      {.buffer = scratch}};
    accel_launch_desc_t d = {.struct_size = sizeof(d),
                             .workgroup_count = {groups, 1, 1},
                             .binding_count = 3, .bindings = bind,
                             .constants_size = 8, .constants = c};
    for (int rep = 0; rep < 2; ++rep) {
      *(double *)host(out) = NAN;
      assert_accel_ok(accel_launch(g.stream, kernel("reduce_sum"), &d));
      assert_accel_ok(
          accel_stream_synchronize(g.stream, ACCEL_TIMEOUT_INFINITE));
      double got = *(double *)host(out);
      if (got != want) {
        print_error("n %u per %u groups %u: got %.17g want %.17g\n", n, per,
                    groups, got, want);
        fail();
      }
    }
    accel_buffer_release(in);
    accel_buffer_release(out);
    accel_buffer_release(scratch);
  }
}

// Launches that do not match the kernel's signature fail at enqueue with
// INVALID_ARGUMENT and a message; nothing runs.
static void test_launch_rejects_signature_mismatches(void **state) {
  (void)state;
  accel_kernel_t *k = kernel("vector_add");
  accel_buffer_t *a = alloc_buffer(1024), *small = alloc_buffer(2);
  accel_launch_binding_t bind[3] = {{.buffer = a}, {.buffer = a},
                                    {.buffer = a}};
  uint32_t n = 16;
  accel_launch_desc_t good = {.struct_size = sizeof(good),
                              .workgroup_count = {1, 1, 1},
                              .binding_count = 3, .bindings = bind,
                              .constants_size = 4, .constants = &n};
  accel_launch_desc_t d = good;
  d.binding_count = 2;
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "declares 3"));
  d = good;
  d.constants_size = 8;
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  d = good;
  d.workgroup_count[1] = 0;
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  d = good;
  d.workgroup_count[0] = d.workgroup_count[1] = d.workgroup_count[2] = 1u << 20;
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  d = good;
  d.struct_size = 8;
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_launch_binding_t b2[3] = {{.buffer = a}, {.buffer = small},
                                  {.buffer = a}};
  d = good;
  d.bindings = b2;
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "declares at least 4"));
  b2[1] = (accel_launch_binding_t){.buffer = a, .offset = 2};  // misaligned a?
  b2[0] = (accel_launch_binding_t){.buffer = a, .offset = 2};
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "aligned"));
  b2[0] = (accel_launch_binding_t){.buffer = a, .offset = 1000, .length = 100};
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  b2[0] = (accel_launch_binding_t){.buffer = a, .offset = 2000};
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  b2[0] = (accel_launch_binding_t){.buffer = NULL};
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  // A read-only weight cannot be bound where the kernel writes.
  accel_buffer_t *w;
  assert_accel_ok(accel_executable_weight_buffer(g.exe, "ones", &w));
  accel_launch_binding_t b3[3] = {{.buffer = w}, {.buffer = a},
                                  {.buffer = w}};
  d = good;
  d.bindings = b3;
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "is read-only"));
  // Every other write path refuses the weight too, naming it, and reading
  // it stays allowed (issue 15: a fill of a file-mapped weight killed the
  // stream's worker; one of an in-memory image overwrote it).
  assert_accel_status(accel_stream_fill(g.stream, w, 0, 4, 0, 4),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "\"weight ones\""));
  assert_non_null(strstr(accel_last_error(), "is read-only"));
  assert_accel_status(accel_stream_copy(g.stream, w, 0, a, 0, 4),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "is read-only"));
  uint32_t word = 7;
  assert_accel_status(accel_stream_copy_from_host(g.stream, w, 0, &word, 4),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_stream_copy(g.stream, a, 0, w, 0, 4));
  assert_accel_ok(accel_stream_synchronize(g.stream, ACCEL_TIMEOUT_INFINITE));
  // A freed buffer cannot be bound: the launch fails at enqueue, naming it.
  accel_buffer_desc_t fd = {.struct_size = sizeof(fd), .size_bytes = 4096};
  accel_buffer_t *freed;
  assert_accel_ok(accel_buffer_alloc(g.env->device, &fd, &freed));
  assert_accel_ok(accel_buffer_free(freed));
  accel_launch_binding_t b4[3] = {{.buffer = freed}, {.buffer = a},
                                  {.buffer = a}};
  d = good;
  d.bindings = b4;
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "was freed"));
  assert_accel_status(accel_launch(g.stream, k, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_launch(NULL, k, &good),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  // Nothing was enqueued by the failures: the stream is healthy.
  assert_accel_ok(accel_stream_query(g.stream));
  accel_buffer_release(w);
  accel_buffer_release(a);
  accel_buffer_release(small);
}

// A weight mapped from the executable is bound read-only without a copy.
static void test_launch_reads_mapped_weights(void **state) {
  (void)state;
  accel_buffer_t *w, *out = alloc_buffer(64 * 4);
  assert_accel_ok(accel_executable_weight_buffer(g.exe, "ones", &w));
  uint32_t n = 64;
  accel_launch_binding_t bind[3] = {{.buffer = w}, {.buffer = w},
                                    {.buffer = out}};
  accel_launch_desc_t d = {.struct_size = sizeof(d),
                           .workgroup_count = {1, 1, 1}, .binding_count = 3,
                           .bindings = bind, .constants_size = 4,
                           .constants = &n};
  assert_accel_ok(accel_launch(g.stream, kernel("vector_add"), &d));
  accel_buffer_release(w);
  assert_accel_ok(accel_stream_synchronize(g.stream, ACCEL_TIMEOUT_INFINITE));
  float *po = host(out);
  for (int i = 0; i < 64; ++i) {
    assert_true(po[i] == 2.0f);
  }
  accel_buffer_release(out);
}

// A kernel that returns non-zero fails the stream with ABORTED and a message
// naming the kernel, the work-group and the value; later work does not run.
static void test_launch_kernel_failure_poisons_stream(void **state) {
  test_env_t *env = *state;
  accel_stream_t *s;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  uint32_t at = 37;
  accel_launch_desc_t d = {.struct_size = sizeof(d),
                           .workgroup_count = {64, 2, 1},
                           .constants_size = 4, .constants = &at};
  assert_accel_ok(accel_launch(s, kernel("fail_at"), &d));
  accel_status_t st = accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE);
  assert_int_equal(st, ACCEL_ERROR_ABORTED);
  assert_non_null(strstr(accel_last_error(), "kernel \"fail_at\" work-group (37,"));
  assert_non_null(strstr(accel_last_error(), "returned 7"));
  assert_int_equal(accel_launch(s, kernel("fail_at"), &d), ACCEL_ERROR_ABORTED);
  accel_stream_destroy(s);
}

typedef struct scale_constants {
  float factor;
  uint32_t n;
} scale_constants_t;

static int32_t scale_kernel(const accel_kernel_dispatch_t *d,
                            const accel_kernel_workgroup_t *wg) {
  const scale_constants_t *c = d->constants;
  const float *in = d->bindings[0].data;
  float *out = d->bindings[1].data;
  uint32_t per = d->workgroup_size[0];
  uint64_t gid = (uint64_t)wg->id[1] * d->workgroup_count[0] + wg->id[0];
  for (uint64_t i = gid * per; i < (gid + 1) * per && i < c->n; ++i) {
    out[i] = in[i] * c->factor;
  }
  return 0;
}

// A run-time kernel goes through the same ABI and checks as a loaded one,
// including 2-D grids spread over the device's threads.
static void test_kernel_register_runs_with_same_abi_and_checks(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  accel_kernel_binding_decl_t decl[2] = {
      {.name = "in", .access = ACCEL_KERNEL_ACCESS_READ, .alignment = 4},
      {.name = "out", .access = ACCEL_KERNEL_ACCESS_WRITE, .alignment = 4}};
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "scale", .fn = scale_kernel,
                            .binding_count = 2, .bindings = decl,
                            .constants_size = sizeof(scale_constants_t),
                            .workgroup_size = {128}};
  accel_kernel_t *k;
  assert_accel_ok(accel_kernel_register(env->device, &kd, &k));
  accel_kernel_info_t ki = {.struct_size = sizeof(ki)};
  assert_accel_ok(accel_kernel_info(k, &ki));
  assert_string_equal(ki.name, "scale");
  assert_int_equal(ki.workgroup_size[1], 1);
  uint32_t n = (uint32_t)test_rng_range(&rng, 1000, 200000);
  accel_buffer_t *in = alloc_buffer(n * 4ull), *out = alloc_buffer(n * 4ull);
  float *pi = host(in);
  for (uint32_t i = 0; i < n; ++i) {
    pi[i] = (float)(test_rng_next(&rng) % 4096);
  }
  uint32_t groups = (n + 127) / 128;
  scale_constants_t c = {.factor = 0.5f, .n = n};
  accel_launch_binding_t bind[2] = {{.buffer = in}, {.buffer = out}};
  accel_launch_desc_t d = {.struct_size = sizeof(d),
                           .workgroup_count = {16, (groups + 15) / 16, 1},
                           .binding_count = 2, .bindings = bind,
                           .constants_size = sizeof(c), .constants = &c};
  assert_accel_ok(accel_launch(g.stream, k, &d));
  accel_kernel_release(k);  // the launch keeps it
  assert_accel_ok(accel_stream_synchronize(g.stream, ACCEL_TIMEOUT_INFINITE));
  float *po = host(out);
  for (uint32_t i = 0; i < n; ++i) {
    assert_true(po[i] == pi[i] * 0.5f);
  }
  d.constants_size = 4;
  assert_accel_ok(accel_kernel_register(env->device, &kd, &k));
  assert_accel_status(accel_launch(g.stream, k, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_kernel_release(k);
  accel_buffer_release(in);
  accel_buffer_release(out);

  kd.abi_version = (ACCEL_KERNEL_ABI_VERSION_MAJOR + 1u) << 16;
  assert_accel_status(accel_kernel_register(env->device, &kd, &k),
                      ACCEL_ERROR_VERSION);
  kd.abi_version = ACCEL_KERNEL_ABI_VERSION;
  kd.fn = NULL;
  assert_accel_status(accel_kernel_register(env->device, &kd, &k),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  kd.fn = scale_kernel;
  decl[1].access = 0;
  assert_accel_status(accel_kernel_register(env->device, &kd, &k),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  decl[1].access = ACCEL_KERNEL_ACCESS_WRITE;
  kd.name = "";
  assert_accel_status(accel_kernel_register(env->device, &kd, &k),
                      ACCEL_ERROR_INVALID_ARGUMENT);
}

// Prints one line per work-group; work-group 2 asserts (then returns 0,
// which must not hide the assertion).
static int32_t talk_kernel(const accel_kernel_dispatch_t *d,
                           const accel_kernel_workgroup_t *wg) {
  if (d->struct_size < offsetof(accel_kernel_dispatch_t, message) +
                           sizeof(d->message) ||
      d->message == NULL) {
    return 99;  // no channel: fails the test through the return value
  }
  char text[64];
  snprintf(text, sizeof(text), "hello from %u", wg->id[0]);
  if (d->message(d, wg, ACCEL_KERNEL_MESSAGE_PRINT, text) != 0 ||
      d->message(d, wg, 77, "unknown kind") != -1) {
    return 98;
  }
  if (wg->id[0] == 2 && d->workgroup_count[0] > 1) {
    d->message(d, wg, ACCEL_KERNEL_MESSAGE_ASSERT, "id 2 < 2");
  }
  if (d->workgroup_count[0] == 1) {
    d->message(d, wg, ACCEL_KERNEL_MESSAGE_ASSERT, "single group");
  }
  return 0;
}

// Runs |launch| on a fresh stream with stderr sent to a file; returns the
// synchronize status, this thread's message in |err| and stderr in |out|.
static accel_status_t run_capturing_stderr(accel_kernel_t *k,
                                           const accel_launch_desc_t *d,
                                           char *err, size_t err_size,
                                           char *out, size_t out_size) {
  accel_stream_t *s;
  assert_accel_ok(accel_stream_create(g.env->device, NULL, &s));
  char path[96];
  snprintf(path, sizeof(path), "%s/stderr.txt", g.dir);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  FILE *f = fopen(path, "w+");
  assert_non_null(f);
  dup2(fileno(f), STDERR_FILENO);
  assert_accel_ok(accel_launch(s, k, d));
  accel_status_t st = accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE);
  snprintf(err, err_size, "%s", accel_last_error());
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  rewind(f);
  size_t n = fread(out, 1, out_size - 1, f);
  out[n] = '\0';
  fclose(f);
  accel_stream_destroy(s);
  return st;
}

// Kernel ABI 1.1's message channel: prints reach stderr naming kernel and
// work-group; an assertion fails the stream with a message naming both,
// even when the work-group then returns 0 (one group or many).
static void test_kernel_messages_reach_stderr_and_assertions_fail_stream(
    void **state) {
  test_env_t *env = *state;
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "talk", .fn = talk_kernel};
  accel_kernel_t *k;
  assert_accel_ok(accel_kernel_register(env->device, &kd, &k));
  char err[512], out[4096];
  accel_launch_desc_t d = {.struct_size = sizeof(d),
                           .workgroup_count = {4, 1, 1}};
  accel_status_t st =
      run_capturing_stderr(k, &d, err, sizeof(err), out, sizeof(out));
  assert_int_equal(st, ACCEL_ERROR_ABORTED);
  assert_non_null(strstr(err, "kernel \"talk\" work-group (2, 0, 0) "
                              "assertion failed: id 2 < 2"));
  assert_non_null(
      strstr(out, "accel: kernel \"talk\" work-group (1, 0, 0): hello from 1"));
  assert_non_null(strstr(out, "accel: kernel \"talk\" work-group (2, 0, 0) "
                              "assertion failed: id 2 < 2"));

  // One group, no bindings: the launch path without a record.
  d.workgroup_count[0] = 1;
  st = run_capturing_stderr(k, &d, err, sizeof(err), out, sizeof(out));
  assert_int_equal(st, ACCEL_ERROR_ABORTED);
  assert_non_null(strstr(err, "kernel \"talk\" work-group (0, 0, 0) "
                              "assertion failed: single group"));
  assert_non_null(strstr(out, "hello from 0"));
  accel_kernel_release(k);
}

static int32_t record_thread(const accel_kernel_dispatch_t *d,
                             const accel_kernel_workgroup_t *wg) {
  pid_t *tids = d->bindings[0].data;
  tids[wg->id[0]] = (pid_t)syscall(SYS_gettid);
  usleep(1000);  // long enough for a parked pool thread to join in
  return 0;
}

// A grid of many work-groups is spread over more than one thread when the
// machine has more than one CPU (the device's pool joins the queue worker).
static void test_launch_spreads_workgroups_over_threads(void **state) {
  test_env_t *env = *state;
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    skip();
  }
  accel_kernel_binding_decl_t decl = {.access = ACCEL_KERNEL_ACCESS_WRITE,
                                      .min_size_bytes = 64 * sizeof(pid_t)};
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "record_thread", .fn = record_thread,
                            .binding_count = 1, .bindings = &decl};
  accel_kernel_t *k;
  assert_accel_ok(accel_kernel_register(env->device, &kd, &k));
  accel_buffer_t *tids = alloc_buffer(64 * sizeof(pid_t));
  accel_launch_binding_t bind = {.buffer = tids};
  accel_launch_desc_t d = {.struct_size = sizeof(d),
                           .workgroup_count = {64, 1, 1}, .binding_count = 1,
                           .bindings = &bind};
  assert_accel_ok(accel_launch(g.stream, k, &d));
  assert_accel_ok(accel_stream_synchronize(g.stream, ACCEL_TIMEOUT_INFINITE));
  pid_t *t = host(tids);
  int distinct = 0;
  for (int i = 0; i < 64; ++i) {
    assert_true(t[i] != 0);  // every work-group ran
    bool seen = false;
    for (int j = 0; j < i; ++j) {
      seen |= t[j] == t[i];
    }
    distinct += !seen;
  }
  assert_true(distinct >= 2);
  accel_buffer_release(tids);
  accel_kernel_release(k);
}

// Per group of the scratch test: the thread, whether its scratch came fresh,
// and what the scratch held on entry (the tag an earlier group of the same
// thread and launch left there).
typedef struct scratch_record {
  int32_t tid;
  int32_t fresh;
  uint64_t found;
  int32_t error;
  int32_t reserved;
} scratch_record_t;

static int32_t scratch_kernel(const accel_kernel_dispatch_t *d,
                              const accel_kernel_workgroup_t *wg) {
  scratch_record_t *r = (scratch_record_t *)d->bindings[0].data + wg->id[0];
  const uint64_t *tag = d->constants;
  r->tid = (int32_t)syscall(SYS_gettid);
  if (d->struct_size < offsetof(accel_kernel_dispatch_t, thread_scratch) +
                           sizeof(d->thread_scratch) ||
      d->thread_scratch == NULL) {
    r->error = 1;
    return 0;
  }
  int32_t fresh = -1, unused;
  // Misuse: no size, no flag.
  if (d->thread_scratch(d, wg, 0, &unused) != NULL ||
      d->thread_scratch(d, wg, 64, NULL) != NULL) {
    r->error = 2;
    return 0;
  }
  uint64_t *p = d->thread_scratch(d, wg, tag[1], &fresh);
  if (p == NULL || ((uintptr_t)p & 63) != 0) {
    r->error = 3;
    return 0;
  }
  r->fresh = fresh;
  r->found = fresh ? 0 : p[0];
  // The launch's tag at both ends: a later group of this thread and launch
  // must find both.
  p[0] = tag[0];
  p[tag[1] / 8 - 1] = tag[0];
  if (!fresh && p[tag[1] / 8 - 1] != tag[0]) {
    r->error = 4;
  }
  usleep(200);  // time for the pool's thread to take groups too
  return 0;
}

// Kernel ABI 1.3's per-thread scratch: each thread that runs work-groups of
// a launch gets its block fresh at its first group and finds what it left
// there at its later groups of the same launch, never another launch's.
static void test_thread_scratch_persists_per_thread_within_a_launch(
    void **state) {
  test_env_t *env = *state;
  enum { GROUPS = 48 };
  accel_kernel_binding_decl_t decl = {
      .access = ACCEL_KERNEL_ACCESS_WRITE,
      .min_size_bytes = GROUPS * sizeof(scratch_record_t)};
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "scratch", .fn = scratch_kernel,
                            .binding_count = 1, .bindings = &decl,
                            .constants_size = 16};
  accel_kernel_t *k;
  assert_accel_ok(accel_kernel_register(env->device, &kd, &k));
  accel_buffer_t *out = alloc_buffer(GROUPS * sizeof(scratch_record_t));
  accel_launch_binding_t bind = {.buffer = out};
  // Sizes that grow, shrink and grow past the first block's capacity.
  const uint64_t sizes[] = {256, 64, 1 << 20, 4096, 3 << 20, 8};
  for (uint32_t launch = 0; launch < 6; ++launch) {
    for (uint32_t groups = 1; groups <= GROUPS; groups += GROUPS - 1) {
      memset(host(out), 0, GROUPS * sizeof(scratch_record_t));
      uint64_t constants[2] = {0x5c7a7c4000ull + launch * 64 + groups,
                               sizes[launch]};
      accel_launch_desc_t d = {.struct_size = sizeof(d),
                               .workgroup_count = {groups, 1, 1},
                               .binding_count = 1, .bindings = &bind,
                               .constants_size = sizeof(constants),
                               .constants = constants};
      assert_accel_ok(accel_launch(g.stream, k, &d));
      assert_accel_ok(
          accel_stream_synchronize(g.stream, ACCEL_TIMEOUT_INFINITE));
      const scratch_record_t *r = host(out);
      int fresh = 0, distinct = 0;
      for (uint32_t i = 0; i < groups; ++i) {
        assert_int_equal(r[i].error, 0);
        assert_int_not_equal(r[i].tid, 0);
        bool seen = false;
        for (uint32_t j = 0; j < i; ++j) {
          seen |= r[j].tid == r[i].tid;
        }
        distinct += !seen;
        fresh += r[i].fresh;
        if (!r[i].fresh) {
          assert_int_equal(r[i].found, constants[0]);
        }
      }
      // Exactly one fresh block per thread that ran groups.
      assert_int_equal(fresh, distinct);
    }
  }
  accel_buffer_release(out);
  accel_kernel_release(k);
}

// Driver failures while loading (workspace memory) and launching (queue
// submit) unwind everything: the caller gets the error, nothing leaks, and
// the executable is destroyed by its last release.
static void test_launch_and_load_unwind_driver_failures(void **state) {
  (void)state;
  accel_runtime_t *rt;
  assert_accel_ok(fault_runtime_create(NULL, &rt));
  accel_device_t *dev;
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  char path[256];
  snprintf(path, sizeof(path), "%s/workspace.axe", g.dir);
  accel_exe_builder_t *b;
  assert_accel_ok(accel_exe_builder_create(&b));
  accel_exe_requirements_t req = {.struct_size = sizeof(req),
                                  .workspace_bytes = 1 << 20};
  assert_accel_ok(accel_exe_builder_set_requirements(b, &req));
  accel_exe_kernel_desc_t kd = {.struct_size = sizeof(kd), .name = "empty"};
  assert_accel_ok(accel_exe_builder_add_kernel(b, &kd));
  accel_device_info_t info = {.struct_size = sizeof(info)};
  accel_device_info(dev, &info);
  FILE *f = fopen(getenv("ACCEL_TEST_HOST_KERNELS"), "rb");
  static uint8_t so[1 << 20];
  size_t so_size = fread(so, 1, sizeof(so), f);
  fclose(f);
  assert_accel_ok(accel_exe_builder_add_code(b, info.target,
                                             ACCEL_CODE_FORMAT_ELF_SO, so,
                                             so_size));
  assert_accel_ok(accel_exe_builder_write_file(b, path, NULL, NULL));
  accel_exe_builder_destroy(b);

  accel_executable_t *exe = NULL;
  for (int op = FAULT_OP_VA_RESERVE; op <= FAULT_OP_PHYS_MAP; ++op) {
    fault_driver_arm((fault_op_t)op, 1, ACCEL_ERROR_OUT_OF_MEMORY);
    assert_accel_status(accel_executable_load_file(rt, dev, path, 0, &exe),
                        ACCEL_ERROR_OUT_OF_MEMORY);
    assert_null(exe);
    assert_non_null(strstr(accel_last_error(), "injected"));
  }
  fault_driver_reset();
  assert_accel_ok(accel_executable_load_file(rt, dev, path, 0, &exe));
  accel_kernel_t *k;
  assert_accel_ok(accel_executable_kernel(exe, "empty", &k));
  accel_stream_t *s;
  assert_accel_ok(accel_stream_create(dev, NULL, &s));
  accel_buffer_desc_t bd = {.struct_size = sizeof(bd), .size_bytes = 64};
  accel_buffer_t *buf;
  assert_accel_ok(accel_buffer_alloc(dev, &bd, &buf));
  accel_kernel_binding_decl_t decl = {.access = ACCEL_KERNEL_ACCESS_READ};
  accel_kernel_desc_t rd = {.struct_size = sizeof(rd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "reads", .fn = record_thread,
                            .binding_count = 1, .bindings = &decl};
  accel_kernel_t *reg;
  assert_accel_ok(accel_kernel_register(dev, &rd, &reg));
  accel_launch_binding_t bind = {.buffer = buf};
  accel_launch_desc_t one = {.struct_size = sizeof(one),
                             .workgroup_count = {1, 1, 1}};
  accel_launch_desc_t withb = {.struct_size = sizeof(withb),
                               .workgroup_count = {1, 1, 1},
                               .binding_count = 1, .bindings = &bind};
  fault_driver_arm(FAULT_OP_QUEUE_SUBMIT, 1, ACCEL_ERROR_OUT_OF_MEMORY);
  assert_accel_status(accel_launch(s, k, &one), ACCEL_ERROR_OUT_OF_MEMORY);
  fault_driver_arm(FAULT_OP_QUEUE_SUBMIT, 1, ACCEL_ERROR_OUT_OF_MEMORY);
  assert_accel_status(accel_launch(s, reg, &withb), ACCEL_ERROR_OUT_OF_MEMORY);
  fault_driver_reset();
  assert_accel_ok(accel_launch(s, k, &one));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  accel_kernel_release(reg);
  accel_buffer_release(buf);
  accel_executable_release(exe);
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
}

static _Atomic int g_gate;

static accel_status_t wait_gate(void *user_data) {
  (void)user_data;
  while (!atomic_load(&g_gate)) {
    usleep(100);
  }
  return ACCEL_OK;
}

// Launches in flight keep their executable (and its code object) alive after
// the caller's last reference is gone, through thousands of launches.
static void test_launch_keeps_executable_alive_until_complete(void **state) {
  test_env_t *env = *state;
  char path[256];
  snprintf(path, sizeof(path), "%s/kernels.axe", g.dir);
  accel_executable_t *exe;
  assert_accel_ok(accel_executable_load_file(env->runtime, env->device, path,
                                             0, &exe));
  accel_kernel_t *empty, *add;
  assert_accel_ok(accel_executable_kernel(exe, "empty", &empty));
  assert_accel_ok(accel_executable_kernel(exe, "vector_add", &add));
  accel_stream_t *s;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  atomic_store(&g_gate, 0);
  assert_accel_ok(accel_stream_host_call(s, wait_gate, NULL));
  accel_launch_desc_t d = {.struct_size = sizeof(d),
                           .workgroup_count = {1, 1, 1}};
  for (int i = 0; i < 3000; ++i) {
    assert_accel_ok(accel_launch(s, empty, &d));
  }
  uint32_t n = 1000;
  accel_buffer_t *a = alloc_buffer(n * 4), *out = alloc_buffer(n * 4);
  float *pa = host(a), *po = host(out);
  for (uint32_t i = 0; i < n; ++i) {
    pa[i] = (float)i;
  }
  accel_launch_binding_t bind[3] = {{.buffer = a}, {.buffer = a},
                                    {.buffer = out}};
  accel_launch_desc_t ad = {.struct_size = sizeof(ad),
                            .workgroup_count = {(n + 255) / 256, 1, 1},
                            .binding_count = 3, .bindings = bind,
                            .constants_size = 4, .constants = &n};
  assert_accel_ok(accel_launch(s, add, &ad));
  accel_executable_release(exe);  // launches still pending behind the gate
  atomic_store(&g_gate, 1);
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  for (uint32_t i = 0; i < n; ++i) {
    assert_true(po[i] == 2.0f * (float)i);
  }
  accel_buffer_release(a);
  accel_buffer_release(out);
  accel_stream_destroy(s);
}

typedef struct concurrent {
  accel_stream_t *stream;
  uint32_t n;
  int ok;
} concurrent_t;

static void *run_concurrent(void *arg) {
  concurrent_t *c = arg;
  accel_buffer_t *a = alloc_buffer(c->n * 4ull), *out = alloc_buffer(c->n * 4ull);
  float *pa = host(a), *po = host(out);
  for (uint32_t i = 0; i < c->n; ++i) {
    pa[i] = (float)i;
  }
  accel_launch_binding_t bind[3] = {{.buffer = a}, {.buffer = a},
                                    {.buffer = out}};
  accel_launch_desc_t d = {.struct_size = sizeof(d),
                           .workgroup_count = {(c->n + 255) / 256, 1, 1},
                           .binding_count = 3, .bindings = bind,
                           .constants_size = 4, .constants = &c->n};
  c->ok = 1;
  for (int rep = 0; rep < 20; ++rep) {
    memset(po, 0, c->n * 4ull);
    if (accel_launch(c->stream, kernel("vector_add"), &d) != ACCEL_OK ||
        accel_stream_synchronize(c->stream, ACCEL_TIMEOUT_INFINITE) != ACCEL_OK) {
      c->ok = 0;
    }
    for (uint32_t i = 0; i < c->n; ++i) {
      c->ok &= po[i] == 2.0f * (float)i;
    }
  }
  accel_buffer_release(a);
  accel_buffer_release(out);
  return NULL;
}

// Two streams launching grids at once share the device's thread pool (one
// of them may run its grid alone); both get correct results.
static void test_launch_concurrent_streams_share_the_pool(void **state) {
  test_env_t *env = *state;
  concurrent_t c[2];
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) {
    c[i] = (concurrent_t){.n = 50000 + 1000u * (uint32_t)i};
    assert_accel_ok(accel_stream_create(env->device, NULL, &c[i].stream));
    pthread_create(&t[i], NULL, run_concurrent, &c[i]);
  }
  for (int i = 0; i < 2; ++i) {
    pthread_join(t[i], NULL);
    assert_true(c[i].ok);
    accel_stream_destroy(c[i].stream);
  }
}

static int group_setup(void **state) {
  if (test_env_setup(state) != 0) {
    return -1;
  }
  g.env = *state;
  accel_device_info_t info = {.struct_size = sizeof(info)};
  accel_device_info(g.env->device, &info);
  snprintf(g.dir, sizeof(g.dir), "/tmp/accel-launch-XXXXXX");
  if (mkdtemp(g.dir) == NULL) {
    return -1;
  }
  char path[256], cmd[2048];
  snprintf(path, sizeof(path), "%s/ones.bin", g.dir);
  FILE *f = fopen(path, "wb");
  float ones[64];
  for (int i = 0; i < 64; ++i) {
    ones[i] = 1.0f;
  }
  fwrite(ones, sizeof(ones), 1, f);
  fclose(f);
  snprintf(path, sizeof(path), "%s/kernels.manifest", g.dir);
  f = fopen(path, "w");
  fprintf(f,
          "code %s elf %s\n"
          "kernel empty\n"
          "kernel vector_add workgroup=256 constants=4 binding=r:a:4:4 "
          "binding=r:b:4:4 binding=w:out:4:4\n"
          "kernel reduce_sum workgroup=1 constants=8 binding=r:in:4 "
          "binding=w:out:8 binding=rw:scratch:64\n"
          "kernel fail_at constants=4\n"
          "weight ones file=ones.bin dtype=f32 shape=64 map\n",
          info.target, getenv("ACCEL_TEST_HOST_KERNELS"));
  fclose(f);
  snprintf(cmd, sizeof(cmd), "%s --quiet %s -o %s/kernels.axe",
           getenv("ACCEL_PACK"), path, g.dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "accel-pack failed: %s\n", cmd);
    return -1;
  }
  snprintf(path, sizeof(path), "%s/kernels.axe", g.dir);
  if (accel_executable_load_file(g.env->runtime, g.env->device, path, 0,
                                 &g.exe) != ACCEL_OK ||
      accel_stream_create(g.env->device, NULL, &g.stream) != ACCEL_OK) {
    fprintf(stderr, "setup: %s\n", accel_last_error());
    return -1;
  }
  return 0;
}

static int group_teardown(void **state) {
  accel_stream_destroy(g.stream);
  accel_executable_release(g.exe);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", g.dir);
  if (system(cmd) != 0) {
    return -1;
  }
  return test_env_teardown(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_launch_vector_add_from_packed_executable),
      cmocka_unit_test(test_launch_reduction_across_workgroups),
      cmocka_unit_test(test_launch_rejects_signature_mismatches),
      cmocka_unit_test(test_launch_reads_mapped_weights),
      cmocka_unit_test(test_launch_kernel_failure_poisons_stream),
      cmocka_unit_test(test_kernel_register_runs_with_same_abi_and_checks),
      cmocka_unit_test(
          test_kernel_messages_reach_stderr_and_assertions_fail_stream),
      cmocka_unit_test(test_launch_concurrent_streams_share_the_pool),
      cmocka_unit_test(test_launch_keeps_executable_alive_until_complete),
      cmocka_unit_test(test_launch_spreads_workgroups_over_threads),
      cmocka_unit_test(test_thread_scratch_persists_per_thread_within_a_launch),
      cmocka_unit_test(test_launch_and_load_unwind_driver_failures),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
