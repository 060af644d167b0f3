// example-decoder: a small decoder-only transformer run end to end through
// the runtime on the host device.
//
// It plays both sides of the compiler-runtime contract: it packs seeded
// random weights (int8 per-channel projections, decoder_model.h) into a
// model .axe with the builder API, then serves that file on the serving
// engine (include/accel/serve.h) with the reference kernels (reference.axe,
// kernels/README.md): one request with a prompt of random tokens, prefilled
// in one step, then decoded greedily a step per token. The engine keeps the
// KV cache in blocks of a paged pool, one buffer per layer for K and one
// for V, read through the request's block table by attention_paged_decode,
// and replays one recorded command buffer per step shape (every decode
// step has the same shape; docs/serving.md, "Step command buffers").
//
// The run is in decoder_run.c (accel-bench kernels runs the same). It
// prints prefill and decode tokens per second and where the time went, from
// the built-in recorder's trace of each phase: time per kernel and the host
// overhead (the share of the phase's wall time not inside a kernel: in
// decode, the engine's step: scheduling, the step's submit or replay, the
// wait, and sampling the token on the host).
//
// usage: example-decoder REFERENCE.axe [--model OUT.axe] [--prompt N]
//          [--steps N] [--logits FILE] [--trace-dir DIR] [--CONFIG N ...]
// CONFIG is any field of DECODER_CONFIG_FIELDS (--layers, --dim, --heads,
// --kv-heads, --head-dim, --ffn, --vocab, --block-size, --seed).
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/accel.h"
#include "decoder_run.h"

// ---------------------------------------------------------------------------

typedef struct options {
  const char *ref_path, *model_path, *logits_path, *trace_dir;
  uint32_t prompt, steps;
  decoder_config_t c;
} options_t;

static int usage(void) {
  fprintf(stderr,
          "usage: example-decoder REFERENCE.axe [--model OUT.axe] [--prompt "
          "N] [--steps N]\n"
          "         [--logits FILE] [--trace-dir DIR] [--CONFIG N ...]\n"
          "CONFIG:");
#define DECODER_USAGE(name, def) fprintf(stderr, " --%s (%u)", #name, def);
  DECODER_CONFIG_FIELDS(DECODER_USAGE)
#undef DECODER_USAGE
  fprintf(stderr, "  (underscores may be written as dashes)\n");
  return 2;
}

static int parse(int argc, char **argv, options_t *o) {
  *o = (options_t){.model_path = "decoder.axe", .trace_dir = ".",
                   .prompt = 256, .steps = 64};
#define DECODER_DEFAULT(name, def) o->c.name = def;
  DECODER_CONFIG_FIELDS(DECODER_DEFAULT)
#undef DECODER_DEFAULT
  if (argc < 2 || argv[1][0] == '-') {
    return usage();
  }
  o->ref_path = argv[1];
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc || strncmp(argv[i], "--", 2) != 0) {
      return usage();
    }
    char key[64];
    snprintf(key, sizeof(key), "%s", argv[i] + 2);
    for (char *p = key; *p; ++p) {
      *p = *p == '-' ? '_' : *p;
    }
    const char *v = argv[i + 1];
    char *end = NULL;
    unsigned long n = strtoul(v, &end, 10);
    bool number = *v != '\0' && *end == '\0' && n <= UINT32_MAX;
    if (strcmp(key, "model") == 0) {
      o->model_path = v;
    } else if (strcmp(key, "logits") == 0) {
      o->logits_path = v;
    } else if (strcmp(key, "trace_dir") == 0) {
      o->trace_dir = v;
    } else if (strcmp(key, "prompt") == 0 && number) {
      o->prompt = (uint32_t)n;
    } else if (strcmp(key, "steps") == 0 && number) {
      o->steps = (uint32_t)n;
    }
#define DECODER_OPTION(name, def) \
    else if (strcmp(key, #name) == 0 && number) { o->c.name = (uint32_t)n; }
    DECODER_CONFIG_FIELDS(DECODER_OPTION)
#undef DECODER_OPTION
    else {
      fprintf(stderr, "example-decoder: bad option %s %s\n", argv[i], v);
      return usage();
    }
  }
  const decoder_config_t *c = &o->c;
  if (o->prompt == 0 || o->steps == 0 || c->layers == 0 || c->dim == 0 ||
      c->heads == 0 || c->kv_heads == 0 || c->heads % c->kv_heads != 0 ||
      c->head_dim == 0 || c->head_dim % 2 != 0 || c->ffn == 0 ||
      c->vocab == 0 || c->block_size == 0) {
    fprintf(stderr,
            "example-decoder: sizes must be positive, heads a multiple of "
            "kv_heads, head_dim even\n");
    return 2;
  }
  return 0;
}

static void print_phase(const char *name, const decoder_phase_t *p) {
  printf("  %-8s %-24s %8s %10s %8s\n", name, "kernel", "launches",
         "total_ms", "share");
  for (size_t i = 0; i < p->trace.count; ++i) {
    const trace_summary_entry_t *e = &p->trace.entries[i];
    if (strcmp(e->category, "kernel") == 0) {
      printf("  %-8s %-24s %8llu %10.2f %7.1f%%\n", "", e->name,
             (unsigned long long)e->count, (double)e->total_ns / 1e6,
             100.0 * (double)e->total_ns / (p->wall_s * 1e9));
    }
  }
  printf("  host overhead (time not inside kernels): %.1f%% of %.3f s\n",
         100.0 * (1.0 - p->kernel_s / p->wall_s), p->wall_s);
}

static int write_logits(const options_t *o, const decoder_result_t *r) {
  FILE *f = fopen(o->logits_path, "wb");
  if (f == NULL) {
    fprintf(stderr, "example-decoder: cannot write %s\n", o->logits_path);
    return 1;
  }
  decoder_logits_header_t h = {.magic = DECODER_LOGITS_MAGIC,
                               .vocab = o->c.vocab,
                               .prompt = o->prompt,
                               .steps = o->steps};
  bool ok = fwrite(&h, sizeof(h), 1, f) == 1 &&
            fwrite(r->tokens, 4, o->prompt + o->steps, f) ==
                o->prompt + o->steps &&
            fwrite(r->logits, 4ull * o->c.vocab, o->steps, f) == o->steps;
  if (fclose(f) != 0 || !ok) {
    fprintf(stderr, "example-decoder: cannot write %s\n", o->logits_path);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  options_t o;
  int rc = parse(argc, argv, &o);
  if (rc != 0) {
    return rc;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  decoder_pack(&o.c, o.model_path);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("packed %s in %.2f s: %u layers, dim %u, %u/%u heads of %u, ffn %u, "
         "vocab %u, int8 projections\n",
         o.model_path,
         (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
         o.c.layers, o.c.dim, o.c.heads, o.c.kv_heads, o.c.head_dim, o.c.ffn,
         o.c.vocab);
  accel_runtime_t *rt = NULL;
  if (accel_runtime_create(NULL, &rt) != ACCEL_OK) {
    fprintf(stderr, "example-decoder: %s\n", accel_last_error());
    return 1;
  }
  decoder_run_desc_t d = {.c = o.c, .prompt = o.prompt, .steps = o.steps,
                          .reference_path = o.ref_path,
                          .model_path = o.model_path,
                          .trace_dir = o.trace_dir};
  decoder_result_t r;
  decoder_run(rt, &d, &r);
  printf("prefill: %u tokens in %.3f s: %.1f tokens/s (%llu launches)\n",
         r.prefill.tokens, r.prefill.wall_s, r.prefill.tokens / r.prefill.wall_s,
         (unsigned long long)r.prefill.launches);
  print_phase("prefill", &r.prefill);
  if (r.decode.tokens > 0) {
    printf("decode: %u tokens in %.3f s: %.1f tokens/s (%.1f ms per token, "
           "%llu launches per token)\n",
           r.decode.tokens, r.decode.wall_s, r.decode.tokens / r.decode.wall_s,
           1e3 * r.decode.wall_s / r.decode.tokens,
           (unsigned long long)(r.decode.launches / r.decode.tokens));
    print_phase("decode", &r.decode);
    printf("  (decode host overhead target: <= 5%%)\n");
  }
  printf("generated:");
  for (uint32_t t = 0; t < o.steps && t < 24; ++t) {
    printf(" %d", r.tokens[o.prompt + t]);
  }
  printf("%s\n", o.steps > 24 ? " ..." : "");
  rc = o.logits_path != NULL ? write_logits(&o, &r) : 0;
  decoder_result_free(&r);
  accel_runtime_destroy(rt);
  return rc;
}
