// Tunables and numerics of the reference kernels on the runtime
// (reference.axe on the host device): the metadata accel_kernel_info
// reports, bit-identical results across the whole tunable space of small
// shapes (matmul, quantized GEMV, attention), and ACCEL_CHECK_NUMERICS
// failing the stream of the kernel that produced a NaN or Inf, naming it.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_params.h"
#include "kernel_params.h"
#include "test_support.h"

#define MAX_BINDINGS 8

typedef struct fixture {
  accel_runtime_t *rt;
  accel_device_t *dev;
  accel_executable_t *exe;
  accel_stream_t *stream;
} fixture_t;

static void fixture_open(fixture_t *f, accel_runtime_flags_t flags) {
  accel_runtime_options_t o;
  accel_runtime_options_init(&o);
  o.flags = flags;
  assert_accel_ok(accel_runtime_create(&o, &f->rt));
  assert_accel_ok(accel_device_get(f->rt, 0, &f->dev));
  assert_accel_ok(accel_executable_load_file(
      f->rt, f->dev, getenv("ACCEL_TEST_REFERENCE_AXE"), 0, &f->exe));
  assert_accel_ok(accel_stream_create(f->dev, NULL, &f->stream));
}

static void fixture_close(fixture_t *f) {
  accel_stream_destroy(f->stream);
  accel_executable_release(f->exe);
  accel_runtime_destroy(f->rt);
}

// One launch's arguments: host copies of every binding.
typedef struct args {
  uint32_t count;
  void *host[MAX_BINDINGS];
  uint64_t bytes[MAX_BINDINGS];
} args_t;

static void *args_add(args_t *a, uint64_t bytes) {
  a->bytes[a->count] = bytes;
  a->host[a->count] = calloc(1, bytes ? bytes : 4);
  assert_non_null(a->host[a->count]);
  return a->host[a->count++];
}

static void args_free(args_t *a) {
  for (uint32_t i = 0; i < a->count; ++i) {
    free(a->host[i]);
  }
}

static float *random_floats(args_t *a, test_rng_t *rng, uint64_t n) {
  float *p = args_add(a, n * 4);
  for (uint64_t i = 0; i < n; ++i) {
    p[i] = (float)((double)test_rng_range(rng, 0, 2000000) / 1000000.0 - 1.0);
  }
  return p;
}

// Launches |kernel| on |groups| work-groups with |a|'s bindings (copied to
// device buffers) and |constants|; on success copies binding |out| back
// into |*out_bytes| (malloc'ed). Returns the stream's status.
static accel_status_t run(fixture_t *f, const char *kernel, const args_t *a,
                          const void *constants, uint32_t constants_size,
                          uint32_t groups, uint32_t out, void **out_bytes) {
  accel_kernel_t *k = NULL;
  assert_accel_ok(accel_executable_kernel(f->exe, kernel, &k));
  accel_buffer_t *bufs[MAX_BINDINGS];
  accel_launch_binding_t lb[MAX_BINDINGS];
  for (uint32_t i = 0; i < a->count; ++i) {
    accel_buffer_desc_t d = {.struct_size = sizeof(d),
                             .size_bytes = a->bytes[i] ? a->bytes[i] : 4};
    assert_accel_ok(accel_buffer_alloc(f->dev, &d, &bufs[i]));
    void *p = NULL;
    assert_accel_ok(accel_buffer_host_pointer(bufs[i], &p));
    memcpy(p, a->host[i], d.size_bytes);
    lb[i] = (accel_launch_binding_t){.buffer = bufs[i]};
  }
  accel_launch_desc_t desc = {.struct_size = sizeof(desc),
                              .workgroup_count = {groups, 1, 1},
                              .binding_count = a->count,
                              .bindings = lb,
                              .constants_size = constants_size,
                              .constants = constants};
  accel_status_t st = accel_launch(f->stream, k, &desc);
  if (st == ACCEL_OK) {
    st = accel_stream_synchronize(f->stream, ACCEL_TIMEOUT_INFINITE);
  }
  if (st == ACCEL_OK && out_bytes != NULL) {
    void *p = NULL;
    assert_accel_ok(accel_buffer_host_pointer(bufs[out], &p));
    *out_bytes = malloc(a->bytes[out]);
    memcpy(*out_bytes, p, a->bytes[out]);
  }
  for (uint32_t i = 0; i < a->count; ++i) {
    accel_buffer_release(bufs[i]);
  }
  return st;
}

static const accel_kernel_tunable_t *find_tunable(const accel_kernel_info_t *ki,
                                                  const char *name) {
  for (uint32_t t = 0; t < ki->tunable_count; ++t) {
    if (strcmp(ki->tunables[t].name, name) == 0) {
      return &ki->tunables[t];
    }
  }
  return NULL;
}

// The reference kernels report their tunables (the ones kernels/README.md
// names, at the constants offsets of kernel_params.h), version and binding
// element types through accel_kernel_info; an 0.1-sized info struct still
// works and gets none of it.
static void test_kernel_info_reports_tunables_and_types(void **state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, 0);
  accel_kernel_t *k = NULL;
  assert_accel_ok(accel_executable_kernel(f.exe, "matmul", &k));
  accel_kernel_info_t ki = {.struct_size = sizeof(ki)};
  assert_accel_ok(accel_kernel_info(k, &ki));
  assert_int_equal(ki.version, 1);
  // matmul's tile sizes pick OpenBLAS's call shape and so its reduction
  // order: they are not tunables, only the grid is.
  assert_int_equal(ki.tunable_count, 1);
  assert_null(find_tunable(&ki, "tile_n"));
  const accel_kernel_tunable_t *t = find_tunable(&ki, "workgroups");
  assert_non_null(t);
  assert_int_equal(t->kind, ACCEL_KERNEL_TUNABLE_WORKGROUPS);
  assert_int_equal(ki.binding_types[3], ACCEL_KERNEL_ELEM_F32);

  assert_accel_ok(accel_executable_kernel(f.exe, "qmatmul_q4_0", &k));
  assert_accel_ok(accel_kernel_info(k, &ki));
  t = find_tunable(&ki, "tile_n");
  assert_non_null(t);
  assert_int_equal(t->constants_offset,
                   offsetof(accel_kp_qmatmul_constants_t, tile_n));
  assert_int_equal(ki.binding_types[1], ACCEL_KERNEL_ELEM_OPAQUE);

  assert_accel_ok(accel_executable_kernel(f.exe, "argmax", &k));
  assert_accel_ok(accel_kernel_info(k, &ki));
  assert_int_equal(ki.tunable_count, 0);
  assert_null(ki.tunables);
  assert_int_equal(ki.binding_types[1], ACCEL_KERNEL_ELEM_I32);

  // A caller built against 0.1 passes the old size; the fields beyond it
  // stay untouched.
  struct {
    accel_kernel_info_t info;
    uint32_t canary;
  } old;
  memset(&old, 0xab, sizeof(old));
  old.info.struct_size = ACCEL_KERNEL_INFO_SIZE_0_1;
  assert_accel_ok(accel_kernel_info(k, &old.info));
  assert_int_equal(old.info.tunable_count, 0xabababab);
  old.info.struct_size = ACCEL_KERNEL_INFO_SIZE_0_1 - 4;
  assert_accel_status(accel_kernel_info(k, &old.info),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  fixture_close(&f);
}

// A launch's configuration: value of each tunable, 0 = default.
typedef struct space_case {
  const char *kernel;
  args_t args;
  uint32_t out;
  void *constants;
  uint32_t constants_size;
  uint32_t default_groups;
} space_case_t;

// Runs |c| with its default configuration, then with every combination of
// its kernel's tunable values, and requires the same output bytes.
static void check_space(fixture_t *f, space_case_t *c) {
  accel_kernel_t *k = NULL;
  assert_accel_ok(accel_executable_kernel(f->exe, c->kernel, &k));
  accel_kernel_info_t ki = {.struct_size = sizeof(ki)};
  assert_accel_ok(accel_kernel_info(k, &ki));
  assert_true(ki.tunable_count > 0);
  void *want = NULL;
  assert_accel_ok(run(f, c->kernel, &c->args, c->constants, c->constants_size,
                      c->default_groups, c->out, &want));
  uint32_t idx[8] = {0};
  uint8_t constants[256];
  uint32_t configs = 0;
  for (;;) {
    memcpy(constants, c->constants, c->constants_size);
    uint32_t groups = c->default_groups;
    char what[160];
    int used = snprintf(what, sizeof(what), "%s", c->kernel);
    for (uint32_t t = 0; t < ki.tunable_count; ++t) {
      const accel_kernel_tunable_t *tu = &ki.tunables[t];
      uint32_t v = tu->values[idx[t]];
      if (tu->kind == ACCEL_KERNEL_TUNABLE_WORKGROUPS) {
        groups = v;
      } else {
        memcpy(constants + tu->constants_offset, &v, 4);
      }
      used += snprintf(what + used, sizeof(what) - (size_t)used, " %s=%u",
                       tu->name, v);
    }
    void *got = NULL;
    assert_accel_ok(run(f, c->kernel, &c->args, constants, c->constants_size,
                        groups, c->out, &got));
    if (memcmp(got, want, c->args.bytes[c->out]) != 0) {
      fail_msg("%s gives other bytes than the default configuration", what);
    }
    free(got);
    ++configs;
    uint32_t t = 0;
    while (t < ki.tunable_count && ++idx[t] == ki.tunables[t].value_count) {
      idx[t++] = 0;
    }
    if (t == ki.tunable_count) {
      break;
    }
  }
  printf("%s: %u configurations, identical bytes\n", c->kernel, configs);
  free(want);
  args_free(&c->args);
}

// Every configuration of matmul (f32 and f16 operands, m = 1 and m = 37),
// of the quantized GEMV (int8, Q4_0) and of the attention kernels (prefill,
// decode) gives the default configuration's bytes on a small odd shape.
static void test_whole_space_gives_identical_bytes(void **state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, ACCEL_RUNTIME_FLAG_TUNING_OFF);
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  static const uint32_t matmul_m[] = {1, 37};
  for (uint32_t i = 0; i < 2; ++i) {
    accel_kp_matmul_constants_t mc = {.m = matmul_m[i], .n = 300, .k = 70,
                                      .flags = ACCEL_KP_MM_BIAS,
                                      .dtype_a = ACCEL_KP_DTYPE_F32,
                                      .dtype_b = ACCEL_KP_DTYPE_F32};
    space_case_t c = {.kernel = "matmul", .out = 3, .constants = &mc,
                      .constants_size = sizeof(mc), .default_groups = 4};
    random_floats(&c.args, &rng, (uint64_t)mc.m * mc.k);
    random_floats(&c.args, &rng, (uint64_t)mc.k * mc.n);
    random_floats(&c.args, &rng, mc.n);
    args_add(&c.args, (uint64_t)mc.m * mc.n * 4);
    check_space(&f, &c);
  }
  {
    accel_kp_qmatmul_constants_t qc = {.m = 1, .n = 203, .k = 96};
    space_case_t c = {.kernel = "qmatmul_int8", .out = 3, .constants = &qc,
                      .constants_size = sizeof(qc), .default_groups = 4};
    random_floats(&c.args, &rng, qc.k);
    int8_t *w = args_add(&c.args, (uint64_t)qc.n * qc.k);
    for (uint64_t i = 0; i < (uint64_t)qc.n * qc.k; ++i) {
      w[i] = (int8_t)test_rng_range(&rng, 0, 255);
    }
    float *s = random_floats(&c.args, &rng, qc.n);
    for (uint32_t i = 0; i < qc.n; ++i) s[i] = fabsf(s[i]) + 0.01f;
    args_add(&c.args, (uint64_t)qc.m * qc.n * 4);
    check_space(&f, &c);
  }
  {
    accel_kp_qmatmul_constants_t qc = {.m = 3, .n = 77, .k = 64};
    space_case_t c = {.kernel = "qmatmul_q4_0", .out = 2, .constants = &qc,
                      .constants_size = sizeof(qc), .default_groups = 2};
    random_floats(&c.args, &rng, (uint64_t)qc.m * qc.k);
    uint64_t blocks = (uint64_t)qc.n * qc.k / ACCEL_KP_QK;
    accel_kp_block_q4_0_t *w = args_add(&c.args, blocks * sizeof(*w));
    for (uint64_t b = 0; b < blocks; ++b) {
      w[b].d = accel_kp_f32_to_f16(0.01f + (float)(b % 7) * 0.003f);
      for (int j = 0; j < 16; ++j) {
        w[b].qs[j] = (uint8_t)test_rng_range(&rng, 0, 255);
      }
    }
    args_add(&c.args, (uint64_t)qc.m * qc.n * 4);
    check_space(&f, &c);
  }
  {
    accel_kp_attn_prefill_constants_t ac = {
        .q_len = 9, .kv_len = 41, .n_heads = 4, .n_kv_heads = 2,
        .head_dim = 16, .scale = 0.25f};
    space_case_t c = {.kernel = "attention_prefill", .out = 3,
                      .constants = &ac, .constants_size = sizeof(ac),
                      .default_groups = 3};
    random_floats(&c.args, &rng, 9ull * 4 * 16);
    random_floats(&c.args, &rng, 41ull * 2 * 16);
    random_floats(&c.args, &rng, 41ull * 2 * 16);
    args_add(&c.args, 9ull * 4 * 16 * 4);
    check_space(&f, &c);
  }
  {
    accel_kp_attn_decode_constants_t ac = {
        .num_seqs = 3, .max_len = 50, .n_heads = 4, .n_kv_heads = 2,
        .head_dim = 16, .scale = 0.25f};
    space_case_t c = {.kernel = "attention_decode", .out = 4,
                      .constants = &ac, .constants_size = sizeof(ac),
                      .default_groups = 2};
    random_floats(&c.args, &rng, 3ull * 4 * 16);
    random_floats(&c.args, &rng, 3ull * 50 * 2 * 16);
    random_floats(&c.args, &rng, 3ull * 50 * 2 * 16);
    uint32_t *lens = args_add(&c.args, 3 * 4);
    lens[0] = 50;
    lens[1] = 1;
    lens[2] = 33;
    args_add(&c.args, 3ull * 4 * 16 * 4);
    check_space(&f, &c);
  }
  fixture_close(&f);
}

// softmax over rows of which row |bad_row| is all -inf gives NaN there.
static accel_status_t softmax_with_bad_row(fixture_t *f, uint32_t bad_row,
                                           uint32_t rows, uint32_t cols) {
  args_t a = {0};
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  float *x = random_floats(&a, &rng, (uint64_t)rows * cols);
  for (uint32_t i = 0; i < cols; ++i) {
    x[bad_row * cols + i] = -INFINITY;
  }
  args_add(&a, (uint64_t)rows * cols * 4);
  accel_kp_softmax_constants_t c = {.rows = rows, .cols = cols};
  accel_status_t st = run(f, "softmax", &a, &c, sizeof(c), 2, 1, NULL);
  args_free(&a);
  return st;
}

// With ACCEL_CHECK_NUMERICS=1 the softmax that produced a NaN fails its
// stream with a message naming the kernel, the output binding, the first
// bad element and the input that was not finite; later work on the stream
// reports the same failure.
static void test_numerics_check_names_kernel_binding_and_element(
    void **state) {
  (void)state;
  setenv("ACCEL_CHECK_NUMERICS", "1", 1);
  fixture_t f;
  fixture_open(&f, 0);
  unsetenv("ACCEL_CHECK_NUMERICS");
  assert_accel_status(softmax_with_bad_row(&f, 5, 8, 24),
                      ACCEL_ERROR_ABORTED);
  const char *msg = accel_last_error();
  if (strstr(msg, "kernel \"softmax\" wrote NaN to binding 1 (y) at element "
                  "120 of 192") == NULL ||
      strstr(msg, "binding 0 (x) not finite (-inf at element 120)") == NULL) {
    fail_msg("unexpected message: %s", msg);
  }
  assert_accel_status(accel_stream_synchronize(f.stream, 0),
                      ACCEL_ERROR_ABORTED);
  fixture_close(&f);
}

// A NaN born from finite inputs (rmsnorm of a zero row with eps 0: 0 * inf)
// is reported with the inputs finite; the runtime option does the same as
// the environment variable.
static void test_numerics_check_reports_finite_inputs(void **state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, ACCEL_RUNTIME_FLAG_CHECK_NUMERICS);
  args_t a = {0};
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  uint32_t rows = 4, cols = 40;
  float *x = random_floats(&a, &rng, (uint64_t)rows * cols);
  memset(x + 2 * cols, 0, cols * 4);
  random_floats(&a, &rng, cols);
  args_add(&a, (uint64_t)rows * cols * 4);
  accel_kp_norm_constants_t c = {.rows = rows, .cols = cols, .eps = 0};
  assert_accel_status(run(&f, "rmsnorm", &a, &c, sizeof(c), 3, 2, NULL),
                      ACCEL_ERROR_ABORTED);
  const char *msg = accel_last_error();
  if (strstr(msg, "kernel \"rmsnorm\" wrote NaN to binding 2 (y) at element "
                  "80 of 160") == NULL ||
      strstr(msg, "binding 0 (x) finite, binding 1 (gamma) finite") == NULL) {
    fail_msg("unexpected message: %s", msg);
  }
  args_free(&a);
  fixture_close(&f);
}

// A launch recorded in a command buffer is checked when the buffer is
// executed: the execute's stream fails naming the kernel and element.
static void test_numerics_check_covers_command_buffer_launches(void **state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, ACCEL_RUNTIME_FLAG_CHECK_NUMERICS);
  uint32_t rows = 4, cols = 16;
  accel_buffer_t *x = NULL, *y = NULL;
  accel_buffer_desc_t d = {.struct_size = sizeof(d),
                           .size_bytes = rows * cols * 4};
  assert_accel_ok(accel_buffer_alloc(f.dev, &d, &x));
  assert_accel_ok(accel_buffer_alloc(f.dev, &d, &y));
  float *xp = NULL;
  assert_accel_ok(accel_buffer_host_pointer(x, (void **)&xp));
  for (uint32_t i = 0; i < rows * cols; ++i) {
    xp[i] = (float)i / 64.0f;
  }
  xp[3 * cols + 7] = NAN;  // row 3 becomes NaN
  accel_kernel_t *k = NULL;
  assert_accel_ok(accel_executable_kernel(f.exe, "softmax", &k));
  accel_command_buffer_desc_t cd = {.struct_size = sizeof(cd),
                                    .name = "numerics"};
  accel_command_buffer_t *cb = NULL;
  assert_accel_ok(accel_command_buffer_create(f.dev, &cd, &cb));
  accel_command_buffer_ref_t binds[2] = {{.buffer = x}, {.buffer = y}};
  accel_kp_softmax_constants_t c = {.rows = rows, .cols = cols};
  accel_command_buffer_launch_desc_t ld = {.struct_size = sizeof(ld),
                                           .workgroup_count = {2, 1, 1},
                                           .binding_count = 2,
                                           .constants_size = sizeof(c),
                                           .bindings = binds,
                                           .constants = &c};
  assert_accel_ok(accel_command_buffer_launch(cb, k, &ld));
  assert_accel_ok(accel_command_buffer_finalize(cb));
  assert_accel_ok(accel_stream_execute(f.stream, cb, NULL));
  assert_accel_status(accel_stream_synchronize(f.stream, ACCEL_TIMEOUT_INFINITE),
                      ACCEL_ERROR_ABORTED);
  const char *msg = accel_last_error();
  if (strstr(msg, "kernel \"softmax\" wrote NaN to binding 1 (y) at element "
                  "48 of 64") == NULL ||
      strstr(msg, "binding 0 (x) not finite (nan at element 55)") == NULL) {
    fail_msg("unexpected message: %s", msg);
  }
  accel_command_buffer_release(cb);
  accel_buffer_release(x);
  accel_buffer_release(y);
  fixture_close(&f);
}

// Off by default: the same NaN passes unnoticed, and ACCEL_CHECK_NUMERICS=0
// turns the option off again.
static void test_numerics_check_is_off_by_default(void **state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, 0);
  assert_accel_ok(softmax_with_bad_row(&f, 1, 3, 8));
  fixture_close(&f);
  setenv("ACCEL_CHECK_NUMERICS", "0", 1);
  fixture_open(&f, ACCEL_RUNTIME_FLAG_CHECK_NUMERICS);
  unsetenv("ACCEL_CHECK_NUMERICS");
  assert_accel_ok(softmax_with_bad_row(&f, 1, 3, 8));
  fixture_close(&f);
  setenv("ACCEL_CHECK_NUMERICS", "maybe", 1);
  accel_runtime_t *rt = NULL;
  assert_accel_status(accel_runtime_create(NULL, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  unsetenv("ACCEL_CHECK_NUMERICS");
}

int main(void) {
  unsetenv("ACCEL_CHECK_NUMERICS");
  // The tests must not read or write the user's tuning cache.
  setenv("ACCEL_TUNING_CACHE", "/nonexistent/accel-test-tuning-cache", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kernel_info_reports_tunables_and_types),
      cmocka_unit_test(test_whole_space_gives_identical_bytes),
      cmocka_unit_test(test_numerics_check_names_kernel_binding_and_element),
      cmocka_unit_test(test_numerics_check_reports_finite_inputs),
      cmocka_unit_test(test_numerics_check_covers_command_buffer_launches),
      cmocka_unit_test(test_numerics_check_is_off_by_default),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
