// accel-tune KERNEL --shape S | --all: searches a reference kernel's
// tunable parameters (kernel ABI 1.2 metadata) on this machine and stores
// the fastest configuration in the tuning cache (docs/tuning.md).
//
// Each candidate is timed against the default configuration in the same
// run, as interleaved pairs (default, candidate, default, ...), each sample
// a batch of launches; a candidate's figure is the median of the per-pair
// ratios (candidate / default). The best by that median is measured again
// with more pairs and a bootstrap 95% interval (bench/bench_stats.c); it is
// stored only when the whole interval is below 1 (verdict "met" against
// "< 1"), otherwise the default stays. Every candidate's output is compared
// with the default's byte for byte: one that differs is refused (and the
// tool exits 1), since tuning must never change results.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "abi/tuning.h"
#include "accel/accel.h"
#include "attention_params.h"
#include "bench_stats.h"
#include "kernel_params.h"
#include "tool_cli.h"

#ifndef ACCEL_REFERENCE_AXE_PATH
#define ACCEL_REFERENCE_AXE_PATH ""
#endif

#define MAX_BINDINGS 6
#define MAX_CONFIGS 512
#define SCREEN_PAIRS 5
#define CONFIRM_PAIRS 21

static const accel_tool_option_t k_options[] = {
    {"--shape", "DIMS", 1,
     "the launch shape: m,n,k (matmul, qmatmul_*); seqs,len,heads,kv_heads,"
     "head_dim[,block] (attention_decode, attention_paged_decode); q_len,"
     "kv_len,heads,kv_heads,head_dim (attention_prefill)"},
    {"--all", NULL, 1,
     "tune matmul, the int8 GEMV and attention at the decoder's shapes"},
    {"--kernels", "FILE", 0,
     "reference.axe to load (default: ACCEL_REFERENCE_AXE, else the installed "
     "one)"},
    {"--cache", "FILE", 0,
     "tuning cache to update (default: ACCEL_TUNING_CACHE, else "
     "$XDG_CACHE_HOME/accel/tuning-cache)"},
    {"--dry-run", NULL, 0, "search and report, but store nothing"},
    {"--quick", NULL, 0, "fewer pairs (a smoke run; figures are rough)"},
    {"--json", NULL, 0, "print one JSON object"},
};
enum { OPT_SHAPE, OPT_ALL, OPT_KERNELS, OPT_CACHE, OPT_DRY, OPT_QUICK,
       OPT_JSON };

static const accel_tool_spec_t k_spec = {
    .name = "accel-tune",
    .synopsis = "KERNEL --shape DIMS [options]\n       accel-tune --all "
                "[options]",
    .description = "searches a reference kernel's tunable parameters on this "
                   "machine and stores the fastest in the tuning cache",
    .options = k_options,
    .option_count = sizeof(k_options) / sizeof(k_options[0]),
    .min_positional = 0,
    .max_positional = 1,
};

// One launch to tune: kernel, constants, bindings (host-visible buffers).
typedef struct job {
  const char *kernel;
  char shape[64];
  uint8_t constants[64];
  uint32_t constants_size;
  uint32_t binding_count;
  uint64_t bytes[MAX_BINDINGS];
  uint32_t out;  // the binding compared across configurations
  uint64_t units;  // default grid: min(units, 256), as the decoder launches
} job_t;

typedef struct tuner {
  accel_runtime_t *rt;
  accel_device_t *dev;
  accel_executable_t *exe;
  accel_stream_t *stream;
  bool quick;
  char fingerprint[ACCEL_TUNING_MAX_TOKEN + 1];
  accel_device_info_t info;
} tuner_t;

typedef struct config {
  uint32_t values[ACCEL_KERNEL_MAX_TUNABLES];  // per tunable
} config_t;

typedef struct result {
  config_t best;
  bool found;      // a configuration faster than the default with confidence
  double ratio, lo, hi;
  int pairs;
  uint32_t configs;
  uint32_t differing;  // configurations whose bytes differed
  bool stored;
} result_t;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int parse_dims(const char *text, uint32_t *out, int max) {
  int n = 0;
  const char *p = text;
  while (*p != '\0' && n < max) {
    char *end = NULL;
    unsigned long v = strtoul(p, &end, 10);
    if (end == p || v == 0 || v > (1ul << 24) || (*end != ',' && *end != '\0')) {
      return -1;
    }
    out[n++] = (uint32_t)v;
    p = *end == ',' ? end + 1 : end;
  }
  return *p == '\0' ? n : -1;
}

// Fills |j| for |kernel| at |dims|; false (with a message) when the kernel
// is not tunable here or the shape does not fit it.
static bool make_job(const char *kernel, const char *dims, job_t *j) {
  uint32_t d[6];
  int n = parse_dims(dims, d, 6);
  memset(j, 0, sizeof(*j));
  j->kernel = kernel;
  snprintf(j->shape, sizeof(j->shape), "%s", dims);
  if (strcmp(kernel, "matmul") == 0 && n == 3) {
    accel_kp_matmul_constants_t c = {.m = d[0], .n = d[1], .k = d[2],
                                     .dtype_a = ACCEL_KP_DTYPE_F32,
                                     .dtype_b = ACCEL_KP_DTYPE_F32};
    memcpy(j->constants, &c, sizeof(c));
    j->constants_size = sizeof(c);
    j->binding_count = 4;
    j->bytes[0] = 4ull * d[0] * d[2];
    j->bytes[1] = 4ull * d[2] * d[1];
    j->bytes[2] = 4;
    j->bytes[3] = 4ull * d[0] * d[1];
    j->out = 3;
    j->units = accel_kp_matmul_units(&c);
    return true;
  }
  bool q8 = strcmp(kernel, "qmatmul_int8") == 0;
  bool qq8 = strcmp(kernel, "qmatmul_q8_0") == 0;
  bool qq4 = strcmp(kernel, "qmatmul_q4_0") == 0;
  if ((q8 || qq8 || qq4) && n == 3 && (q8 || d[2] % 32 == 0)) {
    accel_kp_qmatmul_constants_t c = {.m = d[0], .n = d[1], .k = d[2]};
    memcpy(j->constants, &c, sizeof(c));
    j->constants_size = sizeof(c);
    uint64_t blocks = (uint64_t)d[1] * d[2] / 32;
    j->bytes[0] = 4ull * d[0] * d[2];
    j->bytes[1] = q8 ? (uint64_t)d[1] * d[2] : blocks * (qq8 ? 34 : 18);
    uint32_t b = 2;
    if (q8) {
      j->bytes[b++] = 4ull * d[1];
    }
    j->bytes[b] = 4ull * d[0] * d[1];
    j->out = b;
    j->binding_count = b + 1;
    j->units = accel_kp_qmatmul_units(&c);
    return true;
  }
  if (strcmp(kernel, "attention_decode") == 0 && n == 5 &&
      d[2] % d[3] == 0) {
    accel_kp_attn_decode_constants_t c = {
        .num_seqs = d[0], .max_len = d[1], .n_heads = d[2], .n_kv_heads = d[3],
        .head_dim = d[4], .scale = 1.0f / sqrtf((float)d[4])};
    memcpy(j->constants, &c, sizeof(c));
    j->constants_size = sizeof(c);
    uint64_t kv = 4ull * d[0] * d[1] * d[3] * d[4];
    uint64_t q = 4ull * d[0] * d[2] * d[4];
    uint64_t b[] = {q, kv, kv, 4ull * d[0], q};
    memcpy(j->bytes, b, sizeof(b));
    j->binding_count = 5;
    j->out = 4;
    j->units = (uint64_t)d[0] * d[3];
    return true;
  }
  if (strcmp(kernel, "attention_paged_decode") == 0 && n == 6 &&
      d[2] % d[3] == 0) {
    uint32_t per_seq = (d[1] + d[5] - 1) / d[5];
    accel_kp_attn_paged_constants_t c = {
        .num_seqs = d[0], .n_heads = d[2], .n_kv_heads = d[3],
        .head_dim = d[4], .block_size = d[5], .num_blocks = d[0] * per_seq,
        .max_blocks_per_seq = per_seq, .scale = 1.0f / sqrtf((float)d[4])};
    memcpy(j->constants, &c, sizeof(c));
    j->constants_size = sizeof(c);
    uint64_t cache = 4ull * c.num_blocks * d[5] * d[3] * d[4];
    uint64_t q = 4ull * d[0] * d[2] * d[4];
    uint64_t b[] = {q, cache, cache, 4ull * d[0] * per_seq, 4ull * d[0], q};
    memcpy(j->bytes, b, sizeof(b));
    j->binding_count = 6;
    j->out = 5;
    j->units = (uint64_t)d[0] * d[3];
    return true;
  }
  if (strcmp(kernel, "attention_prefill") == 0 && n == 5 && d[1] >= d[0] &&
      d[2] % d[3] == 0) {
    accel_kp_attn_prefill_constants_t c = {
        .q_len = d[0], .kv_len = d[1], .n_heads = d[2], .n_kv_heads = d[3],
        .head_dim = d[4], .scale = 1.0f / sqrtf((float)d[4])};
    memcpy(j->constants, &c, sizeof(c));
    j->constants_size = sizeof(c);
    uint64_t q = 4ull * d[0] * d[2] * d[4];
    uint64_t kv = 4ull * d[1] * d[3] * d[4];
    uint64_t b[] = {q, kv, kv, q};
    memcpy(j->bytes, b, sizeof(b));
    j->binding_count = 4;
    j->out = 3;
    j->units = (uint64_t)d[0] * d[3];
    return true;
  }
  fprintf(stderr,
          "accel-tune: kernel \"%s\" with shape \"%s\": not a tunable "
          "reference kernel or the wrong number of dimensions (see --help)\n",
          kernel, dims);
  return false;
}

// Fills the job's buffers with data the kernel accepts: small floats, and
// for the attention kernels valid lengths and block tables.
static void fill(const job_t *j, void **host) {
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  for (uint32_t b = 0; b < j->binding_count; ++b) {
    uint8_t *p = host[b];
    for (uint64_t i = 0; i + 4 <= j->bytes[b]; i += 4) {
      uint64_t r = bench_stats_rng(&rng);
      float f = (float)((r >> 40) & 0xffff) / 65536.0f - 0.5f;
      memcpy(p + i, &f, 4);
    }
  }
  if (strncmp(j->kernel, "qmatmul_q", 9) == 0) {
    // Block scales (f16 at the start of each block): small and finite.
    uint64_t size = strcmp(j->kernel, "qmatmul_q8_0") == 0 ? 34 : 18;
    uint8_t *w = host[1];
    for (uint64_t i = 0; i + size <= j->bytes[1]; i += size) {
      uint16_t h = accel_kp_f32_to_f16(0.01f);
      memcpy(w + i, &h, 2);
    }
  }
  if (strcmp(j->kernel, "attention_decode") == 0) {
    const accel_kp_attn_decode_constants_t *c = (const void *)j->constants;
    uint32_t *lens = host[3];
    for (uint32_t s = 0; s < c->num_seqs; ++s) lens[s] = c->max_len;
  }
  if (strcmp(j->kernel, "attention_paged_decode") == 0) {
    const accel_kp_attn_paged_constants_t *c = (const void *)j->constants;
    uint32_t *tables = host[3], *lens = host[4];
    for (uint32_t i = 0; i < c->num_blocks; ++i) tables[i] = i;
    for (uint32_t s = 0; s < c->num_seqs; ++s) {
      lens[s] = c->max_blocks_per_seq * c->block_size;
    }
  }
}

typedef struct prepared {
  accel_kernel_t *kernel;
  accel_buffer_t *bufs[MAX_BINDINGS];
  accel_launch_binding_t lb[MAX_BINDINGS];
  void *host[MAX_BINDINGS];
} prepared_t;

static void prepared_free(prepared_t *p, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    accel_buffer_release(p->bufs[i]);
  }
}

static bool prepare(tuner_t *t, const job_t *j, prepared_t *p) {
  memset(p, 0, sizeof(*p));
  if (accel_executable_kernel(t->exe, j->kernel, &p->kernel) != ACCEL_OK) {
    fprintf(stderr, "accel-tune: %s\n", accel_last_error());
    return false;
  }
  for (uint32_t b = 0; b < j->binding_count; ++b) {
    accel_buffer_desc_t d = {.struct_size = sizeof(d),
                             .size_bytes = j->bytes[b]};
    if (accel_buffer_alloc(t->dev, &d, &p->bufs[b]) != ACCEL_OK ||
        accel_buffer_host_pointer(p->bufs[b], &p->host[b]) != ACCEL_OK) {
      fprintf(stderr, "accel-tune: %s\n", accel_last_error());
      prepared_free(p, b + 1);
      return false;
    }
    p->lb[b] = (accel_launch_binding_t){.buffer = p->bufs[b]};
  }
  fill(j, p->host);
  return true;
}

// The constants and grid of configuration |c| (all zero: the default).
static void apply_config(const accel_kernel_info_t *ki, const job_t *j,
                         const config_t *c, uint8_t *constants,
                         uint32_t *groups) {
  memcpy(constants, j->constants, j->constants_size);
  *groups = (uint32_t)(j->units == 0 ? 1 : j->units > 256 ? 256 : j->units);
  for (uint32_t i = 0; i < ki->tunable_count; ++i) {
    if (c->values[i] == 0) {
      continue;
    }
    if (ki->tunables[i].kind == ACCEL_KERNEL_TUNABLE_WORKGROUPS) {
      *groups = c->values[i];
    } else {
      memcpy(constants + ki->tunables[i].constants_offset, &c->values[i], 4);
    }
  }
}

// Runs |reps| launches of configuration |c| and waits; returns ns, or 0 on
// failure.
static uint64_t run_batch(tuner_t *t, const accel_kernel_info_t *ki,
                          const job_t *j, prepared_t *p, const config_t *c,
                          int reps) {
  uint8_t constants[64];
  uint32_t groups;
  apply_config(ki, j, c, constants, &groups);
  accel_launch_desc_t desc = {.struct_size = sizeof(desc),
                              .workgroup_count = {groups, 1, 1},
                              .binding_count = j->binding_count,
                              .bindings = p->lb,
                              .constants_size = j->constants_size,
                              .constants = constants};
  uint64_t t0 = now_ns();
  for (int r = 0; r < reps; ++r) {
    if (accel_launch(t->stream, p->kernel, &desc) != ACCEL_OK) {
      return 0;
    }
  }
  if (accel_stream_synchronize(t->stream, ACCEL_TIMEOUT_INFINITE) !=
      ACCEL_OK) {
    return 0;
  }
  uint64_t dt = now_ns() - t0;
  return dt ? dt : 1;
}

// Interleaved pairs of (default, |c|): writes per-pair ratios; false on a
// failed launch.
static bool measure_pairs(tuner_t *t, const accel_kernel_info_t *ki,
                          const job_t *j, prepared_t *p, const config_t *c,
                          int reps, int pairs, double *ratios) {
  static const config_t def;
  for (int i = 0; i < pairs; ++i) {
    uint64_t a = run_batch(t, ki, j, p, &def, reps);
    uint64_t b = run_batch(t, ki, j, p, c, reps);
    if (a == 0 || b == 0) {
      return false;
    }
    ratios[i] = (double)b / (double)a;
  }
  return true;
}

static int describe(const accel_kernel_info_t *ki, const config_t *c,
                    bool json, char *out, size_t size) {
  int used = 0;
  out[0] = '\0';
  for (uint32_t i = 0; i < ki->tunable_count; ++i) {
    if (c->values[i] == 0) {
      continue;
    }
    used += snprintf(out + used, size - (size_t)used,
                     json ? "%s\"%s\": %u" : "%s%s=%u",
                     used ? (json ? ", " : ",") : "", ki->tunables[i].name,
                     c->values[i]);
  }
  if (!json && used == 0) {
    snprintf(out, size, "default");
  }
  return used;
}

// Enumerates every configuration (each tunable at each declared value).
static uint32_t enumerate(const accel_kernel_info_t *ki, config_t *out) {
  uint32_t idx[ACCEL_KERNEL_MAX_TUNABLES] = {0}, n = 0;
  for (;;) {
    if (n == MAX_CONFIGS) {
      return n;
    }
    memset(&out[n], 0, sizeof(out[n]));
    for (uint32_t i = 0; i < ki->tunable_count; ++i) {
      out[n].values[i] = ki->tunables[i].values[idx[i]];
    }
    ++n;
    uint32_t i = 0;
    while (i < ki->tunable_count && ++idx[i] == ki->tunables[i].value_count) {
      idx[i++] = 0;
    }
    if (i == ki->tunable_count) {
      return n;
    }
  }
}

static bool tune_job(tuner_t *t, const job_t *j, result_t *r) {
  memset(r, 0, sizeof(*r));
  prepared_t p;
  if (!prepare(t, j, &p)) {
    return false;
  }
  accel_kernel_info_t ki = {.struct_size = sizeof(ki)};
  accel_kernel_info(p.kernel, &ki);
  static config_t configs[MAX_CONFIGS];
  r->configs = ki.tunable_count ? enumerate(&ki, configs) : 0;
  static const config_t def;
  // Batch size: enough launches for about 2 ms per sample.
  uint64_t one = run_batch(t, &ki, j, &p, &def, 1);
  one = run_batch(t, &ki, j, &p, &def, 1);  // warm
  int reps = one == 0 ? 1 : (int)(2000000 / one);
  reps = reps < 1 ? 1 : reps > 2000 ? 2000 : reps;
  if (t->quick) {
    reps = reps > 4 ? 4 : reps;
  }
  uint64_t out_bytes = j->bytes[j->out];
  uint8_t *want = malloc(out_bytes);
  memcpy(want, p.host[j->out], out_bytes);
  double ratios[CONFIRM_PAIRS], scratch[CONFIRM_PAIRS];
  double best = 1.0;
  int best_i = -1;
  int screen = t->quick ? 2 : SCREEN_PAIRS;
  bool ok = one != 0;
  for (uint32_t c = 0; ok && c < r->configs; ++c) {
    memset(p.host[j->out], 0xff, out_bytes);
    ok = run_batch(t, &ki, j, &p, &configs[c], 1) != 0;
    if (ok && memcmp(p.host[j->out], want, out_bytes) != 0) {
      char what[128];
      describe(&ki, &configs[c], false, what, sizeof(what));
      fprintf(stderr, "accel-tune: %s %s: %s gives other bytes than the "
              "default; refused\n", j->kernel, j->shape, what);
      ++r->differing;
      continue;
    }
    ok = ok && measure_pairs(t, &ki, j, &p, &configs[c], reps, screen, ratios);
    double m = ok ? bench_stats_median(ratios, screen, scratch) : 1.0;
    if (ok && m < best) {
      best = m;
      best_i = (int)c;
    }
  }
  if (ok && best_i >= 0) {
    int pairs = t->quick ? 5 : CONFIRM_PAIRS;
    ok = measure_pairs(t, &ki, j, &p, &configs[best_i], reps, pairs, ratios);
    if (ok) {
      r->ratio = bench_stats_median(ratios, pairs, scratch);
      bench_stats_bootstrap_median(ratios, pairs, 2000, 0.95,
                                   bench_stats_seed(j->kernel), &r->lo, &r->hi);
      r->pairs = pairs;
      r->best = configs[best_i];
      r->found = bench_verdict_of("< 1", r->lo, r->hi) == BENCH_VERDICT_MET;
    }
  }
  if (!ok) {
    fprintf(stderr, "accel-tune: %s %s: a launch failed: %s\n", j->kernel,
            j->shape, accel_last_error());
  }
  free(want);
  prepared_free(&p, j->binding_count);
  return ok;
}

static bool store(tuner_t *t, const char *path, const job_t *j,
                  const result_t *r) {
  accel_kernel_t *k = NULL;
  accel_executable_kernel(t->exe, j->kernel, &k);
  accel_kernel_info_t ki = {.struct_size = sizeof(ki)};
  accel_kernel_info(k, &ki);
  accel_tuning_cache_t cache;
  accel_tuning_entry_t e;
  if (accel_tuning_cache_read(path, &cache) != ACCEL_OK) {
    fprintf(stderr, "accel-tune: %s (starting a new cache)\n",
            accel_last_error());
    accel_tuning_cache_fini(&cache);
  }
  bool ok = accel_tuning_key(t->fingerprint, j->kernel, k->meta, j->constants,
                             j->constants_size, &e) == ACCEL_OK;
  for (uint32_t i = 0; ok && i < ki.tunable_count; ++i) {
    snprintf(e.names[e.value_count], sizeof(e.names[0]), "%s",
             ki.tunables[i].name);
    e.values[e.value_count++] = r->best.values[i];
  }
  e.ratio = r->ratio;
  ok = ok && accel_tuning_cache_put(&cache, &e) == ACCEL_OK &&
       accel_tuning_cache_write(path, &cache) == ACCEL_OK;
  if (!ok) {
    fprintf(stderr, "accel-tune: %s\n", accel_last_error());
  }
  accel_tuning_cache_fini(&cache);
  return ok;
}

static void print_result(tuner_t *t, const job_t *j, const result_t *r,
                         bool json, bool first) {
  accel_kernel_t *k = NULL;
  accel_executable_kernel(t->exe, j->kernel, &k);
  accel_kernel_info_t ki = {.struct_size = sizeof(ki)};
  accel_kernel_info(k, &ki);
  char best[256];
  describe(&ki, &r->best, json, best, sizeof(best));
  const char *verdict = r->pairs == 0 ? "none"
                        : r->found   ? "met"
                                     : bench_verdict_name(bench_verdict_of(
                                           "< 1", r->lo, r->hi));
  if (json) {
    printf("%s\n    {\"kernel\": \"%s\", \"shape\": \"%s\", \"configs\": %u, "
           "\"differing\": %u, \"best\": {%s}, \"ratio\": %.4f, "
           "\"ci_low\": %.4f, \"ci_high\": %.4f, \"pairs\": %d, "
           "\"target\": \"< 1\", \"verdict\": \"%s\", \"stored\": %s}",
           first ? "" : ",", j->kernel, j->shape, r->configs, r->differing,
           r->pairs ? best : "", r->pairs ? r->ratio : 1.0,
           r->pairs ? r->lo : 1.0, r->pairs ? r->hi : 1.0, r->pairs, verdict,
           r->stored ? "true" : "false");
    return;
  }
  printf("%-24s %-20s %4u configs  best %-24s %6.3fx [%5.3f, %5.3f] %2d "
         "pairs  %-12s %s\n",
         j->kernel, j->shape, r->configs, r->pairs ? best : "default",
         r->pairs ? r->ratio : 1.0, r->pairs ? r->lo : 1.0,
         r->pairs ? r->hi : 1.0, r->pairs, verdict,
         r->stored ? "stored" : "not stored");
}

// The reference set at the decoder's shapes (examples/decoder_model.h:
// dim 1024, 16 heads of 64 over 4 KV heads, ffn 2816, vocab 8192, blocks
// of 16): the int8 projections at decode (m = 1), the logits matmul, paged
// decode attention over 256 positions and a 64-token prefill chunk.
static const struct {
  const char *kernel, *shape;
} k_decoder_set[] = {
    {"qmatmul_int8", "1,1024,1024"},  {"qmatmul_int8", "1,256,1024"},
    {"qmatmul_int8", "1,2816,1024"},  {"qmatmul_int8", "1,1024,2816"},
    {"matmul", "1,8192,1024"},        {"matmul", "64,1024,1024"},
    {"attention_paged_decode", "1,256,16,4,64,16"},
    {"attention_decode", "4,256,16,4,64"},
    {"attention_prefill", "64,64,16,4,64"},
};

static int open_tuner(tuner_t *t, const char *axe) {
  accel_runtime_options_t o;
  accel_runtime_options_init(&o);
  // The baseline is the default configuration: never the cache's.
  o.flags = ACCEL_RUNTIME_FLAG_TUNING_OFF;
  if (accel_runtime_create(&o, &t->rt) != ACCEL_OK ||
      accel_device_get(t->rt, 0, &t->dev) != ACCEL_OK ||
      accel_executable_load_file(t->rt, t->dev, axe, 0, &t->exe) != ACCEL_OK ||
      accel_stream_create(t->dev, NULL, &t->stream) != ACCEL_OK) {
    fprintf(stderr, "accel-tune: %s (reference.axe: \"%s\"; --kernels or "
            "ACCEL_REFERENCE_AXE)\n", accel_last_error(), axe);
    return 1;
  }
  accel_tuning_fingerprint(t->dev, t->fingerprint);
  t->info.struct_size = sizeof(t->info);
  accel_device_info(t->dev, &t->info);
  return 0;
}

static void close_tuner(tuner_t *t) {
  accel_stream_destroy(t->stream);
  accel_executable_release(t->exe);
  accel_runtime_destroy(t->rt);
}

int main(int argc, char **argv) {
  accel_tool_args_t a;
  int rc = accel_tool_parse(&k_spec, argc, argv, &a);
  if (rc != ACCEL_TOOL_CONTINUE) {
    return rc;
  }
  bool all = a.values[OPT_ALL] != NULL;
  if (all == (a.positional_count == 1) ||
      (!all && a.values[OPT_SHAPE] == NULL) ||
      (all && a.values[OPT_SHAPE] != NULL)) {
    return accel_tool_usage_error(&k_spec,
                                  "give KERNEL --shape DIMS, or --all");
  }
  static job_t jobs[16];
  uint32_t njobs = 0;
  if (all) {
    for (size_t i = 0; i < sizeof(k_decoder_set) / sizeof(k_decoder_set[0]);
         ++i) {
      make_job(k_decoder_set[i].kernel, k_decoder_set[i].shape,
               &jobs[njobs++]);
    }
  } else if (!make_job(a.positional[0], a.values[OPT_SHAPE], &jobs[njobs++])) {
    return ACCEL_TOOL_EXIT_USAGE;
  }
  char path[4096];
  if (a.values[OPT_CACHE] != NULL) {
    snprintf(path, sizeof(path), "%s", a.values[OPT_CACHE]);
  } else if (accel_tuning_cache_path(path, sizeof(path)) != ACCEL_OK) {
    fprintf(stderr, "accel-tune: %s (give --cache)\n", accel_last_error());
    return 1;
  }
  const char *axe = a.values[OPT_KERNELS];
  if (axe == NULL) {
    axe = getenv("ACCEL_REFERENCE_AXE");
  }
  if (axe == NULL) {
    axe = ACCEL_REFERENCE_AXE_PATH;
  }
  tuner_t t = {.quick = a.values[OPT_QUICK] != NULL};
  if (open_tuner(&t, axe) != 0) {
    return 1;
  }
  bool json = a.values[OPT_JSON] != NULL;
  if (json) {
    printf("{\"tool\": \"accel-tune\", \"device\": \"%s\", "
           "\"fingerprint\": \"%s\", \"cache\": ",
           t.info.id, t.fingerprint);
    accel_tool_print_json_string(path);
    printf(", \"results\": [");
  } else {
    printf("accel-tune on %s (%s; fingerprint %s), cache %s\n", t.info.id,
           t.info.name, t.fingerprint, path);
  }
  int status = 0;
  for (uint32_t i = 0; i < njobs; ++i) {
    result_t r;
    if (!tune_job(&t, &jobs[i], &r)) {
      status = 1;
      continue;
    }
    if (r.differing > 0) {
      status = 1;
    }
    if (r.found && a.values[OPT_DRY] == NULL) {
      r.stored = store(&t, path, &jobs[i], &r);
      status = r.stored ? status : 1;
    }
    print_result(&t, &jobs[i], &r, json, i == 0);
    fflush(stdout);
  }
  if (json) {
    printf("\n]}\n");
  }
  close_tuner(&t);
  return status;
}
