// Greedy generation on the serving engine is the same whatever the batch:
// gguf_run_test.py runs this on its random GGUF models (mapped).
//
//   gguf_batch MODEL REFERENCE_AXE
//
// Requests of different prompt lengths (seeded) are run each alone, then
// all submitted together (one engine, chunked prefill, the decode steps
// batched), then again in the reverse order; every request's generated
// tokens must be identical in the three runs. The logits they were sampled
// from are compared too: bit for bit with --exact-logits, else their
// largest difference is printed (the f16/bf16/f32 GEMM sums in an order
// that depends on the rows of the step, so their last bits may differ).
// Prints one line per request; exits 1 on a difference or an error.
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/accel.h"

enum { REQUESTS = 6, NEW_TOKENS = 6, MAX_PROMPT = 40 };

typedef struct run {
  int32_t tokens[NEW_TOKENS];
  float *logits;  // [NEW_TOKENS, vocab]
  uint32_t count, vocab;
} run_t;

static void on_token(void *user, const accel_serve_token_t *t) {
  run_t *r = user;
  if (r->count < NEW_TOKENS) {
    r->tokens[r->count] = t->token;
    memcpy(r->logits + (size_t)r->count * r->vocab, t->logits,
           sizeof(float) * r->vocab);
  }
  r->count++;
}

static int fail(accel_status_t st, const char *what) {
  fprintf(stderr, "gguf_batch: %s: %s: %s\n", what, accel_status_name(st),
          accel_last_error());
  return 1;
}

// Submits requests |order[0..n)| together and steps until all are done.
static int run_together(accel_serve_engine_t *e, int32_t (*prompts)[MAX_PROMPT],
                        const uint32_t *lens, const int *order, int n,
                        run_t *out) {
  uint64_t ids[REQUESTS];
  for (int i = 0; i < n; ++i) {
    int q = order[i];
    accel_serve_request_desc_t d = {
        .struct_size = sizeof(d), .prompt = prompts[q],
        .prompt_tokens = lens[q], .max_new_tokens = NEW_TOKENS,
        .eos_token = -1, .on_token = on_token, .user = &out[q]};
    d.sampling = (accel_sampling_params_t){
        .struct_size = sizeof(d.sampling), .top_p = 1.0f};
    accel_status_t st = accel_serve_submit(e, &d, &ids[i]);
    if (st != ACCEL_OK) return fail(st, "submit");
  }
  uint32_t pending = 1;
  while (pending > 0) {
    accel_status_t st = accel_serve_step(e, &pending);
    if (st != ACCEL_OK) return fail(st, "step");
  }
  for (int i = 0; i < n; ++i) accel_serve_release(e, ids[i]);
  return 0;
}

// KiB of |path|'s mappings resident in this process (/proc/self/smaps),
// -1 if it is not mapped.
static long mapped_rss_kib(const char *path) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return -1;
  char line[4096];
  long total = -1;
  bool ours = false;
  size_t n = strlen(path);
  while (fgets(line, sizeof(line), f) != NULL) {
    size_t len = strlen(line);
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
      ours = len >= n && strcmp(line + len - n, path) == 0;
      continue;
    }
    long kib;
    if (ours && sscanf(line, "Rss: %ld kB", &kib) == 1) {
      total = (total < 0 ? 0 : total) + kib;
    }
  }
  fclose(f);
  return total;
}

int main(int argc, char **argv) {
  bool exact = argc == 4 && strcmp(argv[3], "--exact-logits") == 0;
  // --resident: print the model file's resident KiB once the engine is
  // created (its weights populated, no step run) and exit.
  bool resident = argc == 4 && strcmp(argv[3], "--resident") == 0;
  if (argc != 3 && !exact && !resident) {
    fprintf(stderr, "usage: gguf_batch MODEL REFERENCE_AXE "
                    "[--exact-logits | --resident]\n");
    return 2;
  }
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  accel_serve_engine_t *e = NULL;
  accel_serve_engine_desc_t d = {.struct_size = sizeof(d),
                                 .flags = ACCEL_SERVE_CHUNKED_PREFILL,
                                 .model_path = argv[1],
                                 .kernels_path = argv[2],
                                 .max_step_tokens = 64,
                                 .max_step_seqs = REQUESTS,
                                 .max_context = MAX_PROMPT + NEW_TOKENS};
  accel_serve_model_info_t info = {.struct_size = sizeof(info)};
  accel_status_t st = accel_runtime_create(NULL, &rt);
  if (st == ACCEL_OK) st = accel_device_get(rt, 0, &dev);
  if (st == ACCEL_OK) st = accel_serve_engine_create(dev, &d, &e);
  if (st == ACCEL_OK) st = accel_serve_model_info(e, &info);
  if (st != ACCEL_OK) return fail(st, argv[1]);
  if (resident) {
    char real[4096];
    long kib = realpath(argv[1], real) ? mapped_rss_kib(real) : -1;
    printf("mapped_rss_kib %ld\n", kib);
    accel_serve_engine_destroy(e);
    accel_runtime_destroy(rt);
    return kib < 0;
  }
  int32_t prompts[REQUESTS][MAX_PROMPT];
  uint32_t lens[REQUESTS];
  uint64_t s = 0x9e3779b97f4a7c15ull;
  static run_t runs[3][REQUESTS];
  for (int q = 0; q < REQUESTS; ++q) {
    lens[q] = 1 + (uint32_t)(q * 7 % MAX_PROMPT);  // 1, 8, 15, 22, 29, 36
    for (uint32_t i = 0; i < lens[q]; ++i) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      prompts[q][i] = (int32_t)((s >> 33) % info.vocab);
    }
    for (int k = 0; k < 3; ++k) {
      runs[k][q].vocab = info.vocab;
      runs[k][q].logits = calloc((size_t)NEW_TOKENS * info.vocab,
                                 sizeof(float));
    }
  }
  int rc = 0;
  for (int q = 0; q < REQUESTS && rc == 0; ++q) {
    rc = run_together(e, prompts, lens, &q, 1, runs[0]);
  }
  const int forward[REQUESTS] = {0, 1, 2, 3, 4, 5};
  const int reverse[REQUESTS] = {5, 4, 3, 2, 1, 0};
  if (rc == 0) rc = run_together(e, prompts, lens, forward, REQUESTS, runs[1]);
  if (rc == 0) rc = run_together(e, prompts, lens, reverse, REQUESTS, runs[2]);
  for (int q = 0; q < REQUESTS && rc == 0; ++q) {
    double worst = 0;
    for (int k = 1; k < 3; ++k) {
      const char *order = k == 1 ? "forward" : "reverse";
      if (runs[k][q].count != NEW_TOKENS || runs[0][q].count != NEW_TOKENS ||
          memcmp(runs[k][q].tokens, runs[0][q].tokens,
                 sizeof(runs[0][q].tokens)) != 0) {
        fprintf(stderr,
                "gguf_batch: request %d (prompt %u tokens): generated tokens "
                "differ batched (%s order) from alone\n",
                q, lens[q], order);
        rc = 1;
      }
      for (size_t i = 0; i < (size_t)NEW_TOKENS * info.vocab; ++i) {
        double diff = fabs((double)runs[k][q].logits[i] -
                           (double)runs[0][q].logits[i]);
        worst = diff > worst ? diff : worst;
      }
    }
    if (exact && worst != 0) {
      fprintf(stderr,
              "gguf_batch: request %d (prompt %u tokens): logits differ "
              "batched from alone by up to %.3g\n",
              q, lens[q], worst);
      rc = 1;
    }
    if (rc == 0) {
      printf("request %d: prompt %u, tokens", q, lens[q]);
      for (int t = 0; t < NEW_TOKENS; ++t) printf(" %d", runs[0][q].tokens[t]);
      printf(": identical alone and in both batches; logits max |diff| %.3g\n",
             worst);
    }
  }
  for (int q = 0; q < REQUESTS; ++q) {
    for (int k = 0; k < 3; ++k) free(runs[k][q].logits);
  }
  accel_serve_engine_destroy(e);
  accel_runtime_destroy(rt);
  return rc;
}
