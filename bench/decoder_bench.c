// The decoder figures of accel-bench kernels: examples/decoder.c's model
// (decoder_run.c) run through the runtime on reference.axe, as the issue
// asks: prefill and decode tokens per second, and the share of decode's
// wall time not inside kernels (host overhead), read from the built-in
// recorder's trace of the phase. Target: host overhead <= 5% in decode.
//
// Model: 4 layers, dim 1024, 16/4 heads of 64, ffn 2816, vocab 8192, int8
// projections, KV blocks of 16; prompt 256, 32 tokens generated (with
// --quick: 2 layers, dim 256, ffn 704, vocab 2048, prompt 64, 8 tokens).
// Figures are medians over the runs (3, or 1 with --quick); the model is
// packed once into $TMPDIR (or /tmp), where the traces go too.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "decoder_run.h"

#ifndef ACCEL_REFERENCE_AXE_PATH
#define ACCEL_REFERENCE_AXE_PATH ""
#endif

typedef struct decoder_bench {
  accel_runtime_t *rt;
  decoder_run_desc_t desc;
  char dir[256];
  char model[320];
} decoder_bench_t;

static int setup(void *ctx) {
  decoder_bench_t *b = ctx;
  const char *tmp = getenv("TMPDIR");
  snprintf(b->dir, sizeof(b->dir), "%s/accel-bench-decoder-XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp(b->dir) == NULL) {
    fprintf(stderr, "accel-bench kernels: cannot create %s\n", b->dir);
    return 1;
  }
  snprintf(b->model, sizeof(b->model), "%s/decoder.axe", b->dir);
  decoder_pack(&b->desc.c, b->model);
  b->desc.model_path = b->model;
  b->desc.trace_dir = b->dir;
  return 0;
}

static void teardown(void *ctx) {
  decoder_bench_t *b = ctx;
  char path[400];
  static const char *const k_files[] = {"decoder.axe", "decoder-prefill.pftrace",
                                        "decoder-decode.pftrace"};
  for (size_t i = 0; i < sizeof(k_files) / sizeof(k_files[0]); ++i) {
    snprintf(path, sizeof(path), "%s/%s", b->dir, k_files[i]);
    unlink(path);
  }
  rmdir(b->dir);
}

// Slots: prefill tokens/s, decode tokens/s, decode host overhead (%).
static int measure(void *ctx, int run, double *out) {
  (void)run;
  decoder_bench_t *b = ctx;
  decoder_result_t r;
  decoder_run(b->rt, &b->desc, &r);
  out[0] = r.prefill.tokens / r.prefill.wall_s;
  out[1] = r.decode.tokens / r.decode.wall_s;
  out[2] = 100.0 * (1.0 - r.decode.kernel_s / r.decode.wall_s);
  decoder_result_free(&r);
  return 0;
}

static const bench_figure_t k_figures[] = {
    {.name = "decoder_prefill", .unit = "tok/s", .value_slot = 0},
    {.name = "decoder_decode", .unit = "tok/s", .value_slot = 1},
    {.name = "decoder_decode_host_overhead",
     .unit = "%",
     .value_slot = 2,
     .target = "<= 5"},
};

int bench_kernels_decoder(bench_report_t *report, accel_runtime_t *rt,
                          bool quick) {
  decoder_bench_t b = {.rt = rt};
  const char *ref = getenv("ACCEL_REFERENCE_AXE");
  b.desc.reference_path =
      ref != NULL && ref[0] != '\0' ? ref : ACCEL_REFERENCE_AXE_PATH;
  b.desc.c = (decoder_config_t){.layers = quick ? 2 : 4,
                                .dim = quick ? 256 : 1024,
                                .heads = 16,
                                .kv_heads = 4,
                                .head_dim = quick ? 16 : 64,
                                .ffn = quick ? 704 : 2816,
                                .vocab = quick ? 2048 : 8192,
                                .block_size = 16,
                                .seed = 1};
  b.desc.prompt = quick ? 64 : 256;
  b.desc.steps = quick ? 8 : 32;
  bench_group_t group = {.runs = quick ? 1 : 3,
                         .slots = 3,
                         .setup = setup,
                         .measure = measure,
                         .teardown = teardown,
                         .figures = k_figures,
                         .figure_count = 3};
  return bench_group_run(report, &group, &b);
}
