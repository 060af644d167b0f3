// Command buffers: record once, replay many (include/accel/command_buffer.h).
// Each test runs on the host device twice: through the backend's recordings
// (the host queue's pre-built records) and through the generic replay by
// ordinary submits (the fault wrapper without recording_create).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_driver.h"
#include "test_support.h"

typedef struct cb_env {
  accel_runtime_t *runtime;
  accel_device_t *device;
  accel_stream_t *stream;
  bool recordings;  // the backend keeps recordings (else: the fallback)
} cb_env_t;

static int env_setup(void **state, bool recordings) {
  cb_env_t *env = calloc(1, sizeof(*env));
  env->recordings = recordings;
  fault_driver_reset();
  fault_driver_offer_recordings(recordings);
  accel_runtime_options_t opts;
  accel_runtime_options_init(&opts);
  opts.host_device_count = 2;
  if (fault_runtime_create(&opts, &env->runtime) != ACCEL_OK ||
      accel_device_get(env->runtime, 0, &env->device) != ACCEL_OK ||
      accel_stream_create(env->device, NULL, &env->stream) != ACCEL_OK) {
    fprintf(stderr, "setup: %s\n", accel_last_error());
    return -1;
  }
  *state = env;
  return 0;
}
static int setup_recorded(void **state) { return env_setup(state, true); }
static int setup_fallback(void **state) { return env_setup(state, false); }

static int env_teardown(void **state) {
  cb_env_t *env = *state;
  accel_stream_destroy(env->stream);
  accel_runtime_destroy(env->runtime);
  fault_driver_offer_recordings(true);
  free(env);
  return 0;
}

static accel_buffer_t *alloc(cb_env_t *env, uint64_t size) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d),
                           .size_bytes = size,
                           .flags = ACCEL_BUFFER_FLAG_ZERO};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  return b;
}

static uint8_t *host_of(accel_buffer_t *b) {
  void *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(b, &p));
  return p;
}

static accel_command_buffer_t *cb_new(cb_env_t *env, const char *name,
                                      uint32_t flags) {
  accel_command_buffer_desc_t d = {
      .struct_size = sizeof(d), .flags = flags, .name = name};
  accel_command_buffer_t *cb = NULL;
  assert_accel_ok(accel_command_buffer_create(env->device, &d, &cb));
  return cb;
}

static accel_command_buffer_ref_t ref_buf(accel_buffer_t *b, uint64_t off) {
  return (accel_command_buffer_ref_t){.buffer = b, .offset = off};
}
static accel_command_buffer_ref_t ref_slot(uint32_t slot, uint64_t off) {
  return (accel_command_buffer_ref_t){.slot = slot, .offset = off};
}


// Every counter of the process now (freed by the caller), |*n| of them.
static accel_counter_t *counters_now(size_t *n) {
  assert_accel_ok(accel_counters_snapshot(NULL, 0, n));
  size_t cap = *n + 64;
  accel_counter_t *cs = calloc(cap, sizeof(*cs));
  cs[0].struct_size = sizeof(cs[0]);
  assert_accel_ok(accel_counters_snapshot(cs, cap, n));
  assert_true(*n <= cap);
  return cs;
}

// Sum of counter |name| over the scopes whose name contains |scope_part|.
static uint64_t counter_sum(const char *scope_part, const char *name) {
  size_t n = 0;
  accel_counter_t *cs = counters_now(&n);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    if (strstr(cs[i].scope_name, scope_part) != NULL &&
        strcmp(cs[i].name, name) == 0) {
      sum += cs[i].value;
    }
  }
  free(cs);
  return sum;
}

// ---- host functions and kernels ------------------------------------------------

// Appends its tag to a log (the order commands ran in).
typedef struct log {
  _Atomic uint32_t n;
  uint32_t tags[1 << 16];
} log_t;

typedef struct tag {
  log_t *log;
  uint32_t value;
} tag_t;

static accel_status_t log_fn(void *user_data) {
  tag_t *t = user_data;
  uint32_t i = atomic_fetch_add(&t->log->n, 1);
  if (i < (1u << 16)) {
    t->log->tags[i] = t->value;
  }
  return ACCEL_OK;
}

static accel_status_t count_fn(void *user_data) {
  atomic_fetch_add((_Atomic uint64_t *)user_data, 1);
  return ACCEL_OK;
}

static accel_status_t fail_fn(void *user_data) {
  (void)user_data;
  return accel_host_fn_fail(ACCEL_ERROR_ABORTED, "planted failure");
}

// out[i] = in[i] * c[0] + c[1] over the bound words (one work-group per 64
// words).
static int32_t axpb_kernel(const accel_kernel_dispatch_t *d,
                           const accel_kernel_workgroup_t *wg) {
  const uint32_t *in = d->bindings[0].data;
  uint32_t *out = d->bindings[1].data;
  const uint32_t *c = d->constants;
  uint64_t n = d->bindings[1].size_bytes / 4;
  uint64_t lo = (uint64_t)wg->id[0] * 64;
  for (uint64_t i = lo; i < lo + 64 && i < n; ++i) {
    out[i] = in[i] * c[0] + c[1];
  }
  return 0;
}

static accel_kernel_t *axpb(cb_env_t *env, uint32_t alignment) {
  static accel_kernel_binding_decl_t decls[2];
  decls[0] = (accel_kernel_binding_decl_t){.name = "in",
                                           .access = ACCEL_KERNEL_ACCESS_READ,
                                           .alignment = alignment,
                                           .min_size_bytes = 16};
  decls[1] = (accel_kernel_binding_decl_t){.name = "out",
                                           .access = ACCEL_KERNEL_ACCESS_WRITE,
                                           .alignment = alignment,
                                           .min_size_bytes = 16};
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "axpb",
                            .fn = axpb_kernel,
                            .binding_count = 2,
                            .constants_size = 8,
                            .bindings = decls};
  accel_kernel_t *k = NULL;
  assert_accel_ok(accel_kernel_register(env->device, &kd, &k));
  return k;
}

// ---- every kind, replayed against the same commands submitted directly --------

// One random program over two buffers: the same steps recorded into a
// command buffer and submitted to a stream.
typedef struct program {
  uint32_t kind[64];
  uint64_t a[64], b[64], c[64];
  uint32_t n;
} program_t;

enum { P_FILL, P_COPY, P_TO_HOST, P_FROM_HOST, P_LAUNCH, P_HOST, P_SIGNAL,
       P_EVENT, P_EVENT_WAIT, P_KINDS };

#define PBYTES 4096u

static void program_make(program_t *p, test_rng_t *rng) {
  p->n = (uint32_t)test_rng_range(rng, 8, 64);
  for (uint32_t i = 0; i < p->n; ++i) {
    p->kind[i] = (uint32_t)test_rng_range(rng, 0, P_KINDS - 1);
    p->a[i] = test_rng_range(rng, 0, PBYTES / 4 - 16) * 4;
    p->b[i] = test_rng_range(rng, 0, PBYTES / 4 - 16) * 4;
    p->c[i] = test_rng_range(rng, 4, 16) * 4;
  }
}

typedef struct program_io {
  accel_buffer_t *x, *y;
  uint8_t host_in[PBYTES], host_out[PBYTES];
  log_t *log;
  tag_t tags[64];
  accel_semaphore_t *sem;
  accel_event_t *event;
  accel_kernel_t *k;
} program_io_t;

// Records (cb != NULL) or submits (to |s|) step |i| of |p|.
static void program_step(const program_t *p, uint32_t i, program_io_t *io,
                         accel_command_buffer_t *cb, accel_stream_t *s,
                         uint64_t signal_value) {
  uint64_t a = p->a[i], b = p->b[i], c = p->c[i];
  accel_command_buffer_ref_t rx = ref_buf(io->x, a), ry = ref_buf(io->y, b);
  uint32_t consts[2] = {(uint32_t)(a + 3), (uint32_t)c};
  switch (p->kind[i]) {
    case P_FILL:
      if (cb) {
        assert_accel_ok(accel_command_buffer_fill(cb, &rx, c, a * 7 + i, 4));
      } else {
        assert_accel_ok(accel_stream_fill(s, io->x, a, c, a * 7 + i, 4));
      }
      break;
    case P_COPY:
      if (cb) {
        assert_accel_ok(accel_command_buffer_copy(cb, &ry, &rx, c));
      } else {
        assert_accel_ok(accel_stream_copy(s, io->y, b, io->x, a, c));
      }
      break;
    case P_TO_HOST:
      if (cb) {
        assert_accel_ok(
            accel_command_buffer_copy_to_host(cb, io->host_out + a, &ry, c));
      } else {
        assert_accel_ok(
            accel_stream_copy_to_host(s, io->host_out + a, io->y, b, c));
      }
      break;
    case P_FROM_HOST:
      if (cb) {
        assert_accel_ok(
            accel_command_buffer_copy_from_host(cb, &rx, io->host_in + b, c));
      } else {
        assert_accel_ok(
            accel_stream_copy_from_host(s, io->x, a, io->host_in + b, c));
      }
      break;
    case P_LAUNCH: {
      if (cb) {
        accel_command_buffer_ref_t binds[2] = {
            {.buffer = io->x, .offset = a, .length = c},
            {.buffer = io->y, .offset = b, .length = c}};
        accel_command_buffer_launch_desc_t ld = {
            .struct_size = sizeof(ld),
            .workgroup_count = {1, 1, 1},
            .binding_count = 2,
            .constants_size = 8,
            .bindings = binds,
            .constants = consts};
        assert_accel_ok(accel_command_buffer_launch(cb, io->k, &ld));
      } else {
        accel_launch_binding_t binds[2] = {
            {.buffer = io->x, .offset = a, .length = c},
            {.buffer = io->y, .offset = b, .length = c}};
        accel_launch_desc_t ld = {.struct_size = sizeof(ld),
                                  .workgroup_count = {1, 1, 1},
                                  .binding_count = 2,
                                  .constants_size = 8,
                                  .bindings = binds,
                                  .constants = consts};
        assert_accel_ok(accel_launch(s, io->k, &ld));
      }
      break;
    }
    case P_HOST:  // tags[i] set once by program_io_init
      if (cb) {
        assert_accel_ok(accel_command_buffer_host_call(cb, log_fn, &io->tags[i]));
      } else {
        assert_accel_ok(accel_stream_host_call(s, log_fn, &io->tags[i]));
      }
      break;
    case P_SIGNAL:
      if (cb) {
        assert_accel_ok(accel_command_buffer_signal(cb, io->sem, signal_value));
        assert_accel_ok(accel_command_buffer_wait(cb, io->sem, signal_value));
      } else {
        assert_accel_ok(accel_stream_signal(s, io->sem, signal_value));
        assert_accel_ok(accel_stream_wait(s, io->sem, signal_value));
      }
      break;
    case P_EVENT:
      if (cb) {
        assert_accel_ok(accel_command_buffer_event_record(cb, io->event));
      } else {
        assert_accel_ok(accel_event_record(io->event, s));
      }
      break;
    case P_EVENT_WAIT:  // for the last record before the execute
      if (cb) {
        assert_accel_ok(accel_command_buffer_wait_event(cb, io->event));
      } else {
        assert_accel_ok(accel_stream_wait_event(s, io->event));
      }
      break;
  }
}

static void program_io_init(cb_env_t *env, program_io_t *io, test_rng_t *rng) {
  io->x = alloc(env, PBYTES);
  io->y = alloc(env, PBYTES);
  for (uint32_t i = 0; i < PBYTES; ++i) {
    io->host_in[i] = (uint8_t)test_rng_next(rng);
  }
  memset(io->host_out, 0, PBYTES);
  io->log = calloc(1, sizeof(log_t));
  for (uint32_t i = 0; i < 64; ++i) {
    // Set once: the worker reads them while later steps are submitted.
    io->tags[i] = (tag_t){.log = io->log, .value = i};
  }
  assert_accel_ok(accel_semaphore_create(env->device, 0, &io->sem));
  assert_accel_ok(accel_event_create(env->device, 0, &io->event));
  io->k = axpb(env, 4);
}

static void program_io_free(program_io_t *io) {
  accel_buffer_release(io->x);
  accel_buffer_release(io->y);
  accel_semaphore_release(io->sem);
  accel_event_release(io->event);
  accel_kernel_release(io->k);
  free(io->log);
}

// Every kind of command, recorded in random programs and replayed 20 times,
// leaves buffers, host memory and the call log exactly as the same commands
// submitted one by one.
static void test_cb_replay_matches_direct_submission(void **state) {
  cb_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 6; ++round) {
    program_t p;
    program_make(&p, &rng);
    test_rng_t data_rng = rng;
    program_io_t direct, replay;
    program_io_init(env, &direct, &data_rng);
    data_rng = rng;
    program_io_init(env, &replay, &data_rng);
    accel_command_buffer_t *cb = cb_new(env, "program", 0);
    for (uint32_t i = 0; i < p.n; ++i) {
      program_step(&p, i, &replay, cb, NULL, 1);
    }
    assert_accel_ok(accel_command_buffer_finalize(cb));
    const int reps = 20;
    for (int r = 0; r < reps; ++r) {
      for (uint32_t i = 0; i < p.n; ++i) {
        program_step(&p, i, &direct, NULL, env->stream, 1);
      }
      assert_accel_ok(accel_stream_execute(env->stream, cb, NULL));
    }
    assert_accel_ok(accel_stream_synchronize(env->stream, ACCEL_TIMEOUT_INFINITE));
    assert_memory_equal(host_of(direct.x), host_of(replay.x), PBYTES);
    assert_memory_equal(host_of(direct.y), host_of(replay.y), PBYTES);
    assert_memory_equal(direct.host_out, replay.host_out, PBYTES);
    uint32_t n = atomic_load(&direct.log->n);
    assert_int_equal(n, atomic_load(&replay.log->n));
    assert_memory_equal(direct.log->tags, replay.log->tags, n * 4);
    // Every event record ran: the replay's event completed.
    assert_accel_ok(accel_event_synchronize(replay.event, ACCEL_TIMEOUT_INFINITE));
    accel_command_buffer_info_t info = {.struct_size = sizeof(info)};
    assert_accel_ok(accel_command_buffer_info(cb, &info));
    assert_int_equal(info.execute_count, reps);
    assert_int_equal(info.finalized, 1);
    accel_command_buffer_release(cb);
    program_io_free(&direct);
    program_io_free(&replay);
  }
}

// ---- binding tables and constants -------------------------------------------------

// One recorded step (fill, launch, copy over slots) computes for each table
// what a reference loop computes; tables are swapped between executes and
// constants come from each execute.
static void test_cb_binding_tables_and_constants_per_execute(void **state) {
  cb_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  accel_kernel_t *k = axpb(env, 16);
  accel_command_buffer_t *cb = cb_new(env, "step", 0);
  // slot 0: input (256 words), slot 1: output, slot 2: a copy of the output.
  accel_command_buffer_ref_t binds[2] = {ref_slot(0, 0), ref_slot(1, 0)};
  accel_command_buffer_launch_desc_t ld = {
      .struct_size = sizeof(ld),
      .workgroup_count = {4, 1, 1},
      .binding_count = 2,
      .constants_size = 8,
      .bindings = binds,
      .flags = ACCEL_COMMAND_BUFFER_LAUNCH_CONSTANTS_FROM_EXECUTE,
      .constants_offset = 8};
  accel_command_buffer_ref_t out = ref_slot(1, 0), copy = ref_slot(2, 0);
  assert_accel_ok(accel_command_buffer_fill(cb, &out, 1024, 0xdeadbeef, 4));
  assert_accel_ok(accel_command_buffer_launch(cb, k, &ld));
  assert_accel_ok(accel_command_buffer_copy(cb, &copy, &out, 1024));
  assert_accel_ok(accel_command_buffer_finalize(cb));
  accel_command_buffer_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_command_buffer_info(cb, &info));
  assert_int_equal(info.binding_count, 3);
  assert_int_equal(info.constants_size, 16);

  enum { TABLES = 3 };
  accel_buffer_t *bufs[TABLES][3];
  for (int t = 0; t < TABLES; ++t) {
    for (int s = 0; s < 3; ++s) {
      bufs[t][s] = alloc(env, 2048);
    }
    uint32_t *in = (uint32_t *)host_of(bufs[t][0]);
    for (int i = 0; i < 512; ++i) {
      in[i] = (uint32_t)test_rng_next(&rng);
    }
  }
  for (int token = 0; token < 30; ++token) {
    int t = token % TABLES;
    uint64_t off = 64 * (uint64_t)test_rng_range(&rng, 0, 8);
    accel_command_buffer_binding_t table[3] = {
        {.buffer = bufs[t][0], .offset = off, .length = 1024},
        {.buffer = bufs[t][1], .offset = off, .length = 1024},
        {.buffer = bufs[t][2], .offset = 0, .length = 0}};
    uint32_t consts[4] = {0, 0, (uint32_t)token + 2, (uint32_t)token * 5};
    accel_command_buffer_execute_desc_t ed = {.struct_size = sizeof(ed),
                                              .binding_count = 3,
                                              .bindings = table,
                                              .constants = consts,
                                              .constants_size = 16};
    assert_accel_ok(accel_stream_execute(env->stream, cb, &ed));
    assert_accel_ok(accel_stream_synchronize(env->stream, ACCEL_TIMEOUT_INFINITE));
    const uint32_t *in = (const uint32_t *)(host_of(bufs[t][0]) + off);
    const uint32_t *o = (const uint32_t *)(host_of(bufs[t][1]) + off);
    const uint32_t *cp = (const uint32_t *)host_of(bufs[t][2]);
    for (int i = 0; i < 256; ++i) {
      uint32_t want = in[i] * consts[2] + consts[3];
      assert_int_equal(o[i], want);
      assert_int_equal(cp[i], want);
    }
  }
  const char *dma_min = getenv("ACCEL_STREAM_COPY_DMA_MIN_BYTES");
  if (dma_min != NULL && strcmp(dma_min, "0") == 0) {
    // The recorded copies ran on the copy engines (the execute split
    // around them), and their slot resolved to each table's buffers.
    assert_true(counter_sum("/dma/ring", "copy_bytes_d2d") >= 30 * 1024);
  }
  for (int t = 0; t < TABLES; ++t) {
    for (int s = 0; s < 3; ++s) {
      accel_buffer_release(bufs[t][s]);
    }
  }
  accel_command_buffer_release(cb);
  accel_kernel_release(k);
}

// A binding table that breaks a recorded use (too short, misaligned,
// read-only where a command writes, missing, another device's buffer, too
// few constants) is refused at execute with a message naming the slot, and
// nothing of the buffer runs.
static void test_cb_execute_refuses_bad_binding_tables(void **state) {
  cb_env_t *env = *state;
  accel_kernel_t *k = axpb(env, 64);
  _Atomic uint64_t calls = 0;
  accel_command_buffer_t *cb = cb_new(env, "checked", 0);
  assert_accel_ok(accel_command_buffer_host_call(cb, count_fn, (void *)&calls));
  accel_command_buffer_ref_t binds[2] = {ref_slot(0, 0), ref_slot(1, 64)};
  accel_command_buffer_launch_desc_t ld = {
      .struct_size = sizeof(ld),
      .workgroup_count = {1, 1, 1},
      .binding_count = 2,
      .constants_size = 8,
      .bindings = binds,
      .flags = ACCEL_COMMAND_BUFFER_LAUNCH_CONSTANTS_FROM_EXECUTE};
  assert_accel_ok(accel_command_buffer_launch(cb, k, &ld));
  assert_accel_ok(accel_command_buffer_finalize(cb));

  accel_buffer_t *in = alloc(env, 4096), *out = alloc(env, 4096);
  accel_buffer_desc_t xd = {.struct_size = sizeof(xd),
                            .size_bytes = 4096,
                            .flags = ACCEL_BUFFER_FLAG_EXPORTABLE};
  accel_buffer_t *exported = NULL, *read_only = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &xd, &exported));
  int fd = -1;
  assert_accel_ok(accel_buffer_export(exported, &fd));
  assert_accel_ok(accel_buffer_import(env->device, fd, 4096,
                                      ACCEL_IMPORT_FLAG_READ_ONLY, &read_only));
  close(fd);
  accel_device_t *other_dev = NULL;
  assert_accel_ok(accel_device_get(env->runtime, 1, &other_dev));
  accel_buffer_desc_t od = {.struct_size = sizeof(od), .size_bytes = 4096};
  accel_buffer_t *other = NULL;
  assert_accel_ok(accel_buffer_alloc(other_dev, &od, &other));
  uint32_t consts[2] = {1, 2};
  struct {
    accel_command_buffer_binding_t table[2];
    uint32_t constants_size;
    const char *needle;
  } cases[] = {
      {{{in, 0, 8}, {out, 0, 0}}, 8, "slot 0"},           // shorter than 16
      {{{in, 0, 0}, {out, 0, 64}}, 8, "slot 1"},          // 64 + 16 > 64
      {{{in, 4, 0}, {out, 0, 0}}, 8, "aligned"},          // misaligned
      {{{in, 0, 0}, {read_only, 0, 0}}, 8, "slot 1"},     // written
      {{{NULL, 0, 0}, {out, 0, 0}}, 8, "no buffer"},      // missing
      {{{other, 0, 0}, {out, 0, 0}}, 8, "fault:1"},       // another device
      {{{in, 0, 0}, {out, 0, 0}}, 4, "constant bytes"},   // constants
      {{{in, 8192, 0}, {out, 0, 0}}, 8, "beyond"},        // offset past end
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    accel_command_buffer_execute_desc_t ed = {
        .struct_size = sizeof(ed),
        .binding_count = 2,
        .bindings = cases[i].table,
        .constants = consts,
        .constants_size = cases[i].constants_size};
    assert_accel_status(accel_stream_execute(env->stream, cb, &ed),
                        ACCEL_ERROR_INVALID_ARGUMENT);
    if (strstr(accel_last_error(), cases[i].needle) == NULL) {
      fail_msg("case %zu: \"%s\" does not name \"%s\"", i, accel_last_error(),
               cases[i].needle);
    }
  }
  // Too few bindings, no desc at all.
  accel_command_buffer_execute_desc_t few = {
      .struct_size = sizeof(few), .binding_count = 1,
      .bindings = cases[0].table, .constants = consts, .constants_size = 8};
  assert_accel_status(accel_stream_execute(env->stream, cb, &few),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_execute(env->stream, cb, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_stream_synchronize(env->stream, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(atomic_load(&calls), 0);  // nothing ran
  // And a good table runs.
  accel_command_buffer_binding_t good[2] = {{in, 0, 0}, {out, 0, 0}};
  accel_command_buffer_execute_desc_t ed = {.struct_size = sizeof(ed),
                                            .binding_count = 2,
                                            .bindings = good,
                                            .constants = consts,
                                            .constants_size = 8};
  assert_accel_ok(accel_stream_execute(env->stream, cb, &ed));
  assert_accel_ok(accel_stream_synchronize(env->stream, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(atomic_load(&calls), 1);
  accel_buffer_release(in);
  accel_buffer_release(out);
  accel_buffer_release(read_only);
  accel_buffer_release(exported);
  accel_buffer_release(other);
  accel_command_buffer_release(cb);
  accel_kernel_release(k);
}

// ---- concurrency, failure, lifetime -----------------------------------------------

typedef struct exec_thread {
  accel_stream_t *stream;
  accel_command_buffer_t *cb;
  int reps;
  accel_status_t st;
} exec_thread_t;

static void *exec_main(void *arg) {
  exec_thread_t *t = arg;
  for (int i = 0; i < t->reps && t->st == ACCEL_OK; ++i) {
    t->st = accel_stream_execute(t->stream, t->cb, NULL);
  }
  if (t->st == ACCEL_OK) {
    t->st = accel_stream_synchronize(t->stream, ACCEL_TIMEOUT_INFINITE);
  }
  return NULL;
}

// A reentrant buffer executes on two streams at once from two threads,
// every replay complete; a buffer that is not reentrant is refused on a
// second stream while it runs on the first.
static void test_cb_executes_on_two_streams_at_once(void **state) {
  cb_env_t *env = *state;
  _Atomic uint64_t calls = 0;
  accel_command_buffer_t *cb =
      cb_new(env, "shared", ACCEL_COMMAND_BUFFER_FLAG_REENTRANT);
  for (int i = 0; i < 100; ++i) {
    assert_accel_ok(accel_command_buffer_host_call(cb, count_fn, (void *)&calls));
  }
  assert_accel_ok(accel_command_buffer_finalize(cb));
  accel_stream_t *s2 = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s2));
  exec_thread_t t[2] = {{env->stream, cb, 200, ACCEL_OK},
                        {s2, cb, 200, ACCEL_OK}};
  pthread_t th[2];
  for (int i = 0; i < 2; ++i) {
    pthread_create(&th[i], NULL, exec_main, &t[i]);
  }
  for (int i = 0; i < 2; ++i) {
    pthread_join(th[i], NULL);
    assert_accel_ok(t[i].st);
  }
  assert_int_equal(atomic_load(&calls), 2 * 200 * 100);

  // Not reentrant: busy on another stream while the first still runs.
  accel_semaphore_t *gate = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &gate));
  accel_command_buffer_t *solo = cb_new(env, "solo", 0);
  assert_accel_ok(accel_command_buffer_wait(solo, gate, 1));
  assert_accel_ok(accel_command_buffer_finalize(solo));
  assert_accel_ok(accel_stream_execute(env->stream, solo, NULL));
  assert_accel_ok(accel_stream_execute(env->stream, solo, NULL));  // same
  assert_accel_status(accel_stream_execute(s2, solo, NULL), ACCEL_ERROR_BUSY);
  assert_non_null(strstr(accel_last_error(), "solo"));
  assert_accel_ok(accel_semaphore_signal(gate, 1));
  assert_accel_ok(accel_stream_synchronize(env->stream, ACCEL_TIMEOUT_INFINITE));
  assert_accel_ok(accel_stream_execute(s2, solo, NULL));  // free again
  assert_accel_ok(accel_stream_synchronize(s2, ACCEL_TIMEOUT_INFINITE));
  accel_command_buffer_release(solo);
  accel_semaphore_release(gate);
  accel_stream_destroy(s2);
  accel_command_buffer_release(cb);
}

// A command failing in the middle of a replay fails the stream with a
// message naming the buffer and the command's index; the commands after it
// do not run and the semaphore it would have signalled fails.
static void test_cb_failure_mid_replay_names_buffer_and_command(void **state) {
  cb_env_t *env = *state;
  _Atomic uint64_t calls = 0;
  accel_semaphore_t *sem = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &sem));
  accel_command_buffer_t *cb = cb_new(env, "faulty", 0);
  for (int i = 0; i < 5; ++i) {
    assert_accel_ok(accel_command_buffer_host_call(cb, count_fn, (void *)&calls));
  }
  assert_accel_ok(accel_command_buffer_host_call(cb, fail_fn, NULL));
  assert_accel_ok(accel_command_buffer_host_call(cb, count_fn, (void *)&calls));
  assert_accel_ok(accel_command_buffer_signal(cb, sem, 1));
  assert_accel_ok(accel_command_buffer_finalize(cb));
  assert_accel_ok(accel_stream_execute(env->stream, cb, NULL));
  assert_accel_status(accel_stream_synchronize(env->stream, ACCEL_TIMEOUT_INFINITE),
                      ACCEL_ERROR_ABORTED);
  const char *msg = accel_last_error();
  assert_non_null(strstr(msg, "command buffer \"faulty\" command #5 (host_call)"));
  assert_non_null(strstr(msg, "planted failure"));
  assert_int_equal(atomic_load(&calls), 5);
  assert_accel_status(accel_semaphore_wait(sem, 1, ACCEL_TIMEOUT_INFINITE),
                      ACCEL_ERROR_ABORTED);
  // The stream stays failed.
  assert_accel_status(accel_stream_execute(env->stream, cb, NULL),
                      ACCEL_ERROR_ABORTED);
  accel_command_buffer_release(cb);
  accel_semaphore_release(sem);
  accel_stream_destroy(env->stream);
  assert_accel_ok(accel_stream_create(env->device, NULL, &env->stream));
}

// A kernel failing in a replay names the buffer and the launch's index on
// both paths.
static int32_t failing_kernel(const accel_kernel_dispatch_t *d,
                              const accel_kernel_workgroup_t *wg) {
  (void)d;
  (void)wg;
  return 7;
}

static void test_cb_failed_launch_names_command(void **state) {
  cb_env_t *env = *state;
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "bad",
                            .fn = failing_kernel};
  accel_kernel_t *k = NULL;
  assert_accel_ok(accel_kernel_register(env->device, &kd, &k));
  accel_command_buffer_t *cb = cb_new(env, "launches", 0);
  accel_command_buffer_launch_desc_t ld = {.struct_size = sizeof(ld),
                                           .workgroup_count = {1, 1, 1}};
  _Atomic uint64_t calls = 0;
  assert_accel_ok(accel_command_buffer_host_call(cb, count_fn, (void *)&calls));
  assert_accel_ok(accel_command_buffer_launch(cb, k, &ld));
  assert_accel_ok(accel_command_buffer_finalize(cb));
  assert_accel_ok(accel_stream_execute(env->stream, cb, NULL));
  assert_accel_status(accel_stream_synchronize(env->stream, ACCEL_TIMEOUT_INFINITE),
                      ACCEL_ERROR_ABORTED);
  assert_non_null(strstr(accel_last_error(),
                         "command buffer \"launches\" command #1 (launch)"));
  assert_non_null(strstr(accel_last_error(), "returned 7"));
  accel_command_buffer_release(cb);
  accel_kernel_release(k);
  accel_stream_destroy(env->stream);
  assert_accel_ok(accel_stream_create(env->device, NULL, &env->stream));
}

// Releasing a buffer (and the binding table's buffer) while an execute is
// blocked in it is safe: the execute holds both until it completes.
static void test_cb_release_while_executing(void **state) {
  cb_env_t *env = *state;
  accel_semaphore_t *gate = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &gate));
  accel_buffer_t *b = alloc(env, 256);
  accel_command_buffer_t *cb = cb_new(env, "held", 0);
  accel_command_buffer_ref_t dst = ref_slot(0, 0);
  assert_accel_ok(accel_command_buffer_wait(cb, gate, 1));
  assert_accel_ok(accel_command_buffer_fill(cb, &dst, 256, 0x5a, 1));
  assert_accel_ok(accel_command_buffer_finalize(cb));
  accel_command_buffer_binding_t table[1] = {{b, 0, 0}};
  accel_command_buffer_execute_desc_t ed = {
      .struct_size = sizeof(ed), .binding_count = 1, .bindings = table};
  assert_accel_ok(accel_stream_execute(env->stream, cb, &ed));
  accel_command_buffer_release(cb);
  uint8_t *host = host_of(b);
  accel_buffer_retain(b);
  accel_buffer_release(b);
  usleep(1000);
  assert_int_equal(host[0], 0);
  assert_accel_ok(accel_semaphore_signal(gate, 1));
  assert_accel_ok(accel_stream_synchronize(env->stream, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(host[255], 0x5a);
  accel_buffer_release(b);
  accel_semaphore_release(gate);
}

// A buffer of 100,000 commands records without being sized in advance and
// replays them all, in order, three times.
static void test_cb_100000_commands(void **state) {
  cb_env_t *env = *state;
  log_t *log = calloc(1, sizeof(*log));
  tag_t *tags = calloc(100000, sizeof(*tags));
  accel_command_buffer_t *cb = cb_new(env, "long", 0);
  for (uint32_t i = 0; i < 100000; ++i) {
    tags[i] = (tag_t){.log = log, .value = i};
    assert_accel_ok(accel_command_buffer_host_call(cb, log_fn, &tags[i]));
  }
  assert_accel_ok(accel_command_buffer_finalize(cb));
  for (int r = 0; r < 3; ++r) {
    atomic_store(&log->n, 0);
    assert_accel_ok(accel_stream_execute(env->stream, cb, NULL));
    assert_accel_ok(accel_stream_synchronize(env->stream, ACCEL_TIMEOUT_INFINITE));
    assert_int_equal(atomic_load(&log->n), 100000);
    for (uint32_t i = 0; i < (1u << 16); ++i) {
      assert_int_equal(log->tags[i], i);
    }
  }
  accel_command_buffer_release(cb);
  free(tags);
  free(log);
}

// Random DAGs of buffers ordered by semaphores: each buffer waits for its
// predecessors' semaphores, logs itself, signals its own; executed on three
// streams in a random order, every buffer runs after all its predecessors.
static void test_cb_random_dags_ordered_by_semaphores(void **state) {
  cb_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  accel_stream_t *streams[3] = {env->stream, NULL, NULL};
  for (int i = 1; i < 3; ++i) {
    assert_accel_ok(accel_stream_create(env->device, NULL, &streams[i]));
  }
  enum { N = 12 };
  for (int round = 0; round < 8; ++round) {
    log_t *log = calloc(1, sizeof(*log));
    tag_t tags[N];
    accel_semaphore_t *sems[N];
    accel_command_buffer_t *cbs[N];
    bool edge[N][N] = {{false}};
    for (int i = 0; i < N; ++i) {
      assert_accel_ok(accel_semaphore_create(env->device, 0, &sems[i]));
    }
    for (int i = 0; i < N; ++i) {
      cbs[i] = cb_new(env, "node", ACCEL_COMMAND_BUFFER_FLAG_REENTRANT);
      for (int j = 0; j < i; ++j) {
        edge[j][i] = test_rng_range(&rng, 0, 3) == 0;
        if (edge[j][i]) {
          assert_accel_ok(accel_command_buffer_wait(cbs[i], sems[j], 1));
        }
      }
      tags[i] = (tag_t){.log = log, .value = (uint32_t)i};
      assert_accel_ok(accel_command_buffer_host_call(cbs[i], log_fn, &tags[i]));
      assert_accel_ok(accel_command_buffer_signal(cbs[i], sems[i], 1));
      assert_accel_ok(accel_command_buffer_finalize(cbs[i]));
    }
    // Submit in a random order, each on a random stream: a stream may hold
    // a successor before its predecessor only across streams, so place each
    // node on a stream after every predecessor submitted to that stream.
    int order[N];
    for (int i = 0; i < N; ++i) {
      order[i] = i;
    }
    for (int i = N - 1; i > 0; --i) {
      int j = (int)test_rng_range(&rng, 0, (uint64_t)i);
      int t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    // Streams run in order, so a node may not wait behind a later node on
    // its own stream: give each node the stream of none of its successors
    // submitted before it, by submitting predecessors-first per stream.
    int stream_of[N];
    for (int i = 0; i < N; ++i) {
      stream_of[i] = (int)test_rng_range(&rng, 0, 2);
    }
    bool submitted[N] = {false};
    for (int done = 0; done < N;) {
      for (int k = 0; k < N; ++k) {
        int i = order[k];
        if (submitted[i]) {
          continue;
        }
        // Deadlock-free: everything before |i| on its stream must not
        // depend on |i|; submitting only once all predecessors are
        // submitted guarantees it.
        bool ready = true;
        for (int j = 0; j < i; ++j) {
          ready = ready && (!edge[j][i] || submitted[j]);
        }
        if (ready) {
          assert_accel_ok(
              accel_stream_execute(streams[stream_of[i]], cbs[i], NULL));
          submitted[i] = true;
          done++;
        }
      }
    }
    for (int s = 0; s < 3; ++s) {
      assert_accel_ok(accel_stream_synchronize(streams[s], ACCEL_TIMEOUT_INFINITE));
    }
    assert_int_equal(atomic_load(&log->n), N);
    int pos[N];
    for (int i = 0; i < N; ++i) {
      pos[log->tags[i]] = i;
    }
    for (int i = 0; i < N; ++i) {
      for (int j = 0; j < i; ++j) {
        if (edge[j][i]) {
          assert_true(pos[j] < pos[i]);
        }
      }
    }
    for (int i = 0; i < N; ++i) {
      accel_command_buffer_release(cbs[i]);
      accel_semaphore_release(sems[i]);
    }
    free(log);
  }
  for (int i = 1; i < 3; ++i) {
    accel_stream_destroy(streams[i]);
  }
}

// ---- misuse -----------------------------------------------------------------------

// Recording after finalize, executing before it, finalizing twice, a buffer
// of another device, bad descriptors and bad record-time arguments are
// refused with messages naming the command.
static void test_cb_misuse_is_refused(void **state) {
  cb_env_t *env = *state;
  accel_command_buffer_t *cb = cb_new(env, "misuse", 0);
  assert_accel_status(accel_stream_execute(env->stream, cb, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "not finalized"));
  accel_buffer_t *b = alloc(env, 64);
  accel_command_buffer_ref_t r = ref_buf(b, 0);
  accel_command_buffer_ref_t past = ref_buf(b, 60);
  assert_accel_status(accel_command_buffer_fill(cb, &past, 8, 0, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "command #0 (fill)"));
  assert_accel_status(accel_command_buffer_fill(cb, &r, 8, 0x1ff, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_command_buffer_host_call(cb, NULL, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_command_buffer_ref_t big_slot = ref_slot(1u << 20, 0);
  assert_accel_status(accel_command_buffer_fill(cb, &big_slot, 8, 0, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_command_buffer_signal(cb, NULL, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_command_buffer_fill(cb, &r, 8, 0, 1));
  accel_kernel_t *k = axpb(env, 4);
  accel_command_buffer_launch_desc_t ld = {.struct_size = sizeof(ld),
                                           .workgroup_count = {1, 1, 1}};
  assert_accel_status(accel_command_buffer_launch(cb, k, &ld),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "command #1 (launch)"));
  assert_accel_ok(accel_command_buffer_finalize(cb));
  assert_accel_status(accel_command_buffer_finalize(cb),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_command_buffer_host_call(cb, count_fn, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "finalized"));
  accel_command_buffer_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_command_buffer_info(cb, &info));
  assert_int_equal(info.command_count, 1);

  // Another device's buffer and stream.
  accel_device_t *other_dev = NULL;
  assert_accel_ok(accel_device_get(env->runtime, 1, &other_dev));
  accel_stream_t *other = NULL;
  assert_accel_ok(accel_stream_create(other_dev, NULL, &other));
  assert_accel_status(accel_stream_execute(other, cb, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_command_buffer_t *ocb = NULL;
  assert_accel_ok(accel_command_buffer_create(other_dev, NULL, &ocb));
  assert_accel_status(accel_command_buffer_fill(ocb, &r, 8, 0, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "fault:0"));
  assert_accel_status(accel_command_buffer_launch(ocb, k, &ld),
                      ACCEL_ERROR_UNSUPPORTED);
  accel_command_buffer_release(ocb);
  accel_stream_destroy(other);

  accel_command_buffer_desc_t bad = {.struct_size = 4};
  accel_command_buffer_t *x = NULL;
  assert_accel_status(accel_command_buffer_create(env->device, &bad, &x),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  bad = (accel_command_buffer_desc_t){.struct_size = sizeof(bad), .flags = 8};
  assert_accel_status(accel_command_buffer_create(env->device, &bad, &x),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(x);
  assert_accel_status(accel_stream_execute(NULL, cb, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_command_buffer_execute_desc_t ed = {.struct_size = 4};
  assert_accel_ok(accel_stream_execute(env->stream, cb, NULL));
  assert_accel_status(accel_stream_execute(env->stream, cb, &ed),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_stream_synchronize(env->stream, ACCEL_TIMEOUT_INFINITE));
  accel_command_buffer_release(cb);
  accel_buffer_release(b);
  accel_kernel_release(k);
}

// Replays are counted: an execute is one command of the stream
// (commands_completed), its commands count as replayed_commands and in
// their kinds' counters.
static uint64_t stream_counter(const char *stream, const char *name) {
  size_t n = 0;
  accel_counter_t *cs = counters_now(&n);
  uint64_t value = UINT64_MAX;
  for (size_t i = 0; i < n; ++i) {
    // Scopes are "DEVICE/STREAM".
    const char *slash = strchr(cs[i].scope_name, '/');
    if (slash != NULL && strcmp(slash + 1, stream) == 0 &&
        strcmp(cs[i].name, name) == 0) {
      value = cs[i].value;
    }
  }
  free(cs);
  return value;
}

static void test_cb_counters_count_replays(void **state) {
  cb_env_t *env = *state;
  accel_stream_desc_t sd = {.struct_size = sizeof(sd), .name = "counted"};
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, &sd, &s));
  accel_buffer_t *b = alloc(env, 64);
  accel_command_buffer_ref_t r = ref_buf(b, 0);
  _Atomic uint64_t calls = 0;
  accel_command_buffer_t *cb = cb_new(env, "counted", 0);
  for (int i = 0; i < 3; ++i) {
    assert_accel_ok(accel_command_buffer_host_call(cb, count_fn, (void *)&calls));
  }
  assert_accel_ok(accel_command_buffer_fill(cb, &r, 64, 1, 1));
  assert_accel_ok(accel_command_buffer_finalize(cb));
  for (int i = 0; i < 5; ++i) {
    assert_accel_ok(accel_stream_execute(s, cb, NULL));
  }
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  uint64_t replays = stream_counter("counted", "replays");
  uint64_t fills = stream_counter("counted", "fills");
  if (env->recordings) {
    assert_int_equal(replays, 5);
    assert_int_equal(stream_counter("counted", "replayed_commands"), 20);
    assert_int_equal(stream_counter("counted", "commands_completed"), 5);
  } else {
    assert_int_equal(replays, 0);  // plain commands on this path
    assert_int_equal(stream_counter("counted", "commands_completed"), 20);
  }
  assert_int_equal(fills, 5);
  assert_int_equal(stream_counter("counted", "host_calls"), 15);
  accel_command_buffer_release(cb);
  accel_buffer_release(b);
  accel_stream_destroy(s);
}

// A backend that cannot build its recording fails finalize with its error
// and leaves the buffer recording; an execute the queue refuses returns the
// error, fails the event records it took (no waiter hangs) and leaves a
// non-reentrant buffer free for another stream.
static void test_cb_backend_failures_leave_a_usable_buffer(void **state) {
  cb_env_t *env = *state;
  _Atomic uint64_t calls = 0;
  accel_event_t *ev = NULL;
  assert_accel_ok(accel_event_create(env->device, 0, &ev));
  accel_command_buffer_t *cb = cb_new(env, "faults", 0);
  assert_accel_ok(accel_command_buffer_host_call(cb, count_fn, (void *)&calls));
  assert_accel_ok(accel_command_buffer_event_record(cb, ev));
  if (env->recordings) {
    fault_driver_arm(FAULT_OP_RECORDING_CREATE, 1, ACCEL_ERROR_OUT_OF_MEMORY);
    assert_accel_status(accel_command_buffer_finalize(cb),
                        ACCEL_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(accel_last_error(), "faults"));
    fault_driver_reset();
    accel_command_buffer_info_t info = {.struct_size = sizeof(info)};
    assert_accel_ok(accel_command_buffer_info(cb, &info));
    assert_int_equal(info.finalized, 0);
  }
  assert_accel_ok(accel_command_buffer_host_call(cb, count_fn, (void *)&calls));
  assert_accel_ok(accel_command_buffer_finalize(cb));

  fault_driver_arm(FAULT_OP_QUEUE_SUBMIT, 1, ACCEL_ERROR_OUT_OF_MEMORY);
  assert_accel_status(accel_stream_execute(env->stream, cb, NULL),
                      ACCEL_ERROR_OUT_OF_MEMORY);
  fault_driver_reset();
  // The record the refused execute took fails; nothing waits forever.
  assert_accel_status(accel_event_synchronize(ev, ACCEL_TIMEOUT_INFINITE),
                      ACCEL_ERROR_OUT_OF_MEMORY);
  accel_stream_t *s2 = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s2));
  assert_accel_ok(accel_stream_execute(s2, cb, NULL));
  assert_accel_ok(accel_stream_synchronize(s2, ACCEL_TIMEOUT_INFINITE));
  assert_accel_ok(accel_event_synchronize(ev, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(atomic_load(&calls), 2);
  accel_stream_destroy(s2);
  accel_command_buffer_release(cb);
  accel_event_release(ev);
}

typedef struct gate {
  _Atomic int entered;
  _Atomic int open;
} gate_t;

// Blocks its stream until the gate opens (at most 10 s).
static accel_status_t gate_fn(void *user_data) {
  gate_t *g = user_data;
  atomic_store(&g->entered, 1);
  uint64_t t0 = test_now_ns();
  while (!atomic_load(&g->open) && test_now_ns() - t0 < 10000000000ull) {
    usleep(100);
  }
  return ACCEL_OK;
}

static void *destroy_main(void *arg) {
  accel_stream_destroy(arg);
  return NULL;
}

// Destroying a stream created with ACCEL_STREAM_FLAG_ABORT_ON_DESTROY while
// a replay runs stops the replay (a long run of host calls and a blocked
// wait alike): the rest is skipped and its signals fail with ABORTED.
static void test_cb_abort_on_destroy_stops_a_replay(void **state) {
  cb_env_t *env = *state;
  for (int blocked_wait = 0; blocked_wait < 2; ++blocked_wait) {
    _Atomic uint64_t calls = 0;
    gate_t gate = {0};
    accel_semaphore_t *never = NULL, *done = NULL;
    assert_accel_ok(accel_semaphore_create(env->device, 0, &never));
    assert_accel_ok(accel_semaphore_create(env->device, 0, &done));
    accel_command_buffer_t *cb = cb_new(env, "aborted", 0);
    if (blocked_wait) {
      assert_accel_ok(accel_command_buffer_wait(cb, never, 1));
    } else {
      assert_accel_ok(accel_command_buffer_host_call(cb, gate_fn, &gate));
    }
    for (int i = 0; i < 50000; ++i) {
      assert_accel_ok(
          accel_command_buffer_host_call(cb, count_fn, (void *)&calls));
    }
    assert_accel_ok(accel_command_buffer_signal(cb, done, 1));
    assert_accel_ok(accel_command_buffer_finalize(cb));
    accel_stream_desc_t sd = {.struct_size = sizeof(sd),
                              .flags = ACCEL_STREAM_FLAG_ABORT_ON_DESTROY};
    accel_stream_t *s = NULL;
    assert_accel_ok(accel_stream_create(env->device, &sd, &s));
    assert_accel_ok(accel_stream_execute(s, cb, NULL));
    accel_command_buffer_release(cb);
    pthread_t t;
    if (blocked_wait) {
      usleep(2000);  // the worker blocks in the wait
      pthread_create(&t, NULL, destroy_main, s);
    } else {
      while (!atomic_load(&gate.entered)) {
        usleep(100);
      }
      pthread_create(&t, NULL, destroy_main, s);
      usleep(20000);  // the destroy has asked to abort by now
      atomic_store(&gate.open, 1);
    }
    pthread_join(t, NULL);
    assert_accel_status(accel_semaphore_wait(done, 1, ACCEL_TIMEOUT_INFINITE),
                        ACCEL_ERROR_ABORTED);
    assert_true(atomic_load(&calls) < 50000);
    accel_semaphore_release(never);
    accel_semaphore_release(done);
  }
}

// A recorded event record orders a later execute's recorded wait_event on
// another stream: the waiting buffer's commands run after the recording
// buffer's, execute after execute.
static void test_cb_events_order_executes_across_streams(void **state) {
  cb_env_t *env = *state;
  log_t *log = calloc(1, sizeof(*log));
  tag_t first = {.log = log, .value = 1}, second = {.log = log, .value = 2};
  gate_t gate = {0};
  accel_event_t *ev = NULL;
  assert_accel_ok(accel_event_create(env->device, 0, &ev));
  accel_command_buffer_t *producer = cb_new(env, "producer", 0);
  assert_accel_ok(accel_command_buffer_host_call(producer, gate_fn, &gate));
  assert_accel_ok(accel_command_buffer_host_call(producer, log_fn, &first));
  assert_accel_ok(accel_command_buffer_event_record(producer, ev));
  assert_accel_ok(accel_command_buffer_finalize(producer));
  accel_command_buffer_t *consumer = cb_new(env, "consumer", 0);
  assert_accel_ok(accel_command_buffer_wait_event(consumer, ev));
  assert_accel_ok(accel_command_buffer_host_call(consumer, log_fn, &second));
  assert_accel_ok(accel_command_buffer_finalize(consumer));
  accel_stream_t *s2 = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s2));
  for (int round = 0; round < 5; ++round) {
    atomic_store(&log->n, 0);
    atomic_store(&gate.open, 0);
    assert_accel_ok(accel_stream_execute(env->stream, producer, NULL));
    assert_accel_ok(accel_stream_execute(s2, consumer, NULL));
    usleep(1000);  // the consumer would have run by now if it did not wait
    assert_int_equal(atomic_load(&log->n), 0);
    atomic_store(&gate.open, 1);
    assert_accel_ok(accel_stream_synchronize(s2, ACCEL_TIMEOUT_INFINITE));
    assert_int_equal(atomic_load(&log->n), 2);
    assert_int_equal(log->tags[0], 1);
    assert_int_equal(log->tags[1], 2);
  }
  assert_accel_ok(accel_stream_synchronize(env->stream, ACCEL_TIMEOUT_INFINITE));
  accel_stream_destroy(s2);
  accel_command_buffer_release(producer);
  accel_command_buffer_release(consumer);
  accel_event_release(ev);
  free(log);
}

#define BOTH(t)                                                           \
  cmocka_unit_test_setup_teardown(t, setup_recorded, env_teardown),       \
      cmocka_unit_test_setup_teardown(t, setup_fallback, env_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH(test_cb_replay_matches_direct_submission),
      BOTH(test_cb_binding_tables_and_constants_per_execute),
      BOTH(test_cb_execute_refuses_bad_binding_tables),
      BOTH(test_cb_executes_on_two_streams_at_once),
      BOTH(test_cb_failure_mid_replay_names_buffer_and_command),
      BOTH(test_cb_failed_launch_names_command),
      BOTH(test_cb_release_while_executing),
      BOTH(test_cb_100000_commands),
      BOTH(test_cb_random_dags_ordered_by_semaphores),
      BOTH(test_cb_misuse_is_refused),
      BOTH(test_cb_counters_count_replays),
      BOTH(test_cb_backend_failures_leave_a_usable_buffer),
      BOTH(test_cb_abort_on_destroy_stops_a_replay),
      BOTH(test_cb_events_order_executes_across_streams),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
