// accel-bench llm --model FILE [--json] [--quick]: a model the user has (a
// .gguf, run mapped, or a decoder .axe) on the serving engine, as
// accel-run and accel-serve run it: prefill and decode tokens per second at
// batch 1 and batch 8 (issue #24 item 5).
//
// Each run submits |batch| requests of random prompts (seeded per run, so
// that no prefix is cached) of 128 tokens (32 with --quick) with 64 tokens
// to generate (16), greedy, then steps the engine until they are done.
// Prefill: batch x prompt tokens over the time from the submit to the last
// request's first token (the prompts are prefilled in one step); decode: the
// other batch x (generate - 1) tokens over the time after that. Figures are
// medians over the runs, with no baseline of their own. When llama.cpp is
// installed (scripts/llamacpp.sh; ACCEL_LLAMACPP_PYTHON), its batch-1
// prefill and decode on the same file, threads, prompt and decode count
// (bench/llamacpp_driver.py, a subprocess) are measured interleaved with
// accel's and reported as paired ratios (llm_*_batch1_vs_llamacpp, targets
// >= 0.8 prefill and >= 1.0 decode).
//
// Loading and memory (docs/gguf.md, "Running a .gguf mapped"):
//  - llm_load: the engine's creation (model and kernels loaded, every weight
//    page resident, the KV cache and activations allocated) against reading
//    the file with read() through a 1 MiB buffer, as `cat f > /dev/null`
//    does, both with the file in the page cache, interleaved. Target <= 1.5.
//  - llm_resident_peak: VmHWM of this process (/proc/self/status) after the
//    first engine's creation and one batch-1 request of prompt + generate
//    tokens, against the file's size plus the KV cache that request holds
//    (its blocks times the engine's block bytes). Measured first, before
//    any other run raises the peak. One number (exact). Target <= 1.1.
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/accel.h"
#include "bench.h"

#ifndef ACCEL_REFERENCE_AXE_PATH
#define ACCEL_REFERENCE_AXE_PATH ""
#endif
#ifndef ACCEL_LLAMACPP_DRIVER_PATH
#define ACCEL_LLAMACPP_DRIVER_PATH ""
#endif

#define LLM_MAX_BATCH 8

// The read baseline's buffer, as cat's.
#define LLM_READ_CHUNK (1u << 20)

typedef struct llm_bench {
  const char *model, *kernels;
  accel_device_t *dev;
  accel_serve_model_info_t info;
  uint8_t *read_buf;  // LLM_READ_CHUNK bytes
  // llama.cpp's python (ACCEL_LLAMACPP_PYTHON or scripts/llamacpp.sh's
  // venv) and bench/llamacpp_driver.py; python[0] 0: not measured.
  char python[512], driver[512];
  uint32_t threads;
  accel_serve_engine_t *engine;
  // The KV cache the engines get: LLM_MAX_BATCH sequences of prompt +
  // generate tokens (0: the engine's default, for the probe).
  uint64_t kv_bytes;
  uint32_t vocab, prompt, generate;
  uint64_t seed;
  // Per request of the run: when its first token came, and tokens so far.
  uint64_t first_ns[LLM_MAX_BATCH];
  uint32_t tokens[LLM_MAX_BATCH];
} llm_bench_t;

typedef struct llm_slot {
  llm_bench_t *b;
  int index;
} llm_slot_t;

static void on_token(void *user, const accel_serve_token_t *t) {
  llm_slot_t *s = user;
  if (s->b->tokens[s->index]++ == 0) {
    s->b->first_ns[s->index] = bench_now_ns();
  }
  (void)t;
}

// One batch: *prefill_tps and *decode_tps.
static int run_batch(llm_bench_t *b, int batch, double *prefill_tps,
                     double *decode_tps) {
  int32_t *prompts = malloc(sizeof(int32_t) * b->prompt * (size_t)batch);
  if (prompts == NULL) return 1;
  // splitmix-style stream of ids: a different prompt per request and run.
  for (uint64_t i = 0; i < (uint64_t)b->prompt * (uint64_t)batch; ++i) {
    uint64_t z = (b->seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    prompts[i] = (int32_t)((z ^ (z >> 31)) % b->vocab);
  }
  llm_slot_t slots[LLM_MAX_BATCH];
  uint64_t ids[LLM_MAX_BATCH] = {0};
  memset(b->tokens, 0, sizeof(b->tokens));
  uint64_t t0 = bench_now_ns();
  accel_status_t st = ACCEL_OK;
  int submitted = 0;
  for (int r = 0; r < batch && st == ACCEL_OK; ++r) {
    slots[r] = (llm_slot_t){.b = b, .index = r};
    accel_serve_request_desc_t d = {
        .struct_size = sizeof(d),
        .prompt = prompts + (size_t)r * b->prompt,
        .prompt_tokens = b->prompt,
        .max_new_tokens = b->generate,
        .eos_token = -1,
        .sampling = {.struct_size = sizeof(accel_sampling_params_t),
                     .top_p = 1.0f},
        .on_token = on_token,
        .user = &slots[r]};
    st = accel_serve_submit(b->engine, &d, &ids[r]);
    if (st == ACCEL_OK) submitted++;
  }
  uint32_t pending = 1;
  while (st == ACCEL_OK && pending != 0) {
    st = accel_serve_step(b->engine, &pending);
  }
  uint64_t t1 = bench_now_ns();
  for (int r = 0; r < submitted; ++r) accel_serve_release(b->engine, ids[r]);
  free(prompts);
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-bench llm: %s: %s\n", accel_status_name(st),
            accel_last_error());
    return 1;
  }
  uint64_t first = 0;
  for (int r = 0; r < batch; ++r) {
    if (b->first_ns[r] > first) first = b->first_ns[r];
  }
  *prefill_tps = (double)b->prompt * batch / ((double)(first - t0) * 1e-9);
  *decode_tps = t1 > first ? (double)(b->generate - 1) * batch /
                                 ((double)(t1 - first) * 1e-9)
                           : 0;
  return 0;
}

// Slots: prefill and decode tok/s at batch 1, then at batch 8.
static int measure(void *ctx, int run, double *out) {
  (void)run;
  llm_bench_t *b = ctx;
  if (run_batch(b, 1, &out[0], &out[1]) != 0) return 1;
  return run_batch(b, LLM_MAX_BATCH, &out[2], &out[3]);
}

static const bench_figure_t k_figures[] = {
    {.name = "llm_prefill_batch1", .unit = "tok/s", .value_slot = 0},
    {.name = "llm_decode_batch1", .unit = "tok/s", .value_slot = 1},
    {.name = "llm_prefill_batch8", .unit = "tok/s", .value_slot = 2},
    {.name = "llm_decode_batch8", .unit = "tok/s", .value_slot = 3},
};

// The engine as accel-run builds it, sized for batches of LLM_MAX_BATCH: a
// KV cache of what LLM_MAX_BATCH requests hold (as llama.cpp's n_ctx holds
// one request's tokens), not a fixed budget: the host device maps a pool's
// pages when it is created, so a 512 MiB budget cost 50 ms of mmap calls
// per load that no request used.
static accel_status_t engine_create(const llm_bench_t *b,
                                    accel_serve_engine_t **out) {
  accel_serve_engine_desc_t d = {
      .struct_size = sizeof(d),
      .flags = ACCEL_SERVE_CHUNKED_PREFILL,
      .model_path = b->model,
      .kernels_path = b->kernels,
      .kv_bytes = b->kv_bytes,
      .max_step_tokens = LLM_MAX_BATCH * b->prompt,
      .max_step_seqs = LLM_MAX_BATCH,
      .max_context = b->prompt + b->generate};
  return accel_serve_engine_create(b->dev, &d, out);
}

// Reads |path| with read() through a 1 MiB buffer (`cat f > /dev/null`);
// returns ns, 0 on error.
static uint64_t read_file_ns(const char *path, uint8_t *buf) {
  uint64_t t0 = bench_now_ns();
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return 0;
  }
  ssize_t n;
  while ((n = read(fd, buf, LLM_READ_CHUNK)) > 0) {
  }
  close(fd);
  return n == 0 ? bench_now_ns() - t0 : 0;
}

// One /proc/self/status field in bytes ("VmHWM"), 0 if absent.
static uint64_t status_bytes(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) {
    return 0;
  }
  char line[256];
  size_t len = strlen(field);
  unsigned long long kib = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, field, len) == 0 && line[len] == ':') {
      kib = strtoull(line + len + 1, NULL, 10);
      break;
    }
  }
  fclose(f);
  return (uint64_t)kib << 10;
}

// Slots: the read's ns, then the engine's creation ns.
static int measure_load(void *ctx, int run, double *out) {
  (void)run;
  llm_bench_t *b = ctx;
  uint64_t read_ns = read_file_ns(b->model, b->read_buf);
  uint64_t t0 = bench_now_ns();
  accel_serve_engine_t *e = NULL;
  accel_status_t st = engine_create(b, &e);
  uint64_t t1 = bench_now_ns();
  accel_serve_engine_destroy(e);
  if (st != ACCEL_OK || read_ns == 0) {
    fprintf(stderr, "accel-bench llm: load of %s: %s: %s\n", b->model,
            accel_status_name(st),
            st != ACCEL_OK ? accel_last_error() : "the read failed");
    return 1;
  }
  out[0] = (double)read_ns * 1e-6;
  out[1] = (double)(t1 - t0) * 1e-6;
  return 0;
}

static const bench_figure_t k_load_figures[] = {
    {.name = "llm_load", .unit = "ms", .value_slot = 1,
     .baseline_name = "file_read_page_cache", .baseline_slot = 0,
     .target = "<= 1.5"},
};

// The resident-memory figure: the first engine's peak after one batch-1
// request, against the file plus that request's KV blocks.
static int add_resident(bench_report_t *report, llm_bench_t *b) {
  double prefill = 0, decode = 0;
  if (run_batch(b, 1, &prefill, &decode) != 0) {
    return 1;
  }
  uint64_t hwm = status_bytes("VmHWM");
  struct stat sb;
  if (hwm == 0 || stat(b->model, &sb) != 0) {
    fprintf(stderr, "accel-bench llm: cannot read VmHWM or stat %s\n",
            b->model);
    return 1;
  }
  uint64_t tokens = (uint64_t)b->prompt + b->generate;
  uint64_t blocks = (tokens + b->info.block_tokens - 1) / b->info.block_tokens;
  double kv = (double)(blocks * b->info.block_bytes);
  const double mib = 1.0 / (1 << 20);
  bench_add(report, "llm_resident_peak", (double)hwm * mib, "MiB",
            "file_plus_kv_cache", ((double)sb.st_size + kv) * mib, "<= 1.1",
            1);
  return 0;
}

// llama.cpp through llama-cpp-python: ACCEL_LLAMACPP_PYTHON, else the
// venv scripts/llamacpp.sh makes (ACCEL_LLAMACPP_VENV or
// ~/.cache/accel/llamacpp-venv). False when there is none.
static bool find_llamacpp(llm_bench_t *b) {
  const char *py = getenv("ACCEL_LLAMACPP_PYTHON");
  const char *venv = getenv("ACCEL_LLAMACPP_VENV");
  const char *home = getenv("HOME");
  if (py != NULL && py[0] != '\0') {
    snprintf(b->python, sizeof(b->python), "%s", py);
  } else if (venv != NULL && venv[0] != '\0') {
    snprintf(b->python, sizeof(b->python), "%s/bin/python", venv);
  } else if (home != NULL) {
    snprintf(b->python, sizeof(b->python),
             "%s/.cache/accel/llamacpp-venv/bin/python", home);
  }
  const char *driver = getenv("ACCEL_LLAMACPP_DRIVER");
  snprintf(b->driver, sizeof(b->driver), "%s",
           driver != NULL && driver[0] != '\0' ? driver
                                               : ACCEL_LLAMACPP_DRIVER_PATH);
  bool ok = b->python[0] != '\0' && access(b->python, X_OK) == 0 &&
            access(b->driver, R_OK) == 0 &&
            strchr(b->python, '\'') == NULL &&
            strchr(b->driver, '\'') == NULL && strchr(b->model, '\'') == NULL;
  if (!ok) b->python[0] = '\0';
  return ok;
}

// One llama.cpp run (llamacpp_driver.py): its batch-1 prefill and decode
// tokens per second. Nonzero (after printing why) on failure.
static int run_llamacpp(llm_bench_t *b, double *prefill_tps,
                        double *decode_tps) {
  char cmd[2048];
  snprintf(cmd, sizeof(cmd), "'%s' '%s' '%s' %u %u %u %llu", b->python,
           b->driver, b->model, b->threads, b->prompt, b->generate,
           (unsigned long long)(b->seed += 1));
  FILE *p = popen(cmd, "r");
  if (p == NULL) {
    fprintf(stderr, "accel-bench llm: cannot run %s\n", b->driver);
    return 1;
  }
  char out[1024] = "";
  size_t n = fread(out, 1, sizeof(out) - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  const char *pf = strstr(out, "\"prefill_tok_s\": ");
  const char *dc = strstr(out, "\"decode_tok_s\": ");
  if (status != 0 || pf == NULL || dc == NULL) {
    fprintf(stderr, "accel-bench llm: llama.cpp run failed (exit %d): %s\n",
            status, out);
    return 1;
  }
  *prefill_tps = strtod(pf + strlen("\"prefill_tok_s\": "), NULL);
  *decode_tps = strtod(dc + strlen("\"decode_tok_s\": "), NULL);
  return 0;
}

// Slots: accel's batch-1 prefill and decode, then llama.cpp's; the order
// alternates per run, so that drift in the machine's speed falls on both.
static int measure_vs_llamacpp(void *ctx, int run, double *out) {
  llm_bench_t *b = ctx;
  if (run % 2 == 0) {
    if (run_batch(b, 1, &out[0], &out[1]) != 0) return 1;
    return run_llamacpp(b, &out[2], &out[3]);
  }
  if (run_llamacpp(b, &out[2], &out[3]) != 0) return 1;
  return run_batch(b, 1, &out[0], &out[1]);
}

static const bench_figure_t k_llamacpp_figures[] = {
    {.name = "llm_prefill_batch1_vs_llamacpp", .unit = "tok/s",
     .value_slot = 0, .baseline_name = "llamacpp_prefill_batch1",
     .baseline_slot = 2, .target = ">= 0.8"},
    {.name = "llm_decode_batch1_vs_llamacpp", .unit = "tok/s",
     .value_slot = 1, .baseline_name = "llamacpp_decode_batch1",
     .baseline_slot = 3, .target = ">= 1.0"},
};

int accel_bench_llm(const bench_args_t *args) {
  const char *model = NULL;
  for (int i = 0; i + 1 < args->argc; ++i) {
    if (strcmp(args->argv[i], "--model") == 0) model = args->argv[i + 1];
  }
  if (model == NULL) {
    fprintf(stderr, "accel-bench llm: --model FILE (.gguf or .axe) is "
            "required\n");
    return 2;
  }
  const char *ref = getenv("ACCEL_REFERENCE_AXE");
  static llm_bench_t b;
  b.model = model;
  b.kernels = ref != NULL && ref[0] != '\0' ? ref : ACCEL_REFERENCE_AXE_PATH;
  b.prompt = args->quick ? 32 : 128;
  b.generate = args->quick ? 16 : 64;
  b.seed = 1;
  b.info.struct_size = sizeof(b.info);
  b.read_buf = malloc(LLM_READ_CHUNK);
  accel_runtime_t *rt = NULL;
  // The file in the page cache before anything is measured.
  if (b.read_buf == NULL || read_file_ns(model, b.read_buf) == 0) {
    fprintf(stderr, "accel-bench llm: cannot read %s\n", model);
    free(b.read_buf);
    return 1;
  }
  accel_status_t st = accel_runtime_create(NULL, &rt);
  if (st == ACCEL_OK) st = accel_device_get(rt, 0, &b.dev);
  // A probe engine of the default KV budget gives the block size; the
  // measured engines then hold LLM_MAX_BATCH requests' blocks (one spare
  // each for the block a chunk boundary splits).
  if (st == ACCEL_OK) st = engine_create(&b, &b.engine);
  if (st == ACCEL_OK) st = accel_serve_model_info(b.engine, &b.info);
  if (st == ACCEL_OK) {
    accel_serve_engine_destroy(b.engine);
    b.engine = NULL;
    uint64_t per_seq = (b.prompt + b.generate + b.info.block_tokens - 1) /
                           b.info.block_tokens + 1;
    b.kv_bytes = LLM_MAX_BATCH * per_seq * b.info.block_bytes;
    st = engine_create(&b, &b.engine);
  }
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-bench llm: %s: %s: %s\n", model,
            accel_status_name(st), accel_last_error());
    accel_serve_engine_destroy(b.engine);
    accel_runtime_destroy(rt);
    free(b.read_buf);
    return 1;
  }
  b.vocab = b.info.vocab;
  bench_report_t report;
  bench_report_init(&report, "llm", b.dev);
  int rc = add_resident(&report, &b);
  bench_group_t load = {.runs = args->quick ? 2 : 5,
                        .slots = 2,
                        .measure = measure_load,
                        .figures = k_load_figures,
                        .figure_count = 1,
                        .max_runs = 20};
  if (rc == 0) rc = bench_group_run(&report, &load, &b);
  bench_group_t g = {.runs = args->quick ? 1 : 3,
                     .slots = 4,
                     .measure = measure,
                     .figures = k_figures,
                     .figure_count = sizeof(k_figures) / sizeof(k_figures[0]),
                     .max_runs = 10};
  if (rc == 0) rc = bench_group_run(&report, &g, &b);
  bool llamacpp = rc == 0 && find_llamacpp(&b);
  if (llamacpp) {
    const char *t = getenv("ACCEL_HOST_THREADS");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    b.threads = t != NULL && atoi(t) > 0 ? (uint32_t)atoi(t)
                                         : cpus > 0 ? (uint32_t)cpus : 1;
    // One probe run: a file llama.cpp cannot load (no vocabulary) leaves
    // its figures out instead of failing the others.
    double p0, p1;
    llamacpp = run_llamacpp(&b, &p0, &p1) == 0;
    if (!llamacpp) {
      fprintf(stderr, "accel-bench llm: llama.cpp not measured\n");
    }
  }
  if (llamacpp) {
    bench_group_t vs = {.runs = args->quick ? 2 : 5,
                        .slots = 4,
                        .measure = measure_vs_llamacpp,
                        .figures = k_llamacpp_figures,
                        .figure_count = 2,
                        .max_runs = 10};
    rc = bench_group_run(&report, &vs, &b);
  } else if (rc == 0 && !args->json) {
    printf("llama.cpp not measured: no ACCEL_LLAMACPP_PYTHON and no venv "
           "from scripts/llamacpp.sh\n");
  }
  if (rc == 0) rc = bench_print(&report, args->json);
  accel_serve_engine_destroy(b.engine);
  accel_runtime_destroy(rt);
  free(b.read_buf);
  return rc;
}
