// The CUDA reference kernels (kernels/cuda) on the SIMT emulator: each
// kernel against a float64 reference written here (random inputs, seeds
// fixed per test and printed; ACCEL_TEST_SEED replays another), with the
// fibers run forward, reversed and in two seeded random orders and on
// several grids, all required to give the same bytes; bit for bit against
// the host kernels (kernels/host, run directly from libaccel_kernels.so)
// where both promise the same reduction order; refused launches; and the
// emulator's own checks: a planted missing __syncthreads changes the result
// under a permuted order, a mask mismatch and a deadlock are reported.
//
// What this proves and what it does not: docs/cuda-backend.md, "The SIMT
// emulator".
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_params.h"
#include "kernel_harness.h"
#include "kernel_params.h"
#include "kernel_runner.h"
#include "simt_emulator.h"
#include "test_support.h"

const accel_simt_kernel_t *simt_test_kernel(const char *name);

#define MAXB 8

static kernel_lib_t *g_host;  // libaccel_kernels.so, NULL when not built

// ---------------------------------------------------------------------------
// Random inputs

static void rng_init(test_rng_t *rng, const char *name) {
  const char *text = getenv("ACCEL_TEST_SEED");
  uint64_t seed = 0xcbf29ce484222325ull;  // FNV-1a of the test's name
  for (const char *p = name; *p; ++p) seed = (seed ^ (uint8_t)*p) * 0x100000001b3ull;
  if (text != NULL) seed = strtoull(text, NULL, 0);
  fprintf(stderr, "%s: seed %llu (replay with ACCEL_TEST_SEED=%llu)\n", name,
          (unsigned long long)seed, (unsigned long long)seed);
  rng->state = seed ? seed : 1;
}

static double uniform(test_rng_t *rng, double lo, double hi) {
  return lo + (hi - lo) * ((double)(test_rng_next(rng) >> 11) / 9007199254740992.0);
}

static float *random_floats(test_rng_t *rng, uint64_t n, double lo, double hi) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  assert_non_null(p);
  for (uint64_t i = 0; i < n; ++i) p[i] = (float)uniform(rng, lo, hi);
  return p;
}

// ---------------------------------------------------------------------------
// Launch cases

typedef struct ck_case {
  const char *kernel;
  uint32_t binding_count;
  const void *data[MAXB];  // initial contents (NULL: zeros)
  uint64_t bytes[MAXB];
  uint32_t written;        // bit i: binding i is an output
  const void *constants;
  uint32_t constants_size;
} ck_case_t;

// Fresh copies of the case's bindings, each exactly as long as bound.
static void **ck_buffers(const ck_case_t *c) {
  void **b = calloc(MAXB, sizeof(void *));
  assert_non_null(b);
  for (uint32_t i = 0; i < c->binding_count; ++i) {
    b[i] = calloc(1, c->bytes[i] ? c->bytes[i] : 1);
    assert_non_null(b[i]);
    if (c->data[i] != NULL) memcpy(b[i], c->data[i], c->bytes[i]);
  }
  return b;
}

static void ck_free(const ck_case_t *c, void **b) {
  if (b == NULL) return;
  for (uint32_t i = 0; i < c->binding_count; ++i) free(b[i]);
  free(b);
}

// Runs |c| on the emulator; returns the accel_simt_result and the buffers
// in |*out| (free with ck_free).
static int ck_run_cuda(const ck_case_t *c, uint32_t grid, accel_simt_order_t order,
                       uint64_t seed, void ***out, char *message, size_t size) {
  const accel_simt_kernel_t *k = accel_simt_kernel_find(c->kernel);
  assert_non_null(k);
  assert_int_equal(k->param_count, 2 * c->binding_count + 1);
  void **b = ck_buffers(c);
  uint64_t lens[MAXB];
  void *params[2 * MAXB + 1];
  for (uint32_t i = 0; i < c->binding_count; ++i) {
    lens[i] = c->bytes[i];
    params[i] = &b[i];
    params[c->binding_count + i] = &lens[i];
  }
  params[2 * c->binding_count] = (void *)c->constants;
  accel_simt_launch_t launch = {.kernel = k,
                                .grid = {grid, 1, 1},
                                .block = {128, 1, 1},
                                .params = params,
                                .order = order,
                                .seed = seed};
  int rc = accel_simt_run(&launch, message, size);
  *out = b;
  return rc;
}

// Runs |c| with the host kernel of the same name (kernel_runner), one
// work-group per unit-ish grid; returns its buffers, or NULL without the
// host code object.
static void **ck_run_host(const ck_case_t *c, uint32_t grid) {
  if (g_host == NULL) return NULL;
  void **b = ck_buffers(c);
  kernel_launch_t l = {.fn = kernel_lib_find(g_host, c->kernel),
                       .grid = {grid, 1, 1},
                       .binding_count = c->binding_count,
                       .constants = c->constants,
                       .constants_size = c->constants_size,
                       .threads = 2,
                       .order_seed = 7};
  for (uint32_t i = 0; i < c->binding_count; ++i) {
    l.bindings[i] = (accel_kernel_binding_t){
        .data = b[i],
        .size_bytes = c->bytes[i],
        .access = (c->written >> i & 1u) ? ACCEL_KERNEL_ACCESS_READ | ACCEL_KERNEL_ACCESS_WRITE
                                         : ACCEL_KERNEL_ACCESS_READ};
  }
  char message[512];
  assert_int_equal(kernel_run(&l, message, sizeof(message)), 0);
  return b;
}

static void ck_assert_same(const ck_case_t *c, void **want, void **got,
                           const char *what) {
  for (uint32_t i = 0; i < c->binding_count; ++i) {
    if (!(c->written >> i & 1u)) continue;
    if (memcmp(want[i], got[i], c->bytes[i]) != 0) {
      const uint32_t *a = want[i], *b = got[i];
      for (uint64_t e = 0; e < c->bytes[i] / 4; ++e) {
        if (a[e] != b[e]) {
          fprintf(stderr,
                  "%s %s: binding %u element %llu: 0x%08x (%g) against "
                  "0x%08x (%g)\n",
                  c->kernel, what, i, (unsigned long long)e, a[e],
                  (double)((const float *)want[i])[e], b[e],
                  (double)((const float *)got[i])[e]);
          break;
        }
      }
      fail_msg("%s: %s differs", c->kernel, what);
    }
  }
}

// Runs |c| on the emulator over the grids 1, 2, |units| and |units| + 3 and
// the orders forward, reverse and two random ones, requiring identical
// bytes; with |host_bits|, also requires the host kernel's bytes. Returns
// the first run's buffers.
static void **ck_check(const ck_case_t *c, uint64_t units, int host_bits) {
  void **first = NULL;
  char message[1024];
  const uint32_t grids[] = {1, 2, (uint32_t)(units ? units : 1),
                            (uint32_t)units + 3};
  const struct {
    accel_simt_order_t order;
    uint64_t seed;
  } orders[] = {{ACCEL_SIMT_ORDER_FORWARD, 0},
                {ACCEL_SIMT_ORDER_REVERSE, 1},
                {ACCEL_SIMT_ORDER_RANDOM, 2},
                {ACCEL_SIMT_ORDER_RANDOM, 3}};
  for (size_t g = 0; g < 4; ++g) {
    for (size_t o = 0; o < 4; ++o) {
      // Every order on one grid, every grid in one order.
      if (g != 2 && o != 0) continue;
      void **got;
      int rc = ck_run_cuda(c, grids[g], orders[o].order, orders[o].seed, &got,
                           message, sizeof(message));
      if (rc != ACCEL_SIMT_OK) {
        fail_msg("%s: emulator result %d: %s", c->kernel, rc, message);
      }
      if (first == NULL) {
        first = got;
        continue;
      }
      char what[64];
      snprintf(what, sizeof(what), "grid %u order %d", grids[g],
               (int)orders[o].order);
      ck_assert_same(c, first, got, what);
      ck_free(c, got);
    }
  }
  if (host_bits) {
    void **host = ck_run_host(c, (uint32_t)(units ? units : 1));
    if (host != NULL) {
      ck_assert_same(c, host, first, "against the host kernel");
      ck_free(c, host);
    }
  }
  return first;
}

// Asserts that |c| is refused with a message containing |needle|.
static void ck_expect_failure(const ck_case_t *c, const char *needle) {
  void **b;
  char message[1024];
  int rc = ck_run_cuda(c, 2, ACCEL_SIMT_ORDER_FORWARD, 0, &b, message,
                       sizeof(message));
  ck_free(c, b);
  if (rc != ACCEL_SIMT_KERNEL_FAILED || strstr(message, needle) == NULL) {
    fail_msg("%s: expected a refusal with \"%s\", got %d \"%s\"", c->kernel,
             needle, rc, message);
  }
}

// Largest |got - want| / (abs + rel * |want|) must be <= 1.
static void ck_close(const char *what, const float *got, const double *want,
                     uint64_t n, double tol_abs, double tol_rel) {
  for (uint64_t i = 0; i < n; ++i) {
    double bound = tol_abs + tol_rel * fabs(want[i]);
    if (!(fabs((double)got[i] - want[i]) <= bound)) {
      fail_msg("%s: element %llu is %.9g, float64 gives %.9g (bound %.3g)",
               what, (unsigned long long)i, (double)got[i], want[i], bound);
    }
  }
}

// ---------------------------------------------------------------------------
// The emulator itself

static int run_test_kernel(const char *name, uint32_t threads,
                           accel_simt_order_t order, uint64_t seed,
                           const float *in, float *out, char *message,
                           size_t size) {
  const accel_simt_kernel_t *k = simt_test_kernel(name);
  assert_non_null(k);
  void *params[2] = {&in, &out};
  accel_simt_launch_t l = {.kernel = k,
                           .grid = {2, 1, 1},
                           .block = {threads, 1, 1},
                           .params = params,
                           .order = order,
                           .seed = seed};
  return accel_simt_run(&l, message, size);
}

// A planted missing __syncthreads: with the barrier every order gives the
// reversal; without it, some permuted order reads shared memory before it
// was written and the result is wrong.
static void test_emulator_permutation_catches_missing_barrier(void **state) {
  (void)state;
  float in[512], out[512];
  char message[256];
  for (int i = 0; i < 512; ++i) in[i] = (float)i;
  const accel_simt_order_t orders[] = {ACCEL_SIMT_ORDER_FORWARD,
                                       ACCEL_SIMT_ORDER_REVERSE,
                                       ACCEL_SIMT_ORDER_RANDOM};
  for (int o = 0; o < 3; ++o) {
    memset(out, 0, sizeof(out));
    assert_int_equal(run_test_kernel("reverse_ok", 256, orders[o], 5, in, out,
                                     message, sizeof(message)),
                     ACCEL_SIMT_OK);
    for (int i = 0; i < 512; ++i) {
      assert_true(out[i] == in[(i / 256) * 256 + 255 - i % 256]);
    }
  }
  int wrong_orders = 0;
  for (int o = 0; o < 3; ++o) {
    memset(out, 0, sizeof(out));
    assert_int_equal(run_test_kernel("reverse_racy", 256, orders[o], 5, in,
                                     out, message, sizeof(message)),
                     ACCEL_SIMT_OK);
    int wrong = 0;
    for (int i = 0; i < 512; ++i) {
      wrong |= !(out[i] == in[(i / 256) * 256 + 255 - i % 256]);
    }
    wrong_orders += wrong;
  }
  // Forward order: thread t reads s[255 - t] before thread 255 - t wrote it
  // (for t < 128); reverse: the other half; random: some.
  assert_int_equal(wrong_orders, 3);
}

// Shuffles and ballots give the warp's values in every order.
static void test_emulator_warp_operations(void **state) {
  (void)state;
  float in[64], out[64];
  char message[256];
  for (int i = 0; i < 32; ++i) in[i] = (float)(i % 3) - 1.0f;
  for (int o = 0; o < 3; ++o) {
    memset(out, 0, sizeof(out));
    assert_int_equal(run_test_kernel("warp_sum", 32, (accel_simt_order_t)o, 9,
                                     in, out, message, sizeof(message)),
                     ACCEL_SIMT_OK);
    float sum = 0;
    uint32_t ballot = 0;
    for (int i = 0; i < 32; ++i) {
      sum += in[i];
      if (in[i] > 0) ballot |= 1u << i;
    }
    for (int i = 0; i < 32; ++i) assert_true(out[i] == sum);
    uint32_t got;
    memcpy(&got, &out[32], sizeof(got));
    assert_int_equal(got, ballot);
  }
}

// Lanes passing different masks, and a deadlock, are reported as misuse.
static void test_emulator_reports_misuse(void **state) {
  (void)state;
  float in[128] = {0}, out[128];
  char message[256];
  assert_int_equal(run_test_kernel("mask_mismatch", 32,
                                   ACCEL_SIMT_ORDER_FORWARD, 0, in, out,
                                   message, sizeof(message)),
                   ACCEL_SIMT_MISUSE);
  assert_non_null(strstr(message, "mask"));
  assert_int_equal(run_test_kernel("deadlock", 64, ACCEL_SIMT_ORDER_RANDOM, 1,
                                   in, out, message, sizeof(message)),
                   ACCEL_SIMT_MISUSE);
  assert_non_null(strstr(message, "deadlocked"));
  // A malformed launch.
  accel_simt_launch_t l = {.kernel = simt_test_kernel("warp_sum"),
                           .grid = {1, 1, 1},
                           .block = {2048, 1, 1}};
  assert_int_equal(accel_simt_run(&l, message, sizeof(message)),
                   ACCEL_SIMT_MISUSE);
}

// The emulated WMMA API: a 16 x 16 x 16 bf16 product with a col_major
// matrix_b and an accumulator that starts at 0.5 matches the exact product
// in every fiber order; lanes that pass different addresses to a
// warp-collective load fail the launch naming the operation (as KC_FAIL).
static void test_emulator_wmma_is_warp_collective(void **state) {
  (void)state;
  test_rng_t rng;
  rng_init(&rng, "wmma");
  static float in[1024], out[512];
  for (int i = 0; i < 1024; ++i) {
    in[i] = (float)((int)test_rng_range(&rng, 0, 16) - 8);
  }
  static const accel_simt_order_t orders[] = {
      ACCEL_SIMT_ORDER_FORWARD, ACCEL_SIMT_ORDER_REVERSE,
      ACCEL_SIMT_ORDER_RANDOM};
  char message[256];
  for (int o = 0; o < 3; ++o) {
    memset(out, 0, sizeof(out));
    assert_int_equal(run_test_kernel("wmma_product", 32, orders[o], 3, in, out,
                                     message, sizeof(message)),
                     ACCEL_SIMT_OK);
    for (int blk = 0; blk < 2; ++blk) {
      const float *a = in + blk * 512, *b = a + 256;
      for (int i = 0; i < 16; ++i) {
        for (int j = 0; j < 16; ++j) {
          double want = 0.5;
          for (int p = 0; p < 16; ++p) want += a[i * 16 + p] * b[j * 16 + p];
          assert_true(out[blk * 256 + i * 16 + j] == (float)want);
        }
      }
    }
  }
  assert_int_equal(run_test_kernel("wmma_lanes_disagree", 32,
                                   ACCEL_SIMT_ORDER_FORWARD, 0, in, out,
                                   message, sizeof(message)),
                   ACCEL_SIMT_KERNEL_FAILED);
  assert_non_null(strstr(message, "load_matrix_sync"));
}

// Every kernel of kernels/cuda is in the emulator's table.
static void test_emulator_has_every_kernel(void **state) {
  (void)state;
  size_t n;
  const accel_simt_kernel_t *all = accel_simt_kernels(&n);
  assert_true(n >= 19);
  for (size_t i = 0; i < n; ++i) {
    assert_ptr_equal(accel_simt_kernel_find(all[i].name), &all[i]);
  }
  assert_null(accel_simt_kernel_find("no_such_kernel"));
}

// ---------------------------------------------------------------------------
// Elementwise

// add, mul (with and without a broadcast row), swiglu and each activation
// against float64, bit for bit against the host kernels.
static void test_eltwise_kernels_match_float64_and_host(void **state) {
  (void)state;
  test_rng_t rng;
  rng_init(&rng, "eltwise");
  const uint32_t count = 40000;
  float *a = random_floats(&rng, count, -6, 6);
  float *b = random_floats(&rng, count, -6, 6);
  double *want = malloc(count * sizeof(double));
  assert_non_null(want);
  const char *binary[] = {"add", "mul"};
  for (int k = 0; k < 2; ++k) {
    for (uint32_t b_count = 0; b_count <= 100; b_count += 100) {
      accel_kp_eltwise_constants_t c = {.count = count, .b_count = b_count};
      uint32_t period = b_count ? b_count : count;
      ck_case_t cs = {.kernel = binary[k], .binding_count = 3,
                      .data = {a, b, NULL},
                      .bytes = {4ull * count, 4ull * period, 4ull * count},
                      .written = 4, .constants = &c, .constants_size = sizeof(c)};
      void **out = ck_check(&cs, accel_kp_eltwise_units(&c), 1);
      for (uint32_t i = 0; i < count; ++i) {
        want[i] = k ? (double)a[i] * b[i % period] : (double)a[i] + b[i % period];
      }
      ck_close(binary[k], out[2], want, count, 0, 6e-8);
      ck_free(&cs, out);
    }
  }
  for (uint32_t op = 1; op < ACCEL_KP_ACT_COUNT; ++op) {
    accel_kp_eltwise_constants_t c = {.count = count, .op = op};
    ck_case_t cs = {.kernel = "activation", .binding_count = 2,
                    .data = {a, NULL}, .bytes = {4ull * count, 4ull * count},
                    .written = 2, .constants = &c, .constants_size = sizeof(c)};
    void **out = ck_check(&cs, accel_kp_eltwise_units(&c), 1);
    for (uint32_t i = 0; i < count; ++i) want[i] = kt_activation(op, a[i]);
    ck_close("activation", out[1], want, count, 1e-6, 2e-6);
    ck_free(&cs, out);
  }
  accel_kp_eltwise_constants_t c = {.count = count};
  ck_case_t cs = {.kernel = "swiglu", .binding_count = 3, .data = {a, b, NULL},
                  .bytes = {4ull * count, 4ull * count, 4ull * count},
                  .written = 4, .constants = &c, .constants_size = sizeof(c)};
  void **out = ck_check(&cs, accel_kp_eltwise_units(&c), 1);
  for (uint32_t i = 0; i < count; ++i) {
    want[i] = kt_activation(ACCEL_KP_ACT_SILU, a[i]) * b[i];
  }
  ck_close("swiglu", out[2], want, count, 1e-6, 2e-6);
  ck_free(&cs, out);
  // Refused: b_count that does not divide count; a short output.
  c.b_count = 7;
  cs.kernel = "add";
  ck_expect_failure(&cs, "constants not valid");
  c.b_count = 0;
  cs.bytes[2] = 4ull * count - 4;
  ck_expect_failure(&cs, "binding 2 (y) holds");
  free(want);
  free(a);
  free(b);
}

// ---------------------------------------------------------------------------
// Row kernels

static void test_row_kernels_match_float64_and_host(void **state) {
  (void)state;
  test_rng_t rng;
  rng_init(&rng, "rows");
  const uint32_t rows = 13, cols = 77;
  float *x = random_floats(&rng, rows * cols, -4, 4);
  float *gamma = random_floats(&rng, cols, 0.5, 1.5);
  float *beta = random_floats(&rng, cols, -1, 1);
  double want[13 * 77];
  // softmax with a scale.
  accel_kp_softmax_constants_t sc = {.rows = rows, .cols = cols, .scale = 0.5f};
  ck_case_t cs = {.kernel = "softmax", .binding_count = 2, .data = {x, NULL},
                  .bytes = {4ull * rows * cols, 4ull * rows * cols},
                  .written = 2, .constants = &sc, .constants_size = sizeof(sc)};
  void **out = ck_check(&cs, rows, 1);
  for (uint32_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (uint32_t i = 0; i < cols; ++i) max = fmax(max, 0.5 * x[r * cols + i]);
    for (uint32_t i = 0; i < cols; ++i) sum += exp(0.5 * x[r * cols + i] - max);
    for (uint32_t i = 0; i < cols; ++i) {
      want[r * cols + i] = exp(0.5 * x[r * cols + i] - max) / sum;
    }
  }
  ck_close("softmax", out[1], want, rows * cols, 1e-9, 1e-5);
  ck_free(&cs, out);
  // layernorm and rmsnorm.
  for (int layer = 0; layer < 2; ++layer) {
    accel_kp_norm_constants_t nc = {.rows = rows, .cols = cols, .eps = 1e-5f};
    ck_case_t ns = {.kernel = layer ? "layernorm" : "rmsnorm",
                    .binding_count = layer ? 4u : 3u,
                    .constants = &nc, .constants_size = sizeof(nc)};
    ns.data[0] = x;
    ns.bytes[0] = 4ull * rows * cols;
    ns.data[1] = gamma;
    ns.bytes[1] = 4ull * cols;
    if (layer) {
      ns.data[2] = beta;
      ns.bytes[2] = 4ull * cols;
    }
    ns.bytes[ns.binding_count - 1] = 4ull * rows * cols;
    ns.written = 1u << (ns.binding_count - 1);
    out = ck_check(&ns, rows, 1);
    for (uint32_t r = 0; r < rows; ++r) {
      const float *xr = x + r * cols;
      double mean = 0, var = 0;
      if (layer) {
        for (uint32_t i = 0; i < cols; ++i) mean += xr[i];
        mean /= cols;
      }
      for (uint32_t i = 0; i < cols; ++i) var += (xr[i] - mean) * (xr[i] - mean);
      var /= cols;
      for (uint32_t i = 0; i < cols; ++i) {
        want[r * cols + i] = (xr[i] - mean) / sqrt(var + 1e-5) * gamma[i] +
                             (layer ? beta[i] : 0.0);
      }
    }
    ck_close(ns.kernel, out[ns.binding_count - 1], want, rows * cols, 1e-5,
             1e-5);
    ck_free(&ns, out);
    ns.bytes[1] = 4ull * cols - 4;
    ck_expect_failure(&ns, "binding 1 (gamma) holds");
  }
  // rope, both pairings, a partial rotary dimension.
  const uint32_t tokens = 5, heads = 3, hd = 16;
  int32_t pos[5];
  for (int t = 0; t < 5; ++t) pos[t] = (int32_t)test_rng_range(&rng, 0, 1000);
  for (uint32_t mode = 0; mode < 2; ++mode) {
    accel_kp_rope_constants_t rc = {.tokens = tokens, .heads = heads,
                                    .head_dim = hd, .rotary_dim = 12,
                                    .mode = mode, .base = 10000.0f};
    ck_case_t rs = {.kernel = "rope", .binding_count = 2, .data = {x, pos},
                    .bytes = {4ull * tokens * heads * hd, 4ull * tokens},
                    .written = 1, .constants = &rc, .constants_size = sizeof(rc)};
    out = ck_check(&rs, tokens, 1);
    for (uint32_t t = 0; t < tokens; ++t) {
      for (uint32_t h = 0; h < heads; ++h) {
        const float *in = x + (t * heads + h) * hd;
        double *w = want + (t * heads + h) * hd;
        for (uint32_t i = 0; i < hd; ++i) w[i] = in[i];
        for (uint32_t p = 0; p < 6; ++p) {
          double th = pos[t] * pow(10000.0, -2.0 * p / 12.0);
          uint32_t i0 = mode ? p : 2 * p, i1 = mode ? p + 6 : 2 * p + 1;
          w[i0] = in[i0] * cos(th) - in[i1] * sin(th);
          w[i1] = in[i0] * sin(th) + in[i1] * cos(th);
        }
      }
    }
    ck_close("rope", out[0], want, tokens * heads * hd, 1e-6, 1e-6);
    ck_free(&rs, out);
  }
  free(x);
  free(gamma);
  free(beta);
}

// ---------------------------------------------------------------------------
// Gather and selection

// The ranking of topk for qsort: larger value first, numbers before NaN,
// lower index first on ties.
static const float *g_rank_row;
static int rank_compare(const void *pa, const void *pb) {
  int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
  float va = g_rank_row[a], vb = g_rank_row[b];
  if (isnan(va) != isnan(vb)) return isnan(va) ? 1 : -1;
  if (!isnan(va) && va != vb) return va > vb ? -1 : 1;
  return a < b ? -1 : (a > b);
}

static void test_select_kernels_are_exact(void **state) {
  (void)state;
  test_rng_t rng;
  rng_init(&rng, "select");
  const uint32_t vocab = 50, dim = 37, tokens = 9;
  int32_t ids[9];
  for (int t = 0; t < 9; ++t) ids[t] = (int32_t)test_rng_range(&rng, 0, vocab - 1);
  uint16_t *table16 = malloc(2ull * vocab * dim);
  float *table32 = random_floats(&rng, vocab * dim, -3, 3);
  assert_non_null(table16);
  for (uint32_t i = 0; i < vocab * dim; ++i) {
    table16[i] = (uint16_t)test_rng_range(&rng, 0, 0x7bff) |
                 (uint16_t)(test_rng_next(&rng) & 0x8000);
  }
  double want[9 * 37];
  for (uint32_t dtype = 1; dtype <= 3; ++dtype) {
    accel_kp_embedding_constants_t ec = {.tokens = tokens, .vocab = vocab,
                                         .dim = dim, .dtype = dtype};
    ck_case_t es = {.kernel = "embedding", .binding_count = 3,
                    .data = {dtype == 1 ? (void *)table32 : (void *)table16, ids,
                             NULL},
                    .bytes = {(dtype == 1 ? 4ull : 2ull) * vocab * dim,
                              4ull * tokens, 4ull * tokens * dim},
                    .written = 4, .constants = &ec, .constants_size = sizeof(ec)};
    void **out = ck_check(&es, tokens, 1);
    for (uint32_t t = 0; t < tokens; ++t) {
      for (uint32_t j = 0; j < dim; ++j) {
        uint32_t e = (uint32_t)ids[t] * dim + j;
        uint16_t h = table16[e];
        want[t * dim + j] = dtype == 1   ? table32[e]
                            : dtype == 2 ? kt_f16_value(h)
                                         : kt_bf16_value(h);
      }
    }
    ck_close("embedding", out[2], want, tokens * dim, 0, 0);
    ck_free(&es, out);
  }
  ids[4] = (int32_t)vocab;
  accel_kp_embedding_constants_t ec = {.tokens = tokens, .vocab = vocab,
                                       .dim = dim, .dtype = 1};
  ck_case_t es = {.kernel = "embedding", .binding_count = 3,
                  .data = {table32, ids, NULL},
                  .bytes = {4ull * vocab * dim, 4ull * tokens, 4ull * tokens * dim},
                  .written = 4, .constants = &ec, .constants_size = sizeof(ec)};
  ck_expect_failure(&es, "token 4 has id 50");
  // argmax: ties (lowest index wins), NaN ignored, an all-NaN row gives 0.
  const uint32_t rows = 9, cols = 100;
  float *x = random_floats(&rng, rows * cols, -10, 10);
  for (uint32_t i = 0; i < cols; ++i) x[1 * cols + i] = (float)(i % 7);
  for (uint32_t i = 0; i < cols; i += 3) x[2 * cols + i] = NAN;
  x[2 * cols + 50] = 100.0f;
  for (uint32_t i = 0; i < cols; ++i) x[3 * cols + i] = NAN;
  accel_kp_select_constants_t sc = {.rows = rows, .cols = cols};
  ck_case_t as = {.kernel = "argmax", .binding_count = 2, .data = {x, NULL},
                  .bytes = {4ull * rows * cols, 4ull * rows}, .written = 2,
                  .constants = &sc, .constants_size = sizeof(sc)};
  void **out = ck_check(&as, rows, 1);
  for (uint32_t r = 0; r < rows; ++r) {
    int32_t best = -1;
    for (uint32_t i = 0; i < cols; ++i) {
      float v = x[r * cols + i];
      if (!isnan(v) && (best < 0 || v > x[r * cols + best])) best = (int32_t)i;
    }
    assert_int_equal(((int32_t *)out[1])[r], best < 0 ? 0 : best);
  }
  assert_int_equal(((int32_t *)out[1])[1], 6);
  assert_int_equal(((int32_t *)out[1])[2], 50);
  assert_int_equal(((int32_t *)out[1])[3], 0);
  ck_free(&as, out);
  // topk: the first k of the rows sorted by the ranking (qsort here).
  const uint32_t k = 37;
  for (uint32_t i = 0; i < cols; i += 5) x[4 * cols + i] = x[4 * cols];  // ties
  sc.k = k;
  ck_case_t ts = {.kernel = "topk", .binding_count = 3, .data = {x, NULL, NULL},
                  .bytes = {4ull * rows * cols, 4ull * rows * k, 4ull * rows * k},
                  .written = 6, .constants = &sc, .constants_size = sizeof(sc)};
  out = ck_check(&ts, rows, 1);
  int32_t order[100];
  for (uint32_t r = 0; r < rows; ++r) {
    g_rank_row = x + r * cols;
    for (uint32_t i = 0; i < cols; ++i) order[i] = (int32_t)i;
    qsort(order, cols, sizeof(order[0]), rank_compare);
    for (uint32_t o = 0; o < k; ++o) {
      assert_int_equal(((int32_t *)out[2])[r * k + o], order[o]);
      float expect = x[r * cols + order[o]], got = ((float *)out[1])[r * k + o];
      assert_memory_equal(&got, &expect, sizeof(got));
    }
  }
  ck_free(&ts, out);
  sc.k = cols + 1;
  ck_expect_failure(&ts, "topk: k 101 must be 1 to min(cols 100");
  free(x);
  free(table16);
  free(table32);
}

// ---------------------------------------------------------------------------
// Quantized matmul / GEMV

// f32 -> binary16 bits by rounding down to a representable scale (any f16 is
// a fine scale; the reference reads it back with kt_f16_value).
static uint16_t f16_scale(test_rng_t *rng) {
  return (uint16_t)(0x2000 + test_rng_range(rng, 0, 0x1000));  // ~2^-7..2^-5
}

// Each format against dequantize-then-float64 (3 (k + 16) 2^-24 of
// sum |x w|, kernels/README.md), bit for bit against the host kernels.
static void test_quant_kernels_match_float64_and_host(void **state) {
  (void)state;
  test_rng_t rng;
  rng_init(&rng, "quant");
  const uint32_t m = 3, n = 70, k = 128;
  float *x = random_floats(&rng, m * k, -1, 1);
  double *w = malloc(sizeof(double) * n * k);  // dequantized
  uint8_t *q = malloc(2ull * n * k);  // Q8_0 needs 34 bytes per 32
  uint8_t *zero = malloc(n * k);
  float *scale = random_floats(&rng, n * k, 0.01, 0.1);
  double want[3 * 70], bound[3 * 70];
  assert_non_null(w);
  assert_non_null(q);
  assert_non_null(zero);
  // 0 int8; 1 int4 u4 G=32; 2 int4 i4 G=64; 3 int4 u4 G=128; 4 q8_0; 5 q4_0.
  for (int f = 0; f < 6; ++f) {
    accel_kp_qmatmul_constants_t c = {.m = m, .n = n, .k = k};
    ck_case_t cs = {.constants = &c, .constants_size = sizeof(c)};
    uint64_t w_bytes;
    if (f == 0) {
      for (uint32_t i = 0; i < n * k; ++i) q[i] = (uint8_t)test_rng_next(&rng);
      for (uint32_t j = 0; j < n; ++j) {
        for (uint32_t i = 0; i < k; ++i) {
          w[j * k + i] = (double)(int8_t)q[j * k + i] * scale[j];
        }
      }
      cs.kernel = "qmatmul_int8";
      w_bytes = (uint64_t)n * k;
      cs.binding_count = 4;
      cs.data[2] = scale;
      cs.bytes[2] = 4ull * n;
    } else if (f <= 3) {
      uint32_t g = f == 1 ? 32 : f == 2 ? 64 : 128;
      c.group_size = g;
      c.flags = f == 2 ? ACCEL_KP_QFLAG_SIGNED_I4 : 0;
      for (uint32_t i = 0; i < n * k / 2; ++i) q[i] = (uint8_t)test_rng_next(&rng);
      for (uint32_t i = 0; i < n * k / g; ++i) zero[i] = (uint8_t)test_rng_range(&rng, 0, 15);
      for (uint32_t j = 0; j < n; ++j) {
        for (uint32_t i = 0; i < k; ++i) {
          uint64_t e = (uint64_t)j * k + i;
          int v = (q[e / 2] >> (4 * (e & 1))) & 15;
          uint32_t gi = j * (k / g) + i / g;
          int z = f == 2 ? 0 : zero[gi];
          if (f == 2) v = v >= 8 ? v - 16 : v;
          w[e] = (double)(v - z) * scale[gi];
        }
      }
      cs.kernel = "qmatmul_int4";
      w_bytes = (uint64_t)n * k / 2;
      cs.binding_count = 5;
      cs.data[2] = scale;
      cs.bytes[2] = 4ull * n * (k / g);
      cs.data[3] = zero;
      cs.bytes[3] = (uint64_t)n * (k / g);
    } else {
      int is_q8 = f == 4;
      uint32_t bsz = is_q8 ? 34 : 18;
      w_bytes = (uint64_t)n * (k / 32) * bsz;
      for (uint32_t j = 0; j < n; ++j) {
        for (uint32_t b = 0; b < k / 32; ++b) {
          uint8_t *blk = q + (j * (k / 32) + b) * bsz;
          uint16_t d = f16_scale(&rng);
          memcpy(blk, &d, 2);
          for (uint32_t i = 0; i < bsz - 2; ++i) blk[2 + i] = (uint8_t)test_rng_next(&rng);
          for (uint32_t i = 0; i < 32; ++i) {
            int v = is_q8 ? (int8_t)blk[2 + i]
                          : (i < 16 ? (blk[2 + i] & 15) : (blk[2 + i - 16] >> 4)) - 8;
            w[(uint64_t)j * k + b * 32 + i] = v * kt_f16_value(d);
          }
        }
      }
      cs.kernel = is_q8 ? "qmatmul_q8_0" : "qmatmul_q4_0";
      cs.binding_count = 3;
    }
    cs.data[0] = x;
    cs.bytes[0] = 4ull * m * k;
    cs.data[1] = q;
    cs.bytes[1] = w_bytes;
    cs.bytes[cs.binding_count - 1] = 4ull * m * n;
    cs.written = 1u << (cs.binding_count - 1);
    void **out = ck_check(&cs, accel_kp_qmatmul_units(&c), 1);
    for (uint32_t r = 0; r < m; ++r) {
      for (uint32_t j = 0; j < n; ++j) {
        double s = 0, a = 0;
        for (uint32_t i = 0; i < k; ++i) {
          s += x[r * k + i] * w[(uint64_t)j * k + i];
          a += fabs(x[r * k + i] * w[(uint64_t)j * k + i]);
        }
        want[r * n + j] = s;
        bound[r * n + j] = 3.0 * (k + 16) * ldexp(a, -24);
      }
    }
    const float *y = out[cs.binding_count - 1];
    for (uint32_t i = 0; i < m * n; ++i) {
      if (!(fabs(y[i] - want[i]) <= bound[i])) {
        fail_msg("%s: y[%u] = %.9g, float64 %.9g", cs.kernel, i, (double)y[i], want[i]);
      }
    }
    ck_free(&cs, out);
    if (f == 1) {
      c.group_size = 48;
      ck_expect_failure(&cs, "group_size 48");
    }
  }
  free(x);
  free(w);
  free(q);
  free(zero);
  free(scale);
}

// ---------------------------------------------------------------------------
// matmul

static uint16_t to_half(test_rng_t *rng, int bf16, double *value) {
  if (bf16) {
    uint16_t h = (uint16_t)(0x3e00 + test_rng_range(rng, 0, 0x200)) |
                 (uint16_t)(test_rng_next(rng) & 0x8000);  // ~[0.125, 2)
    *value = kt_bf16_value(h);
    return h;
  }
  uint16_t h = (uint16_t)(0x3000 + test_rng_range(rng, 0, 0x1000)) |
               (uint16_t)(test_rng_next(rng) & 0x8000);
  *value = kt_f16_value(h);
  return h;
}

// Every dtype pair, transposes, bias and an activation against float64
// (2 (k + 1) 2^-24 of sum |a b| + |bias|), reproducible across grids and
// orders; the host kernel (OpenBLAS order) within the same bound. The
// tensor-core pairs (WMMA through the emulator's nvcuda::wmma) run with
// every transpose, k not a multiple of 16 and partial tiles.
static void test_matmul_matches_float64_and_host(void **state) {
  (void)state;
  test_rng_t rng;
  rng_init(&rng, "matmul");
  const uint32_t m = 37, n = 45, k = 50;
  float *bias = random_floats(&rng, n, -1, 1);
  double *av = malloc(sizeof(double) * m * k), *bv = malloc(sizeof(double) * k * n);
  void *a = malloc(4ull * m * k), *b = malloc(4ull * k * n);
  double *want = malloc(sizeof(double) * m * n), *bound = malloc(sizeof(double) * m * n);
  assert_non_null(av);
  assert_non_null(bv);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(want);
  assert_non_null(bound);
  for (uint32_t da = 1; da <= 3; ++da) {
    for (uint32_t db = 1; db <= 3; ++db) {
     // f16 x f16 and bf16 x bf16 run on tensor cores (WMMA): again with
     // every transpose combination.
     for (uint32_t rep = 0; rep < (da == db && da > 1 ? 5u : 1u); ++rep) {
      uint32_t flags = rep == 0 ? (da + db) % 4 : rep - 1;
      if (da == 2 && db == 2) flags |= ACCEL_KP_MM_BIAS;
      uint32_t act = da == 3 && db == 3 ? ACCEL_KP_ACT_SILU : ACCEL_KP_ACT_NONE;
      int ta = flags & ACCEL_KP_MM_TRANS_A, tb = flags & ACCEL_KP_MM_TRANS_B;
      for (uint32_t i = 0; i < m * k; ++i) {
        if (da == 1) {
          ((float *)a)[i] = (float)uniform(&rng, -1, 1);
          av[i] = ((float *)a)[i];
        } else {
          ((uint16_t *)a)[i] = to_half(&rng, da == 3, &av[i]);
        }
      }
      for (uint32_t i = 0; i < k * n; ++i) {
        if (db == 1) {
          ((float *)b)[i] = (float)uniform(&rng, -1, 1);
          bv[i] = ((float *)b)[i];
        } else {
          ((uint16_t *)b)[i] = to_half(&rng, db == 3, &bv[i]);
        }
      }
      accel_kp_matmul_constants_t c = {.m = m, .n = n, .k = k, .flags = flags,
                                       .dtype_a = da, .dtype_b = db,
                                       .activation = act, .tile_m = 16,
                                       .tile_n = 32};
      ck_case_t cs = {.kernel = "matmul", .binding_count = 4,
                      .data = {a, b, bias, NULL},
                      .bytes = {(da == 1 ? 4ull : 2ull) * m * k,
                                (db == 1 ? 4ull : 2ull) * k * n, 4ull * n,
                                4ull * m * n},
                      .written = 8, .constants = &c, .constants_size = sizeof(c)};
      void **out = ck_check(&cs, accel_kp_matmul_units(&c), 0);
      for (uint32_t i = 0; i < m; ++i) {
        for (uint32_t j = 0; j < n; ++j) {
          double s = 0, abs_sum = 0;
          for (uint32_t p = 0; p < k; ++p) {
            double x = av[ta ? p * m + i : i * k + p];
            double y = bv[tb ? j * k + p : p * n + j];
            s += x * y;
            abs_sum += fabs(x * y);
          }
          double bb = (flags & ACCEL_KP_MM_BIAS) ? bias[j] : 0.0;
          want[i * n + j] = kt_activation(act, s + bb);
          // SiLU's slope is below 1.1 and its f32 evaluation adds a few ulp.
          bound[i * n + j] = 2.0 * (k + 1) * ldexp(abs_sum + fabs(bb), -24) *
                                 (act ? 1.1 : 1.0) +
                             (act ? 1e-6 + 4e-7 * fabs(want[i * n + j]) : 0.0);
        }
      }
      const float *got = out[3];
      void **host = ck_run_host(&cs, 3);
      for (uint32_t i = 0; i < m * n; ++i) {
        if (!(fabs(got[i] - want[i]) <= bound[i])) {
          fail_msg("matmul %u x %u flags %u: c[%u] = %.9g, float64 %.9g",
                   da, db, flags, i, (double)got[i], want[i]);
        }
        if (host != NULL &&
            !(fabs(((float *)host[3])[i] - got[i]) <= 2 * bound[i])) {
          fail_msg("matmul %u x %u: c[%u] = %.9g, host %.9g", da, db, i,
                   (double)got[i], (double)((float *)host[3])[i]);
        }
      }
      ck_free(&cs, host);
      ck_free(&cs, out);
     }
    }
  }
  accel_kp_matmul_constants_t c = {.m = m, .n = n, .k = k, .dtype_a = 4,
                                   .dtype_b = 1};
  ck_case_t cs = {.kernel = "matmul", .binding_count = 4,
                  .data = {a, b, bias, NULL},
                  .bytes = {4ull * m * k, 4ull * k * n, 4ull * n, 4ull * m * n},
                  .written = 8, .constants = &c, .constants_size = sizeof(c)};
  ck_expect_failure(&cs, "matmul dtypes 4 x 1");
  free(bias);
  free(av);
  free(bv);
  free(a);
  free(b);
  free(want);
  free(bound);
}

// ---------------------------------------------------------------------------
// Attention

// float64 attention of one query head over |len| keys; |krow(j)| / |vrow(j)|
// are the rows of key j.
static void ref_attend(const float *q, const float *k, const float *v,
                       const uint64_t *rows, uint32_t len, uint32_t hd,
                       double scale, double *out) {
  double max = -INFINITY, sum = 0;
  double *s = malloc(sizeof(double) * (len + 1));
  assert_non_null(s);
  for (uint32_t j = 0; j < len; ++j) {
    double d = 0;
    for (uint32_t i = 0; i < hd; ++i) d += (double)q[i] * k[rows[j] + i];
    s[j] = scale * d;
    max = fmax(max, s[j]);
  }
  for (uint32_t i = 0; i < hd; ++i) out[i] = 0;
  for (uint32_t j = 0; j < len; ++j) {
    double p = exp(s[j] - max);
    sum += p;
    for (uint32_t i = 0; i < hd; ++i) out[i] += p * v[rows[j] + i];
  }
  for (uint32_t i = 0; i < hd; ++i) out[i] = len ? out[i] / sum : 0.0;
  free(s);
}

// Dense and paged decode against float64, paged equal to dense bit for bit
// (any block size and table), both equal to the host kernels; prefill and
// the K/V append too; refused block tables.
static void test_attention_kernels_match_float64_and_host(void **state) {
  (void)state;
  test_rng_t rng;
  rng_init(&rng, "attention");
  const uint32_t S = 3, H = 4, KVH = 2, hd = 20, max_len = 70, bs = 16;
  const uint32_t mbps = (max_len + bs - 1) / bs, nblocks = S * mbps + 2;
  const float scale = 1.0f / sqrtf((float)hd);
  uint32_t lens[3] = {0, 33, 70};
  float *q = random_floats(&rng, S * H * hd, -1, 1);
  float *k = random_floats(&rng, S * max_len * KVH * hd, -1, 1);
  float *v = random_floats(&rng, S * max_len * KVH * hd, -1, 1);
  uint64_t rows[70];
  double want[3 * 4 * 20];
  accel_kp_attn_decode_constants_t dc = {.num_seqs = S, .max_len = max_len,
                                         .n_heads = H, .n_kv_heads = KVH,
                                         .head_dim = hd, .scale = scale};
  ck_case_t ds = {.kernel = "attention_decode", .binding_count = 5,
                  .data = {q, k, v, lens, NULL},
                  .bytes = {4ull * S * H * hd, 4ull * S * max_len * KVH * hd,
                            4ull * S * max_len * KVH * hd, 4ull * S,
                            4ull * S * H * hd},
                  .written = 16, .constants = &dc, .constants_size = sizeof(dc)};
  void **dense = ck_check(&ds, S * KVH, 1);
  for (uint32_t s = 0; s < S; ++s) {
    for (uint32_t h = 0; h < H; ++h) {
      uint32_t kvh = h / (H / KVH);
      for (uint32_t j = 0; j < lens[s]; ++j) {
        rows[j] = (((uint64_t)s * max_len + j) * KVH + kvh) * hd;
      }
      ref_attend(q + (s * H + h) * hd, k, v, rows, lens[s], hd, scale,
                 want + (s * H + h) * hd);
    }
  }
  ck_close("attention_decode", dense[4], want, S * H * hd, 3e-5, 0);
  // The same keys in a paged cache with a shuffled block table.
  uint32_t *table = malloc(4ull * S * mbps);
  uint32_t *perm = malloc(4ull * nblocks);
  float *kc = calloc((size_t)nblocks * bs * KVH * hd, 4);
  float *vc = calloc((size_t)nblocks * bs * KVH * hd, 4);
  assert_non_null(table);
  assert_non_null(perm);
  assert_non_null(kc);
  assert_non_null(vc);
  for (uint32_t i = 0; i < nblocks; ++i) perm[i] = i;
  for (uint32_t i = nblocks - 1; i > 0; --i) {
    uint32_t j = (uint32_t)test_rng_range(&rng, 0, i), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (uint32_t s = 0; s < S; ++s) {
    for (uint32_t b = 0; b < mbps; ++b) table[s * mbps + b] = perm[s * mbps + b];
    for (uint32_t j = 0; j < max_len; ++j) {
      uint64_t slot = (uint64_t)table[s * mbps + j / bs] * bs + j % bs;
      memcpy(kc + slot * KVH * hd, k + ((uint64_t)s * max_len + j) * KVH * hd, 4ull * KVH * hd);
      memcpy(vc + slot * KVH * hd, v + ((uint64_t)s * max_len + j) * KVH * hd, 4ull * KVH * hd);
    }
  }
  accel_kp_attn_paged_constants_t pc = {.num_seqs = S, .n_heads = H,
                                        .n_kv_heads = KVH, .head_dim = hd,
                                        .block_size = bs, .num_blocks = nblocks,
                                        .max_blocks_per_seq = mbps,
                                        .scale = scale};
  uint64_t cache_bytes = 4ull * nblocks * bs * KVH * hd;
  ck_case_t ps = {.kernel = "attention_paged_decode", .binding_count = 6,
                  .data = {q, kc, vc, table, lens, NULL},
                  .bytes = {4ull * S * H * hd, cache_bytes, cache_bytes,
                            4ull * S * mbps, 4ull * S, 4ull * S * H * hd},
                  .written = 32, .constants = &pc, .constants_size = sizeof(pc)};
  void **paged = ck_check(&ps, S * KVH, 1);
  assert_memory_equal(paged[5], dense[4], 4ull * S * H * hd);
  ck_free(&ps, paged);
  table[1 * mbps + 2] = nblocks;
  ck_expect_failure(&ps, "block_tables[1][2]");
  ck_free(&ds, dense);
  // Prefill of a chunk after a cached prefix.
  const uint32_t q_len = 5, kv_len = 40;
  accel_kp_attn_prefill_constants_t fc = {.q_len = q_len, .kv_len = kv_len,
                                          .n_heads = H, .n_kv_heads = KVH,
                                          .head_dim = hd, .scale = scale};
  ck_case_t fs = {.kernel = "attention_prefill", .binding_count = 4,
                  .data = {q, k, v, NULL},
                  .bytes = {4ull * q_len * H * hd, 4ull * kv_len * KVH * hd,
                            4ull * kv_len * KVH * hd, 4ull * q_len * H * hd},
                  .written = 8, .constants = &fc, .constants_size = sizeof(fc)};
  float *qp = random_floats(&rng, q_len * H * hd, -1, 1);
  fs.data[0] = qp;
  void **pre = ck_check(&fs, KVH * q_len, 1);
  double pwant[5 * 4 * 20];
  for (uint32_t r = 0; r < q_len; ++r) {
    for (uint32_t h = 0; h < H; ++h) {
      uint32_t len = kv_len - q_len + r + 1, kvh = h / (H / KVH);
      for (uint32_t j = 0; j < len; ++j) rows[j] = ((uint64_t)j * KVH + kvh) * hd;
      ref_attend(qp + (r * H + h) * hd, k, v, rows, len, hd, scale,
                 pwant + (r * H + h) * hd);
    }
  }
  ck_close("attention_prefill", pre[3], pwant, q_len * H * hd, 3e-5, 0);
  ck_free(&fs, pre);
  // K/V append: token 1 skipped (slot -1).
  int32_t slots[4] = {5, -1, 17, 40};
  accel_kp_kv_append_constants_t ac = {.tokens = 4, .n_kv_heads = KVH,
                                       .head_dim = hd, .block_size = bs,
                                       .num_blocks = nblocks};
  ck_case_t as = {.kernel = "paged_kv_append", .binding_count = 5,
                  .data = {k, v, slots, kc, vc},
                  .bytes = {4ull * 4 * KVH * hd, 4ull * 4 * KVH * hd, 16,
                            cache_bytes, cache_bytes},
                  .written = 24, .constants = &ac, .constants_size = sizeof(ac)};
  void **app = ck_check(&as, 4, 1);
  for (uint32_t t = 0; t < 4; ++t) {
    if (slots[t] < 0) continue;
    assert_memory_equal((float *)app[3] + (uint64_t)slots[t] * KVH * hd,
                        k + (uint64_t)t * KVH * hd, 4ull * KVH * hd);
    assert_memory_equal((float *)app[4] + (uint64_t)slots[t] * KVH * hd,
                        v + (uint64_t)t * KVH * hd, 4ull * KVH * hd);
  }
  ck_free(&as, app);
  slots[2] = (int32_t)(nblocks * bs);
  ck_expect_failure(&as, "slot_mapping[2]");
  free(q);
  free(qp);
  free(k);
  free(v);
  free(table);
  free(perm);
  free(kc);
  free(vc);
}

// A launch with another block shape is refused, naming the shape.
static void test_kernels_refuse_other_block_shapes(void **state) {
  (void)state;
  float x[16] = {0}, y[16];
  accel_kp_softmax_constants_t c = {.rows = 1, .cols = 16};
  void *px = x, *py = y;
  uint64_t lx = sizeof(x), ly = sizeof(y);
  void *params[] = {&px, &py, &lx, &ly, &c};
  accel_simt_launch_t l = {.kernel = accel_simt_kernel_find("softmax"),
                           .grid = {1, 1, 1},
                           .block = {64, 1, 1},
                           .params = params};
  char message[256];
  assert_int_equal(accel_simt_run(&l, message, sizeof(message)),
                   ACCEL_SIMT_KERNEL_FAILED);
  assert_non_null(strstr(message, "blockDim is (64, 1, 1)"));
}

static int setup(void **state) {
  (void)state;
  const char *path = getenv("ACCEL_TEST_KERNELS");
  if (path != NULL && path[0] != '\0') {
    g_host = kernel_lib_open(path);
  } else {
    fprintf(stderr, "no ACCEL_TEST_KERNELS: no bit comparison with the host "
                    "kernels\n");
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (g_host != NULL) kernel_lib_close(g_host);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_emulator_permutation_catches_missing_barrier),
      cmocka_unit_test(test_emulator_warp_operations),
      cmocka_unit_test(test_emulator_reports_misuse),
      cmocka_unit_test(test_emulator_wmma_is_warp_collective),
      cmocka_unit_test(test_emulator_has_every_kernel),
      cmocka_unit_test(test_eltwise_kernels_match_float64_and_host),
      cmocka_unit_test(test_row_kernels_match_float64_and_host),
      cmocka_unit_test(test_select_kernels_are_exact),
      cmocka_unit_test(test_quant_kernels_match_float64_and_host),
      cmocka_unit_test(test_matmul_matches_float64_and_host),
      cmocka_unit_test(test_attention_kernels_match_float64_and_host),
      cmocka_unit_test(test_kernels_refuse_other_block_shapes),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
