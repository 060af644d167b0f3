// The attention figures of accel-bench kernels: paged decode attention
// against dense decode attention on the same data, both launched through the
// runtime from reference.axe on the host device.
//
//  - paged_decode_attention: K/V bytes read per second by
//    attention_paged_decode over a cache of 16-position blocks handed out in
//    a shuffled order (as a block manager that has run for a while leaves
//    them). Baseline dense_decode_attention: attention_decode over the same
//    keys and values laid out densely per sequence. Target >= 0.8 on the
//    paired ratio (issue #17).
//
// Shape: 4 sequences of 2048 positions (512 with --quick), 32 query heads
// over 8 KV heads of 128 dimensions (a Llama-3-8B layer), f32: 64 MiB of K/V
// (16 MiB). Each sample launches one kernel 4 times and synchronizes; the
// two kernels take turns within a run, first one then the other.
//
// reference.axe comes from ACCEL_REFERENCE_AXE (a path) or the build tree
// (ACCEL_REFERENCE_AXE_PATH).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/accel.h"
#include "attention_params.h"
#include "bench.h"

#ifndef ACCEL_REFERENCE_AXE_PATH
#define ACCEL_REFERENCE_AXE_PATH ""
#endif

#define SEQS 4u
#define HEADS 32u
#define KV_HEADS 8u
#define HEAD_DIM 128u
#define BLOCK 16u
#define LAUNCHES 4

typedef struct attn_bench {
  accel_runtime_t *rt;
  accel_device_t *dev;
  bool quick;
  uint32_t len;
  accel_executable_t *exe;
  accel_stream_t *s;
  accel_kernel_t *paged, *dense;
  accel_buffer_t *q, *k, *v, *k_cache, *v_cache, *tables, *lens, *out;
  accel_kp_attn_paged_constants_t pc;
  accel_kp_attn_decode_constants_t dc;
} attn_bench_t;

static accel_buffer_t *alloc_host(attn_bench_t *b, uint64_t bytes,
                                  void **out_ptr) {
  accel_buffer_desc_t desc = {.struct_size = sizeof(desc), .size_bytes = bytes};
  accel_buffer_t *buf = NULL;
  if (accel_buffer_alloc(b->dev, &desc, &buf) != ACCEL_OK ||
      accel_buffer_host_pointer(buf, out_ptr) != ACCEL_OK) {
    accel_buffer_release(buf);
    return NULL;
  }
  return buf;
}

static uint64_t next_u64(uint64_t *rng) {
  *rng ^= *rng << 13;
  *rng ^= *rng >> 7;
  *rng ^= *rng << 17;
  return *rng;
}

static float next_value(uint64_t *rng) {
  return (float)((next_u64(rng) >> 40) & 0xffff) / 32768.0f - 1.0f;
}

// The same keys and values, dense per sequence and in shuffled blocks.
static int fill(attn_bench_t *b) {
  uint64_t row = (uint64_t)KV_HEADS * HEAD_DIM;
  uint64_t kv = (uint64_t)SEQS * b->len * row * 4;
  uint32_t blocks_per_seq = b->len / BLOCK;
  uint32_t num_blocks = SEQS * blocks_per_seq;
  float *q, *k, *v, *kc, *vc, *out;
  uint32_t *tables, *lens;
  b->q = alloc_host(b, (uint64_t)SEQS * HEADS * HEAD_DIM * 4, (void **)&q);
  b->out = alloc_host(b, (uint64_t)SEQS * HEADS * HEAD_DIM * 4, (void **)&out);
  b->k = alloc_host(b, kv, (void **)&k);
  b->v = alloc_host(b, kv, (void **)&v);
  b->k_cache = alloc_host(b, kv, (void **)&kc);
  b->v_cache = alloc_host(b, kv, (void **)&vc);
  b->tables = alloc_host(b, (uint64_t)num_blocks * 4, (void **)&tables);
  b->lens = alloc_host(b, SEQS * 4, (void **)&lens);
  if (!b->q || !b->out || !b->k || !b->v || !b->k_cache || !b->v_cache ||
      !b->tables || !b->lens) {
    fprintf(stderr, "accel-bench kernels: cannot allocate: %s\n",
            accel_last_error());
    return 1;
  }
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  for (uint64_t i = 0; i < (uint64_t)SEQS * HEADS * HEAD_DIM; ++i) {
    q[i] = next_value(&rng);
  }
  for (uint64_t i = 0; i < kv / 4; ++i) {
    k[i] = next_value(&rng);
    v[i] = next_value(&rng);
  }
  for (uint32_t i = 0; i < num_blocks; ++i) {
    tables[i] = i;
  }
  for (uint32_t i = num_blocks; i > 1; --i) {
    uint32_t j = (uint32_t)(next_u64(&rng) % i);
    uint32_t t = tables[i - 1];
    tables[i - 1] = tables[j];
    tables[j] = t;
  }
  for (uint32_t s = 0; s < SEQS; ++s) {
    lens[s] = b->len;
    for (uint32_t j = 0; j < b->len; ++j) {
      uint32_t block = tables[s * blocks_per_seq + j / BLOCK];
      uint64_t to = ((uint64_t)block * BLOCK + j % BLOCK) * row;
      uint64_t from = ((uint64_t)s * b->len + j) * row;
      memcpy(kc + to, k + from, row * 4);
      memcpy(vc + to, v + from, row * 4);
    }
  }
  b->pc = (accel_kp_attn_paged_constants_t){
      .num_seqs = SEQS, .n_heads = HEADS, .n_kv_heads = KV_HEADS,
      .head_dim = HEAD_DIM, .block_size = BLOCK, .num_blocks = num_blocks,
      .max_blocks_per_seq = blocks_per_seq, .scale = 0.08838834764831845f};
  b->dc = (accel_kp_attn_decode_constants_t){
      .num_seqs = SEQS, .max_len = b->len, .n_heads = HEADS,
      .n_kv_heads = KV_HEADS, .head_dim = HEAD_DIM, .scale = b->pc.scale};
  return 0;
}

static void teardown(void *ctx) {
  attn_bench_t *b = ctx;
  accel_buffer_t *bufs[] = {b->q, b->k, b->v, b->k_cache, b->v_cache,
                            b->tables, b->lens, b->out};
  for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); ++i) {
    accel_buffer_release(bufs[i]);
  }
  accel_stream_destroy(b->s);
  accel_executable_release(b->exe);
}

static int setup(void *ctx) {
  attn_bench_t *b = ctx;
  const char *path = getenv("ACCEL_REFERENCE_AXE");
  if (path == NULL || path[0] == '\0') {
    path = ACCEL_REFERENCE_AXE_PATH;
  }
  accel_stream_desc_t sd = {.struct_size = sizeof(sd), .name = "attention"};
  if (accel_executable_load_file(b->rt, b->dev, path, 0, &b->exe) !=
          ACCEL_OK ||
      accel_executable_kernel(b->exe, "attention_paged_decode", &b->paged) !=
          ACCEL_OK ||
      accel_executable_kernel(b->exe, "attention_decode", &b->dense) !=
          ACCEL_OK ||
      accel_stream_create(b->dev, &sd, &b->s) != ACCEL_OK) {
    fprintf(stderr,
            "accel-bench kernels: reference.axe \"%s\" (set "
            "ACCEL_REFERENCE_AXE): %s\n",
            path, accel_last_error());
    teardown(b);
    return 1;
  }
  if (fill(b) != 0) {
    teardown(b);
    return 1;
  }
  return 0;
}

// Seconds for LAUNCHES launches of one kernel and a synchronize.
static double time_kernel(attn_bench_t *b, bool paged) {
  accel_launch_binding_t pb[6] = {{b->q, 0, 0},      {b->k_cache, 0, 0},
                                  {b->v_cache, 0, 0}, {b->tables, 0, 0},
                                  {b->lens, 0, 0},    {b->out, 0, 0}};
  accel_launch_binding_t db[5] = {{b->q, 0, 0},    {b->k, 0, 0},
                                  {b->v, 0, 0},    {b->lens, 0, 0},
                                  {b->out, 0, 0}};
  accel_launch_desc_t ld = {
      .struct_size = sizeof(ld),
      .workgroup_count = {SEQS * KV_HEADS, 1, 1},
      .binding_count = paged ? 6 : 5,
      .constants_size = 32,
      .bindings = paged ? pb : db,
      .constants = paged ? (const void *)&b->pc : (const void *)&b->dc};
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < LAUNCHES; ++i) {
    if (accel_launch(b->s, paged ? b->paged : b->dense, &ld) != ACCEL_OK) {
      return -1;
    }
  }
  if (accel_stream_synchronize(b->s, ACCEL_TIMEOUT_INFINITE) != ACCEL_OK) {
    return -1;
  }
  return (double)(bench_now_ns() - t0) / 1e9;
}

// Slot 0: paged GB/s, slot 1: dense GB/s (K and V bytes read per second).
static int measure(void *ctx, int run, double *out) {
  attn_bench_t *b = ctx;
  double bytes = 2.0 * SEQS * b->len * KV_HEADS * HEAD_DIM * 4 * LAUNCHES;
  bool paged_first = (run & 1) == 0;
  double first = time_kernel(b, paged_first);
  double second = time_kernel(b, !paged_first);
  if (first <= 0 || second <= 0) {
    fprintf(stderr, "accel-bench kernels: attention launch failed: %s\n",
            accel_last_error());
    return 1;
  }
  out[0] = bytes / (paged_first ? first : second) / 1e9;
  out[1] = bytes / (paged_first ? second : first) / 1e9;
  return 0;
}

static const bench_figure_t k_figures[] = {
    {.name = "paged_decode_attention",
     .unit = "GB/s",
     .value_slot = 0,
     .baseline_name = "dense_decode_attention",
     .baseline_slot = 1,
     .target = ">= 0.8",
     .pairing = BENCH_PAIRED},
};

int bench_kernels_attention(bench_report_t *report, accel_runtime_t *rt,
                            accel_device_t *dev, bool quick) {
  attn_bench_t b = {.rt = rt, .dev = dev, .quick = quick,
                    .len = quick ? 512 : 2048};
  bench_group_t group = {.runs = quick ? 5 : 21,
                         .slots = 2,
                         .setup = setup,
                         .measure = measure,
                         .teardown = teardown,
                         .figures = k_figures,
                         .figure_count = 1};
  return bench_group_run(report, &group, &b);
}
