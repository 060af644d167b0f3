// Attention kernels (kernels/host/attention_kernels.c) against a float64
// reference written here, paged against dense on the same data, bit-identity
// across grids, thread counts and schedules, and refused launches.
//
// Tolerance: inputs lie in [-1, 1] and scale is 1 / sqrt(head_dim), so
// scores lie within +-sqrt(head_dim) and outputs within [-1, 1]; f32
// rounding over at most a few hundred keys and 64 dimensions is of order
// 1e-6, and 3e-5 is the bound used.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_params.h"
#include "kernel_runner.h"
#include "test_support.h"

#define TOLERANCE 3e-5

static kernel_lib_t *g_lib;

static float *random_floats(test_rng_t *rng, uint64_t n) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  assert_non_null(p);
  for (uint64_t i = 0; i < n; ++i) {
    p[i] = (float)((double)(test_rng_next(rng) >> 11) / 9007199254740992.0 *
                       2.0 -
                   1.0);
  }
  return p;
}

// A buffer of exactly |n| floats filled with a sentinel (outputs: untouched
// bytes stay recognisable; ASan catches a read or write past the end).
static float *sentinel_floats(uint64_t n) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  assert_non_null(p);
  for (uint64_t i = 0; i < n; ++i) {
    p[i] = 12345.0f;
  }
  return p;
}

static accel_kernel_binding_t bind(void *data, uint64_t bytes, uint32_t access) {
  return (accel_kernel_binding_t){
      .data = data, .size_bytes = bytes, .access = access};
}

#define R ACCEL_KERNEL_ACCESS_READ
#define W ACCEL_KERNEL_ACCESS_WRITE

// The float64 reference: softmax(scale * q . k_j) weighted sum of v_j over
// j < len, for one query head; k_row(j) and v_row(j) give the rows.
static void reference_head(const float *q, const float *const *k_rows,
                           const float *const *v_rows, uint32_t len,
                           uint32_t head_dim, double scale, double *out) {
  double *s = malloc((len ? len : 1) * sizeof(double));
  assert_non_null(s);
  double max = -INFINITY;
  for (uint32_t j = 0; j < len; ++j) {
    double acc = 0;
    for (uint32_t i = 0; i < head_dim; ++i) {
      acc += (double)q[i] * k_rows[j][i];
    }
    s[j] = acc * scale;
    max = s[j] > max ? s[j] : max;
  }
  double sum = 0;
  for (uint32_t j = 0; j < len; ++j) {
    s[j] = exp(s[j] - max);
    sum += s[j];
  }
  for (uint32_t i = 0; i < head_dim; ++i) {
    double acc = 0;
    for (uint32_t j = 0; j < len; ++j) {
      acc += s[j] * v_rows[j][i];
    }
    out[i] = len ? acc / sum : 0.0;
  }
  free(s);
}

static void assert_close(const float *got, const double *want, uint32_t n,
                         const char *what) {
  for (uint32_t i = 0; i < n; ++i) {
    double err = fabs((double)got[i] - want[i]);
    if (!(err <= TOLERANCE)) {
      fail_msg("%s: element %u is %.9g, the f64 reference %.9g (error %.3g > "
               "%.1g)",
               what, i, (double)got[i], want[i], err, TOLERANCE);
    }
  }
}

// ---------------------------------------------------------------------------
// Launch builders
// ---------------------------------------------------------------------------

typedef struct prefill_case {
  accel_kp_attn_prefill_constants_t c;
  float *q, *k, *v, *out;
} prefill_case_t;

static void prefill_case_make(test_rng_t *rng, prefill_case_t *pc,
                              uint32_t q_len, uint32_t kv_len,
                              uint32_t n_heads, uint32_t n_kv_heads,
                              uint32_t head_dim) {
  pc->c = (accel_kp_attn_prefill_constants_t){
      .q_len = q_len,
      .kv_len = kv_len,
      .n_heads = n_heads,
      .n_kv_heads = n_kv_heads,
      .head_dim = head_dim,
      .scale = 1.0f / sqrtf((float)head_dim)};
  pc->q = random_floats(rng, (uint64_t)q_len * n_heads * head_dim);
  pc->k = random_floats(rng, (uint64_t)kv_len * n_kv_heads * head_dim);
  pc->v = random_floats(rng, (uint64_t)kv_len * n_kv_heads * head_dim);
  pc->out = sentinel_floats((uint64_t)q_len * n_heads * head_dim);
}

static void prefill_case_free(prefill_case_t *pc) {
  free(pc->q);
  free(pc->k);
  free(pc->v);
  free(pc->out);
}

static kernel_launch_t prefill_launch(prefill_case_t *pc, uint32_t groups,
                                      uint32_t threads, uint64_t order) {
  const accel_kp_attn_prefill_constants_t *c = &pc->c;
  uint64_t qb = 4ull * c->q_len * c->n_heads * c->head_dim;
  uint64_t kb = 4ull * c->kv_len * c->n_kv_heads * c->head_dim;
  return (kernel_launch_t){
      .fn = kernel_lib_find(g_lib, "attention_prefill"),
      .grid = {groups, 1, 1},
      .binding_count = 4,
      .bindings = {bind(pc->q, qb, R), bind(pc->k, kb, R), bind(pc->v, kb, R),
                   bind(pc->out, qb, W)},
      .constants = c,
      .constants_size = sizeof(*c),
      .threads = threads,
      .order_seed = order};
}

// A batch of sequences with a dense cache and a paged copy of it.
typedef struct decode_case {
  uint32_t num_seqs, max_len, n_heads, n_kv_heads, head_dim, block_size;
  uint32_t num_blocks, max_blocks;
  float scale;
  uint32_t *lens;
  float *q, *k, *v;           // dense: [num_seqs, max_len, n_kv, hd]
  float *k_cache, *v_cache;   // paged: [num_blocks, block_size, n_kv, hd]
  uint32_t *tables;           // [num_seqs, max_blocks]
  int32_t *slots;             // [num_seqs * max_len]: where each row goes
  float *out;
} decode_case_t;

static uint64_t row_floats(const decode_case_t *dc) {
  return (uint64_t)dc->n_kv_heads * dc->head_dim;
}

// Random lengths (0 and 1 included by chance), blocks handed out in a
// shuffled order, and sequence 1 sharing sequence 0's first full blocks (a
// common prefix: same rows, same physical blocks; their slots are -1 for
// sequence 1, so the append writes them once).
static void decode_case_make(test_rng_t *rng, decode_case_t *dc,
                             uint32_t num_seqs, uint32_t max_len,
                             uint32_t n_heads, uint32_t n_kv_heads,
                             uint32_t head_dim, uint32_t block_size) {
  memset(dc, 0, sizeof(*dc));
  dc->num_seqs = num_seqs;
  dc->max_len = max_len;
  dc->n_heads = n_heads;
  dc->n_kv_heads = n_kv_heads;
  dc->head_dim = head_dim;
  dc->block_size = block_size;
  dc->scale = 1.0f / sqrtf((float)head_dim);
  dc->max_blocks = (max_len + block_size - 1) / block_size;
  dc->lens = malloc(num_seqs * sizeof(uint32_t));
  for (uint32_t s = 0; s < num_seqs; ++s) {
    dc->lens[s] = (uint32_t)test_rng_range(rng, 0, max_len);
  }
  uint64_t row = row_floats(dc);
  dc->q = random_floats(rng, (uint64_t)num_seqs * n_heads * head_dim);
  dc->k = random_floats(rng, (uint64_t)num_seqs * max_len * row);
  dc->v = random_floats(rng, (uint64_t)num_seqs * max_len * row);
  uint32_t shared = 0;
  if (num_seqs > 1) {
    uint32_t full = (dc->lens[0] < dc->lens[1] ? dc->lens[0] : dc->lens[1]) /
                    block_size;
    shared = (uint32_t)test_rng_range(rng, 0, full);
    uint64_t n = (uint64_t)shared * block_size * row;
    memcpy(dc->k + (uint64_t)max_len * row, dc->k, n * sizeof(float));
    memcpy(dc->v + (uint64_t)max_len * row, dc->v, n * sizeof(float));
  }
  // Physical blocks: as many as the sequences use, plus spares, shuffled.
  dc->num_blocks = num_seqs * dc->max_blocks + 3;
  uint32_t *perm = malloc(dc->num_blocks * sizeof(uint32_t));
  for (uint32_t b = 0; b < dc->num_blocks; ++b) {
    perm[b] = b;
  }
  for (uint32_t b = dc->num_blocks; b > 1; --b) {
    uint32_t j = (uint32_t)test_rng_range(rng, 0, b - 1);
    uint32_t t = perm[b - 1];
    perm[b - 1] = perm[j];
    perm[j] = t;
  }
  dc->tables = malloc((uint64_t)num_seqs * dc->max_blocks * sizeof(uint32_t));
  uint32_t next = 0;
  for (uint32_t s = 0; s < num_seqs; ++s) {
    for (uint32_t b = 0; b < dc->max_blocks; ++b) {
      uint32_t *e = &dc->tables[(uint64_t)s * dc->max_blocks + b];
      // Entries past the used blocks hold garbage the kernel must not read.
      *e = b * block_size >= dc->lens[s] ? 0xdeadbeefu
           : (s == 1 && b < shared)      ? dc->tables[b]
                                         : perm[next++];
    }
  }
  free(perm);
  dc->slots = malloc((uint64_t)num_seqs * max_len * sizeof(int32_t));
  for (uint32_t s = 0; s < num_seqs; ++s) {
    for (uint32_t j = 0; j < max_len; ++j) {
      uint32_t block = dc->tables[(uint64_t)s * dc->max_blocks + j / block_size];
      bool skip = j >= dc->lens[s] || (s == 1 && j / block_size < shared);
      dc->slots[(uint64_t)s * max_len + j] =
          skip ? -1 : (int32_t)(block * block_size + j % block_size);
    }
  }
  uint64_t cache = (uint64_t)dc->num_blocks * block_size * row;
  dc->k_cache = sentinel_floats(cache);
  dc->v_cache = sentinel_floats(cache);
  dc->out = sentinel_floats((uint64_t)num_seqs * n_heads * head_dim);
}

static void decode_case_free(decode_case_t *dc) {
  free(dc->lens);
  free(dc->q);
  free(dc->k);
  free(dc->v);
  free(dc->k_cache);
  free(dc->v_cache);
  free(dc->tables);
  free(dc->slots);
  free(dc->out);
}

static kernel_launch_t append_launch(decode_case_t *dc,
                                     accel_kp_kv_append_constants_t *c,
                                     uint32_t groups, uint32_t threads,
                                     uint64_t order) {
  *c = (accel_kp_kv_append_constants_t){.tokens = dc->num_seqs * dc->max_len,
                                     .n_kv_heads = dc->n_kv_heads,
                                     .head_dim = dc->head_dim,
                                     .block_size = dc->block_size,
                                     .num_blocks = dc->num_blocks};
  uint64_t nb = 4ull * c->tokens * row_floats(dc);
  uint64_t cb = 4ull * dc->num_blocks * dc->block_size * row_floats(dc);
  return (kernel_launch_t){
      .fn = kernel_lib_find(g_lib, "paged_kv_append"),
      .grid = {groups, 1, 1},
      .binding_count = 5,
      .bindings = {bind(dc->k, nb, R), bind(dc->v, nb, R),
                   bind(dc->slots, 4ull * c->tokens, R),
                   bind(dc->k_cache, cb, R | W), bind(dc->v_cache, cb, R | W)},
      .constants = c,
      .constants_size = sizeof(*c),
      .threads = threads,
      .order_seed = order};
}

static kernel_launch_t dense_decode_launch(decode_case_t *dc,
                                           accel_kp_attn_decode_constants_t *c,
                                           uint32_t groups, uint32_t threads,
                                           uint64_t order) {
  *c = (accel_kp_attn_decode_constants_t){.num_seqs = dc->num_seqs,
                                       .max_len = dc->max_len,
                                       .n_heads = dc->n_heads,
                                       .n_kv_heads = dc->n_kv_heads,
                                       .head_dim = dc->head_dim,
                                       .scale = dc->scale};
  uint64_t qb = 4ull * dc->num_seqs * dc->n_heads * dc->head_dim;
  uint64_t kb = 4ull * dc->num_seqs * dc->max_len * row_floats(dc);
  return (kernel_launch_t){
      .fn = kernel_lib_find(g_lib, "attention_decode"),
      .grid = {groups, 1, 1},
      .binding_count = 5,
      .bindings = {bind(dc->q, qb, R), bind(dc->k, kb, R), bind(dc->v, kb, R),
                   bind(dc->lens, 4ull * dc->num_seqs, R),
                   bind(dc->out, qb, W)},
      .constants = c,
      .constants_size = sizeof(*c),
      .threads = threads,
      .order_seed = order};
}

static kernel_launch_t paged_decode_launch(decode_case_t *dc,
                                           accel_kp_attn_paged_constants_t *c,
                                           uint32_t groups, uint32_t threads,
                                           uint64_t order) {
  *c = (accel_kp_attn_paged_constants_t){.num_seqs = dc->num_seqs,
                                      .n_heads = dc->n_heads,
                                      .n_kv_heads = dc->n_kv_heads,
                                      .head_dim = dc->head_dim,
                                      .block_size = dc->block_size,
                                      .num_blocks = dc->num_blocks,
                                      .max_blocks_per_seq = dc->max_blocks,
                                      .scale = dc->scale};
  uint64_t qb = 4ull * dc->num_seqs * dc->n_heads * dc->head_dim;
  uint64_t cb = 4ull * dc->num_blocks * dc->block_size * row_floats(dc);
  return (kernel_launch_t){
      .fn = kernel_lib_find(g_lib, "attention_paged_decode"),
      .grid = {groups, 1, 1},
      .binding_count = 6,
      .bindings = {bind(dc->q, qb, R), bind(dc->k_cache, cb, R),
                   bind(dc->v_cache, cb, R),
                   bind(dc->tables, 4ull * dc->num_seqs * dc->max_blocks, R),
                   bind(dc->lens, 4ull * dc->num_seqs, R),
                   bind(dc->out, qb, W)},
      .constants = c,
      .constants_size = sizeof(*c),
      .threads = threads,
      .order_seed = order};
}

static void run_ok(const kernel_launch_t *l) {
  char message[512];
  int32_t rc = kernel_run(l, message, sizeof(message));
  if (rc != 0) {
    fail_msg("launch refused (%d): %s", rc, message);
  }
}

// The f64 reference of a decode case, for every sequence and query head.
static void check_decode_reference(const decode_case_t *dc, const char *what) {
  uint64_t row = row_floats(dc);
  uint32_t group = dc->n_heads / dc->n_kv_heads;
  const float **kr = malloc((dc->max_len + 1) * sizeof(float *));
  const float **vr = malloc((dc->max_len + 1) * sizeof(float *));
  double *want = malloc(dc->head_dim * sizeof(double));
  for (uint32_t s = 0; s < dc->num_seqs; ++s) {
    for (uint32_t h = 0; h < dc->n_heads; ++h) {
      for (uint32_t j = 0; j < dc->lens[s]; ++j) {
        uint64_t at = ((uint64_t)s * dc->max_len + j) * row +
                      (uint64_t)(h / group) * dc->head_dim;
        kr[j] = dc->k + at;
        vr[j] = dc->v + at;
      }
      uint64_t qa = ((uint64_t)s * dc->n_heads + h) * dc->head_dim;
      reference_head(dc->q + qa, kr, vr, dc->lens[s], dc->head_dim, dc->scale,
                     want);
      assert_close(dc->out + qa, want, dc->head_dim, what);
    }
  }
  free(kr);
  free(vr);
  free(want);
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

// Causal GQA prefill equals the f64 reference on odd shapes, with and
// without a cached prefix before the queries.
static void test_prefill_matches_f64_reference_on_odd_shapes(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  static const uint32_t heads[][2] = {{1, 1}, {4, 2}, {6, 3}, {8, 1}, {5, 5}};
  static const uint32_t dims[] = {1, 7, 16, 33, 64};
  static const uint32_t lens[] = {1, 2, 7, 31, 97};
  for (int iter = 0; iter < 12; ++iter) {
    const uint32_t *hk = heads[test_rng_range(&rng, 0, 4)];
    uint32_t hd = dims[test_rng_range(&rng, 0, 4)];
    uint32_t q_len = lens[test_rng_range(&rng, 0, 4)];
    uint32_t prefix = (uint32_t)test_rng_range(&rng, 0, 1) *
                      (uint32_t)test_rng_range(&rng, 1, 40);
    prefill_case_t pc;
    prefill_case_make(&rng, &pc, q_len, q_len + prefix, hk[0], hk[1], hd);
    kernel_launch_t l = prefill_launch(&pc, (uint32_t)test_rng_range(&rng, 1, 9),
                                       2, test_rng_next(&rng));
    run_ok(&l);
    uint32_t group = hk[0] / hk[1];
    uint64_t row = (uint64_t)hk[1] * hd;
    const float **kr = malloc((q_len + prefix) * sizeof(float *));
    const float **vr = malloc((q_len + prefix) * sizeof(float *));
    double *want = malloc(hd * sizeof(double));
    for (uint32_t i = 0; i < q_len; ++i) {
      for (uint32_t h = 0; h < hk[0]; ++h) {
        uint32_t len = prefix + i + 1;
        for (uint32_t j = 0; j < len; ++j) {
          kr[j] = pc.k + j * row + (h / group) * hd;
          vr[j] = pc.v + j * row + (h / group) * hd;
        }
        uint64_t qa = ((uint64_t)i * hk[0] + h) * hd;
        reference_head(pc.q + qa, kr, vr, len, hd, pc.c.scale, want);
        char what[128];
        snprintf(what, sizeof(what),
                 "prefill q_len %u prefix %u heads %u/%u hd %u row %u head %u",
                 q_len, prefix, hk[0], hk[1], hd, i, h);
        assert_close(pc.out + qa, want, hd, what);
      }
    }
    free(kr);
    free(vr);
    free(want);
    prefill_case_free(&pc);
  }
}

// Dense decode equals the f64 reference for random context lengths
// (including 0, which gives zeros, and 1).
static void test_decode_matches_f64_reference(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int iter = 0; iter < 10; ++iter) {
    decode_case_t dc;
    decode_case_make(&rng, &dc, (uint32_t)test_rng_range(&rng, 1, 5),
                     (uint32_t)test_rng_range(&rng, 1, 150), 8, 2,
                     (uint32_t)test_rng_range(&rng, 1, 70), 16);
    accel_kp_attn_decode_constants_t c;
    kernel_launch_t l =
        dense_decode_launch(&dc, &c, (uint32_t)test_rng_range(&rng, 1, 5), 2,
                            test_rng_next(&rng));
    run_ok(&l);
    check_decode_reference(&dc, "dense decode");
    decode_case_free(&dc);
  }
}

// The append kernel writes every row to its slot, skips slot -1, and leaves
// every other slot as it was.
static void test_kv_append_writes_slots_and_skips_minus_one(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  decode_case_t dc;
  decode_case_make(&rng, &dc, 3, 41, 4, 2, 9, 5);
  accel_kp_kv_append_constants_t c;
  kernel_launch_t l = append_launch(&dc, &c, 4, 2, test_rng_next(&rng));
  run_ok(&l);
  uint64_t row = row_floats(&dc);
  uint64_t slots = (uint64_t)dc.num_blocks * dc.block_size;
  uint8_t *written = calloc(slots, 1);
  for (uint64_t t = 0; t < c.tokens; ++t) {
    if (dc.slots[t] >= 0) {
      written[dc.slots[t]] = 1;
      assert_memory_equal(dc.k_cache + dc.slots[t] * row, dc.k + t * row,
                          row * 4);
      assert_memory_equal(dc.v_cache + dc.slots[t] * row, dc.v + t * row,
                          row * 4);
    }
  }
  for (uint64_t s = 0; s < slots; ++s) {
    for (uint64_t i = 0; !written[s] && i < row; ++i) {
      assert_true(dc.k_cache[s * row + i] == 12345.0f);
      assert_true(dc.v_cache[s * row + i] == 12345.0f);
    }
  }
  free(written);
  decode_case_free(&dc);
}

// Paged decode over shuffled block tables with shared prefixes gives the
// same bits as dense decode on the same data (both fold keys in the same
// order), and both match the f64 reference.
static void test_paged_decode_equals_dense_bit_for_bit(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  static const uint32_t block_sizes[] = {1, 2, 3, 5, 8, 16, 32};
  static const uint32_t heads[][2] = {{1, 1}, {4, 1}, {8, 2}, {6, 3}};
  for (int iter = 0; iter < 16; ++iter) {
    const uint32_t *hk = heads[test_rng_range(&rng, 0, 3)];
    decode_case_t dc;
    decode_case_make(&rng, &dc, (uint32_t)test_rng_range(&rng, 1, 4),
                     (uint32_t)test_rng_range(&rng, 1, 130), hk[0], hk[1],
                     (uint32_t)test_rng_range(&rng, 1, 40),
                     block_sizes[test_rng_range(&rng, 0, 6)]);
    accel_kp_kv_append_constants_t ac;
    kernel_launch_t l = append_launch(&dc, &ac, 3, 2, test_rng_next(&rng));
    run_ok(&l);
    accel_kp_attn_decode_constants_t dcon;
    l = dense_decode_launch(&dc, &dcon, 2, 2, test_rng_next(&rng));
    run_ok(&l);
    uint64_t n = (uint64_t)dc.num_seqs * dc.n_heads * dc.head_dim;
    float *dense = malloc(n * sizeof(float));
    memcpy(dense, dc.out, n * sizeof(float));
    check_decode_reference(&dc, "dense decode");
    for (uint64_t i = 0; i < n; ++i) {
      dc.out[i] = 12345.0f;
    }
    accel_kp_attn_paged_constants_t pcon;
    l = paged_decode_launch(&dc, &pcon, 3, 2, test_rng_next(&rng));
    run_ok(&l);
    if (memcmp(dense, dc.out, n * sizeof(float)) != 0) {
      fail_msg("paged decode differs from dense decode (block size %u, %u "
               "sequences)",
               dc.block_size, dc.num_seqs);
    }
    free(dense);
    decode_case_free(&dc);
  }
}

// Every attention kernel gives the same bits for any number of work-groups
// (1 to more than there are items), 1, 2 or 7 threads, and any order.
static void test_results_identical_across_splits_and_threads(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  static const uint32_t grids[] = {1, 2, 3, 7, 64, 500};
  static const uint32_t threads[] = {1, 2, 7};
  prefill_case_t pc;
  prefill_case_make(&rng, &pc, 45, 52, 6, 2, 19);
  decode_case_t dc;
  decode_case_make(&rng, &dc, 4, 77, 8, 2, 24, 7);
  accel_kp_kv_append_constants_t ac;
  kernel_launch_t l = append_launch(&dc, &ac, 1, 1, 0);
  run_ok(&l);
  uint64_t pn = 45ull * 6 * 19, dn = 4ull * 8 * 24;
  float *first_prefill = NULL, *first_dense = NULL, *first_paged = NULL;
  for (int g = 0; g < 6; ++g) {
    for (int t = 0; t < 3; ++t) {
      uint64_t order = g + t ? test_rng_next(&rng) : 0;
      l = prefill_launch(&pc, grids[g], threads[t], order);
      run_ok(&l);
      accel_kp_attn_decode_constants_t dcon;
      l = dense_decode_launch(&dc, &dcon, grids[g], threads[t], order);
      run_ok(&l);
      float *dense = malloc(dn * 4);
      memcpy(dense, dc.out, dn * 4);
      accel_kp_attn_paged_constants_t pcon;
      l = paged_decode_launch(&dc, &pcon, grids[g], threads[t], order);
      run_ok(&l);
      if (first_prefill == NULL) {
        first_prefill = malloc(pn * 4);
        memcpy(first_prefill, pc.out, pn * 4);
        first_dense = dense;
        first_paged = malloc(dn * 4);
        memcpy(first_paged, dc.out, dn * 4);
        continue;
      }
      if (memcmp(first_prefill, pc.out, pn * 4) != 0 ||
          memcmp(first_dense, dense, dn * 4) != 0 ||
          memcmp(first_paged, dc.out, dn * 4) != 0) {
        fail_msg("results differ with %u work-groups on %u threads",
                 grids[g], threads[t]);
      }
      free(dense);
    }
  }
  free(first_prefill);
  free(first_dense);
  free(first_paged);
  prefill_case_free(&pc);
  decode_case_free(&dc);
}

// Runs |l| expecting a refusal whose message contains |needle|, with the
// output (|out|, |n| floats) untouched.
static void expect_refused(const kernel_launch_t *l, const char *needle,
                           const float *out, uint64_t n) {
  char message[512];
  int32_t rc = kernel_run(l, message, sizeof(message));
  assert_int_not_equal(rc, 0);
  if (strstr(message, needle) == NULL) {
    fail_msg("message \"%s\" does not name \"%s\"", message, needle);
  }
  for (uint64_t i = 0; i < n; ++i) {
    assert_true(out[i] == 12345.0f);
  }
}

// Launches whose constants do not fit their bindings (short buffers, bad
// block ids and slots, lengths past the cache, head counts that do not
// divide) are refused with a message and never read out of bounds: every
// buffer is exactly as long as it is bound, so ASan would see a stray read.
static void test_bad_launches_refused_with_message(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  prefill_case_t pc;
  prefill_case_make(&rng, &pc, 9, 9, 4, 2, 8);
  uint64_t pn = 9ull * 4 * 8;
  kernel_launch_t l = prefill_launch(&pc, 2, 2, 1);
  l.bindings[1].size_bytes -= 4;
  expect_refused(&l, "binding 1 (k) holds", pc.out, pn);
  l = prefill_launch(&pc, 2, 2, 1);
  pc.c.q_len = 10;
  expect_refused(&l, "kv_len 9 is below q_len 10", pc.out, pn);
  pc.c.q_len = 9;
  pc.c.n_kv_heads = 3;
  expect_refused(&l, "not a multiple of n_kv_heads 3", pc.out, pn);
  pc.c.n_kv_heads = 2;
  pc.c.head_dim = 0;
  expect_refused(&l, "must be positive", pc.out, pn);
  pc.c.head_dim = 4096;
  expect_refused(&l, "head_dim 4096 (at most 512)", pc.out, pn);
  // Sizes whose products overflow 64 bits are refused, not wrapped around.
  pc.c.head_dim = 512;
  pc.c.n_heads = pc.c.n_kv_heads = 0x80000000u;
  pc.c.q_len = pc.c.kv_len = 0xffffffffu;
  expect_refused(&l, "binding 0 (q) holds", pc.out, pn);
  prefill_case_free(&pc);

  decode_case_t dc;
  decode_case_make(&rng, &dc, 2, 20, 4, 2, 8, 4);
  dc.lens[0] = dc.lens[1] = 20;
  for (uint32_t b = 0; b < 2 * dc.max_blocks; ++b) {
    dc.tables[b] = b;
  }
  uint64_t dn = 2ull * 4 * 8;
  accel_kp_attn_paged_constants_t pcon;
  l = paged_decode_launch(&dc, &pcon, 3, 2, 5);
  dc.tables[dc.max_blocks + 2] = dc.num_blocks;
  expect_refused(&l, "block_tables[1][2]", dc.out, dn);
  dc.tables[dc.max_blocks + 2] = 2;
  dc.lens[1] = 21;
  expect_refused(&l, "context_lens[1] = 21 exceeds", dc.out, dn);
  dc.lens[1] = 20;
  pcon.block_size = 0;
  expect_refused(&l, "block_size is 0", dc.out, dn);
  pcon.block_size = dc.block_size;
  l.bindings[3].size_bytes -= 4;
  expect_refused(&l, "binding 3 (block_tables)", dc.out, dn);

  accel_kp_attn_decode_constants_t dcon;
  l = dense_decode_launch(&dc, &dcon, 1, 1, 0);
  dc.lens[0] = 21;
  expect_refused(&l, "context_lens[0] = 21 exceeds max_len 20", dc.out, dn);
  dc.lens[0] = 20;
  l.bindings[4].size_bytes -= 1;
  expect_refused(&l, "binding 4 (out)", dc.out, dn);

  accel_kp_kv_append_constants_t ac;
  uint64_t cache = (uint64_t)dc.num_blocks * dc.block_size * row_floats(&dc);
  float *k_before = malloc(cache * 4);
  memcpy(k_before, dc.k_cache, cache * 4);
  l = append_launch(&dc, &ac, 2, 2, 9);
  dc.slots[5] = (int32_t)(dc.num_blocks * dc.block_size);
  expect_refused(&l, "slot_mapping[5]", dc.out, 0);
  dc.slots[5] = -2;
  expect_refused(&l, "slot_mapping[5] = -2", dc.out, 0);
  assert_memory_equal(k_before, dc.k_cache, cache * 4);
  free(k_before);
  decode_case_free(&dc);
}

// ---------------------------------------------------------------------------
// Through the runtime: reference.axe on the host device
// ---------------------------------------------------------------------------

// A device buffer holding a copy of |data| (|bytes| long).
static accel_buffer_t *device_copy(accel_device_t *dev, const void *data,
                                   uint64_t bytes) {
  accel_buffer_desc_t desc = {.struct_size = sizeof(desc), .size_bytes = bytes};
  accel_buffer_t *buf = NULL;
  assert_accel_ok(accel_buffer_alloc(dev, &desc, &buf));
  void *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(buf, &p));
  memcpy(p, data, bytes);
  return buf;
}

// Launches the direct run |l| of kernel |name| through accel_launch on
// |s| (same bindings copied into device buffers, same grid), waits, and
// returns the device buffers (caller releases them).
static accel_status_t launch_like(accel_executable_t *exe, accel_stream_t *s,
                                  accel_device_t *dev, const char *name,
                                  const kernel_launch_t *l,
                                  accel_buffer_t **bufs) {
  accel_kernel_t *k = NULL;
  assert_accel_ok(accel_executable_kernel(exe, name, &k));
  accel_launch_binding_t lb[8];
  for (uint32_t i = 0; i < l->binding_count; ++i) {
    bufs[i] = device_copy(dev, l->bindings[i].data, l->bindings[i].size_bytes);
    lb[i] = (accel_launch_binding_t){.buffer = bufs[i]};
  }
  accel_launch_desc_t desc = {.struct_size = sizeof(desc),
                              .workgroup_count = {l->grid[0], l->grid[1],
                                                  l->grid[2]},
                              .binding_count = l->binding_count,
                              .constants_size = l->constants_size,
                              .bindings = lb,
                              .constants = l->constants};
  assert_accel_ok(accel_launch(s, k, &desc));
  return accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE);
}

// Loads reference.axe on |env|'s device and creates a stream.
static void open_reference(test_env_t *env, accel_executable_t **exe,
                           accel_stream_t **s) {
  assert_accel_ok(accel_executable_load_file(
      env->runtime, env->device, getenv("ACCEL_TEST_REFERENCE_AXE"), 0, exe));
  accel_stream_desc_t sd = {.struct_size = sizeof(sd), .name = "attention"};
  assert_accel_ok(accel_stream_create(env->device, &sd, s));
}

// Runs the launch |l| of kernel |name| through reference.axe on a fresh
// runtime whose host device runs grids on |threads| threads
// (ACCEL_HOST_THREADS), and checks that binding |out| ends with the bits of
// |want|.
static void runtime_run_matches(const char *name, const kernel_launch_t *l,
                                uint32_t out, const void *want,
                                uint32_t threads) {
  char text[16];
  snprintf(text, sizeof(text), "%u", threads);
  setenv("ACCEL_HOST_THREADS", text, 1);
  test_env_t *env = NULL;
  assert_int_equal(test_env_setup((void **)&env), 0);
  unsetenv("ACCEL_HOST_THREADS");
  accel_executable_t *exe = NULL;
  accel_stream_t *s = NULL;
  open_reference(env, &exe, &s);
  accel_buffer_t *bufs[8];
  assert_accel_ok(launch_like(exe, s, env->device, name, l, bufs));
  void *got = NULL;
  assert_accel_ok(accel_buffer_host_pointer(bufs[out], &got));
  if (memcmp(got, want, l->bindings[out].size_bytes) != 0) {
    fail_msg("%s through the runtime on %u threads differs from the direct run",
             name, threads);
  }
  for (uint32_t i = 0; i < l->binding_count; ++i) {
    accel_buffer_release(bufs[i]);
  }
  accel_stream_destroy(s);
  accel_executable_release(exe);
  void *state = env;
  test_env_teardown(&state);
}

// reference.axe's attention kernels launched through the runtime on 1, 2
// and 7 host threads (its thread pool, its work-group order) give the bits
// of the direct run, and a refused launch fails the stream with the
// kernel's message.
static void test_runtime_launch_matches_direct_run(void **state) {
  test_env_t *env = *state;
  if (getenv("ACCEL_TEST_REFERENCE_AXE") == NULL) {
    skip();  // built without OpenBLAS: no reference.axe
  }
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  static const uint32_t threads[] = {1, 2, 7};

  decode_case_t dc;
  decode_case_make(&rng, &dc, 3, 90, 8, 2, 32, 16);
  accel_kp_kv_append_constants_t ac;
  kernel_launch_t l = append_launch(&dc, &ac, 1, 1, 0);
  run_ok(&l);
  accel_kp_attn_paged_constants_t pcon;
  l = paged_decode_launch(&dc, &pcon, 5, 2, test_rng_next(&rng));
  run_ok(&l);
  for (int t = 0; t < 3; ++t) {
    runtime_run_matches("attention_paged_decode", &l, 5, dc.out, threads[t]);
  }
  prefill_case_t pc;
  prefill_case_make(&rng, &pc, 70, 75, 8, 2, 32);
  l = prefill_launch(&pc, 3, 2, test_rng_next(&rng));
  run_ok(&l);
  for (int t = 0; t < 3; ++t) {
    runtime_run_matches("attention_prefill", &l, 3, pc.out, threads[t]);
  }
  prefill_case_free(&pc);

  // A block id past the cache: the stream fails with the kernel's message.
  accel_executable_t *exe = NULL;
  accel_stream_t *s = NULL;
  open_reference(env, &exe, &s);
  l = paged_decode_launch(&dc, &pcon, 5, 2, 0);
  pcon.num_blocks = 1;
  l.bindings[1].size_bytes = l.bindings[2].size_bytes =
      4ull * dc.block_size * row_floats(&dc);
  accel_buffer_t *bufs[8];
  assert_int_equal(
      launch_like(exe, s, env->device, "attention_paged_decode", &l, bufs),
      ACCEL_ERROR_ABORTED);
  assert_non_null(strstr(accel_last_error(), "is outside the cache's 1 blocks"));
  for (uint32_t i = 0; i < 6; ++i) {
    accel_buffer_release(bufs[i]);
  }
  decode_case_free(&dc);
  accel_stream_destroy(s);
  accel_executable_release(exe);
}

static int group_setup(void **state) {
  g_lib = kernel_lib_open(getenv("ACCEL_TEST_ATTENTION_KERNELS"));
  return test_env_setup(state);
}

static int group_teardown(void **state) {
  kernel_lib_close(g_lib);
  return test_env_teardown(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prefill_matches_f64_reference_on_odd_shapes),
      cmocka_unit_test(test_decode_matches_f64_reference),
      cmocka_unit_test(test_kv_append_writes_slots_and_skips_minus_one),
      cmocka_unit_test(test_paged_decode_equals_dense_bit_for_bit),
      cmocka_unit_test(test_results_identical_across_splits_and_threads),
      cmocka_unit_test(test_bad_launches_refused_with_message),
      cmocka_unit_test(test_runtime_launch_matches_direct_run),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
