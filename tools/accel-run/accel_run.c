// accel-run: runs a decoder model (.gguf, run mapped, or .axe) on the
// serving engine (lib/serve; the same engine as accel-serve, one request at
// a time):
//   --tokenize          the ids the model is fed for --prompt, as JSON
//   --generate N        greedy decoding of N tokens after the prompt
//   --logits OUT.npy    the f32 logits of every prompt position,
//                       (positions, vocabulary)
// The prompt is --prompt TEXT (tokenized by the .gguf's own vocabulary; BOS
// and EOS by the file's flags) or --tokens ID,ID,...
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/accel.h"
#include "tool_cli.h"

static const accel_tool_option_t k_options[] = {
    {"--model", "FILE", 0, "the model: a .gguf (llama, qwen2) or a decoder .axe"},
    {"--prompt", "TEXT", 1, "the prompt, tokenized by the .gguf's vocabulary"},
    {"--tokens", "ID,...", 1, "the prompt as token ids"},
    {"--tokenize", NULL, 0,
     "print the ids of --prompt as a JSON array and exit"},
    {"--generate", "N", 0,
     "tokens to generate greedily (default 16; 0 with --logits only)"},
    {"--logits", "OUT.npy", 0,
     "write the f32 logits of every prompt position, (positions, vocab)"},
    {"--threads", "N", 0,
     "host-device threads (ACCEL_HOST_THREADS); results do not depend on it"},
    {"--device", "NAME", 0, "the device id to run on (default: device 0)"},
    {"--kernels", "FILE", 0,
     "reference.axe, the kernels (default: the installed one)"},
    {"--json", NULL, 0,
     "print prompt_tokens, generated, text, prefill_tok_s, decode_tok_s"},
    {"--f32-activations", NULL, 0,
     "keep quantized projections' activations in f32 (exact, slower)"},
};
enum { OPT_MODEL, OPT_PROMPT, OPT_TOKENS, OPT_TOKENIZE, OPT_GENERATE,
       OPT_LOGITS, OPT_THREADS, OPT_DEVICE, OPT_KERNELS, OPT_JSON,
       OPT_F32_ACTIVATIONS };

static const accel_tool_spec_t k_spec = {
    .name = "accel-run",
    .synopsis = "--model FILE (--prompt TEXT | --tokens ID,...) [--generate N] "
                "[--logits OUT.npy] [--threads N] [--device NAME] [--json] "
                "[--f32-activations] | "
                "--model FILE.gguf --tokenize --prompt TEXT",
    .description = "Runs a decoder model (.gguf or .axe) on the serving "
                   "engine: greedy generation, the logits of a prompt, or "
                   "the token ids of a prompt.",
    .options = k_options,
    .option_count = sizeof(k_options) / sizeof(k_options[0]),
    .min_positional = 0,
    .max_positional = 0,
};

#ifndef ACCEL_RUN_DEFAULT_KERNELS
#define ACCEL_RUN_DEFAULT_KERNELS "reference.axe"
#endif

// The run's state: the prompt, what the token callback records.
typedef struct run {
  int32_t *prompt;
  size_t prompt_count;
  uint32_t vocab;
  // Generation: the ids and when each arrived.
  int32_t *generated;
  double *at;
  uint32_t count;
  // Logits: row |row| of |logits| is the prompt prefix's last position.
  float *logits;
} run_t;

typedef struct logits_slot {
  run_t *run;
  uint32_t row;
} logits_slot_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool parse_u32(const char *s, uint32_t max, uint32_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*s < '0' || *s > '9' || *end != '\0' || errno != 0 || v > max) {
    return false;
  }
  *out = (uint32_t)v;
  return true;
}

static int parse_tokens(const char *s, run_t *r) {
  size_t n = 1;
  for (const char *p = s; *p; ++p) n += *p == ',';
  r->prompt = malloc(n * sizeof(int32_t));
  if (r->prompt == NULL) return -1;
  const char *p = s;
  for (size_t i = 0; i < n; ++i) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno != 0 || v < 0 || v > INT32_MAX ||
        (*end != ',' && *end != '\0')) {
      return -1;
    }
    r->prompt[i] = (int32_t)v;
    p = end + (*end == ',');
  }
  r->prompt_count = n;
  return 0;
}

static void on_generated(void *user, const accel_serve_token_t *t) {
  run_t *r = user;
  r->at[r->count] = now_s();
  r->generated[r->count++] = t->token;
}

static void on_logits(void *user, const accel_serve_token_t *t) {
  logits_slot_t *s = user;
  memcpy(s->run->logits + (uint64_t)s->row * s->run->vocab, t->logits,
         (uint64_t)s->run->vocab * sizeof(float));
}

// Steps |engine| until nothing is pending.
static accel_status_t drain(accel_serve_engine_t *engine) {
  uint32_t pending = 1;
  while (pending != 0) {
    ACCEL_RETURN_IF_ERROR(accel_serve_step(engine, &pending));
  }
  return ACCEL_OK;
}

static accel_status_t generate(accel_serve_engine_t *engine, run_t *r,
                               uint32_t n, int32_t eos, double *t0) {
  accel_serve_request_desc_t d = {.struct_size = sizeof(d),
                                  .prompt = r->prompt,
                                  .prompt_tokens = (uint32_t)r->prompt_count,
                                  .max_new_tokens = n,
                                  .eos_token = eos,
                                  .sampling = {.struct_size =
                                                   sizeof(accel_sampling_params_t),
                                               .top_p = 1.0f},
                                  .on_token = on_generated,
                                  .user = r};
  uint64_t id = 0;
  *t0 = now_s();
  ACCEL_RETURN_IF_ERROR(accel_serve_submit(engine, &d, &id));
  accel_status_t st = drain(engine);
  accel_serve_release(engine, id);
  return st;
}

// The logits of every prompt position: one single-token request per prefix,
// sharing the prompt's KV blocks through the engine's prefix cache.
static accel_status_t prompt_logits(accel_serve_engine_t *engine, run_t *r) {
  size_t n = r->prompt_count;
  logits_slot_t *slots = calloc(n, sizeof(*slots));
  uint64_t *ids = calloc(n, sizeof(*ids));
  r->logits = malloc((uint64_t)n * r->vocab * sizeof(float));
  if (slots == NULL || ids == NULL || r->logits == NULL) {
    free(slots);
    free(ids);
    fprintf(stderr, "accel-run: no memory for %zu x %u logits\n", n, r->vocab);
    return ACCEL_ERROR_OUT_OF_MEMORY;
  }
  accel_status_t st = ACCEL_OK;
  size_t submitted = 0;
  for (size_t i = 0; i < n && st == ACCEL_OK; ++i) {
    slots[i] = (logits_slot_t){.run = r, .row = (uint32_t)i};
    accel_serve_request_desc_t d = {.struct_size = sizeof(d),
                                    .prompt = r->prompt,
                                    .prompt_tokens = (uint32_t)(i + 1),
                                    .max_new_tokens = 1,
                                    .eos_token = -1,
                                    .sampling = {.struct_size = sizeof(
                                                     accel_sampling_params_t),
                                                 .top_p = 1.0f},
                                    .on_token = on_logits,
                                    .user = &slots[i]};
    st = accel_serve_submit(engine, &d, &ids[i]);
    if (st == ACCEL_OK) ++submitted;
    // Each prefix after the previous one has run, so that its blocks are
    // cached when the next one is admitted.
    if (st == ACCEL_OK) st = drain(engine);
  }
  for (size_t i = 0; i < submitted; ++i) accel_serve_release(engine, ids[i]);
  free(slots);
  free(ids);
  return st;
}

static int write_npy(const char *path, const float *data, uint64_t rows,
                     uint32_t cols) {
  char header[128];
  int len = snprintf(header, sizeof(header),
                     "{'descr': '<f4', 'fortran_order': False, 'shape': "
                     "(%llu, %u), }",
                     (unsigned long long)rows, cols);
  // Magic (6) + version (2) + length (2) + header, padded with spaces to a
  // multiple of 64 and ended by a newline.
  int total = (10 + len + 1 + 63) / 64 * 64;
  int pad = total - 10 - len - 1;
  FILE *f = fopen(path, "wb");
  if (f == NULL) {
    fprintf(stderr, "accel-run: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  uint16_t hl = (uint16_t)(total - 10);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fwrite(&hl, 2, 1, f);
  fwrite(header, 1, (size_t)len, f);
  for (int i = 0; i < pad; ++i) fputc(' ', f);
  fputc('\n', f);
  fwrite(data, sizeof(float), rows * cols, f);
  if (fclose(f) != 0) {
    fprintf(stderr, "accel-run: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  return 0;
}

// The generated text (empty without a tokenizer): |*out| is the caller's.
static accel_status_t detokenize(const accel_tokenizer_t *tok, const run_t *r,
                                 char **out, size_t *out_size) {
  size_t cap = 64, size = 0;
  char *text = malloc(cap);
  accel_token_decoder_t *dec = NULL;
  accel_status_t st = text == NULL ? ACCEL_ERROR_OUT_OF_MEMORY : ACCEL_OK;
  if (st == ACCEL_OK && tok != NULL) {
    st = accel_token_decoder_create(tok, 0, &dec);
  }
  for (uint32_t i = 0; st == ACCEL_OK && dec != NULL && i <= r->count; ++i) {
    const char *piece = NULL;
    size_t n = 0;
    st = i < r->count
             ? accel_token_decoder_push(dec, r->generated[i], &piece, &n)
             : accel_token_decoder_flush(dec, &piece, &n);
    if (st == ACCEL_OK && size + n + 1 > cap) {
      while (size + n + 1 > cap) cap *= 2;
      char *grown = realloc(text, cap);
      if (grown == NULL) {
        st = ACCEL_ERROR_OUT_OF_MEMORY;
        break;
      }
      text = grown;
    }
    if (st == ACCEL_OK && n > 0) {
      memcpy(text + size, piece, n);
      size += n;
    }
  }
  accel_token_decoder_destroy(dec);
  if (st != ACCEL_OK) {
    free(text);
    return st;
  }
  text[size] = '\0';
  *out = text;
  *out_size = size;
  return ACCEL_OK;
}

static void report(const run_t *r, const accel_tokenizer_t *tok, double t0,
                   bool json) {
  double prefill = r->count > 0 && r->at[0] > t0
                       ? (double)r->prompt_count / (r->at[0] - t0)
                       : 0;
  double decode = r->count > 1 && r->at[r->count - 1] > r->at[0]
                      ? (double)(r->count - 1) / (r->at[r->count - 1] - r->at[0])
                      : 0;
  char *text = NULL;
  size_t size = 0;
  if (detokenize(tok, r, &text, &size) != ACCEL_OK) {
    text = NULL;
    size = 0;
  }
  if (json) {
    printf("{\"prompt_tokens\": %zu, \"generated\": [", r->prompt_count);
    for (uint32_t i = 0; i < r->count; ++i) {
      printf(i ? ", %d" : "%d", r->generated[i]);
    }
    printf("], \"text\": ");
    accel_tool_json_string(text ? text : "", size);
    printf(", \"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f}\n", prefill,
           decode);
  } else {
    if (tok != NULL) {
      fwrite(text, 1, size, stdout);
      putchar('\n');
    } else {
      for (uint32_t i = 0; i < r->count; ++i) {
        printf(i ? ",%d" : "%d", r->generated[i]);
      }
      putchar('\n');
    }
    fprintf(stderr,
            "accel-run: %zu prompt tokens at %.1f tok/s, %u generated at %.1f "
            "tok/s\n",
            r->prompt_count, prefill, r->count, decode);
  }
  free(text);
}

static int print_tokens(const run_t *r) {
  putchar('[');
  for (size_t i = 0; i < r->prompt_count; ++i) {
    printf(i ? ", %d" : "%d", r->prompt[i]);
  }
  printf("]\n");
  return fflush(stdout) == 0 ? 0 : 1;
}

static accel_status_t find_device(accel_runtime_t *rt, const char *name,
                                  accel_device_t **out) {
  uint32_t n = 0;
  ACCEL_RETURN_IF_ERROR(accel_device_count(rt, &n));
  for (uint32_t i = 0; i < n; ++i) {
    accel_device_t *dev = NULL;
    accel_device_info_t info = {.struct_size = sizeof(info)};
    ACCEL_RETURN_IF_ERROR(accel_device_get(rt, i, &dev));
    ACCEL_RETURN_IF_ERROR(accel_device_info(dev, &info));
    if (name == NULL || strcmp(info.id, name) == 0) {
      *out = dev;
      return ACCEL_OK;
    }
  }
  fprintf(stderr, "accel-run: no device \"%s\" (accel-info lists them)\n",
          name ? name : "0");
  return ACCEL_ERROR_NOT_FOUND;
}

// Tokenizes --prompt with the .gguf's vocabulary into |r|.
static accel_status_t tokenize(const accel_tokenizer_t *tok, const char *prompt,
                               run_t *r) {
  size_t count = 0;
  ACCEL_RETURN_IF_ERROR(accel_tokenizer_encode(
      tok, prompt, strlen(prompt), ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL, NULL, 0,
      &count));
  r->prompt = malloc((count ? count : 1) * sizeof(int32_t));
  if (r->prompt == NULL) return ACCEL_ERROR_OUT_OF_MEMORY;
  r->prompt_count = count;
  if (count == 0) return ACCEL_OK;
  return accel_tokenizer_encode(tok, prompt, strlen(prompt),
                                ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL, r->prompt,
                                count, &count);
}

typedef struct opts {
  const char *model, *prompt, *tokens, *logits, *device, *kernels;
  uint32_t generate;
  bool tokenize, json, f32_activations;
} opts_t;

static int run_model(const opts_t *o, run_t *r, accel_tokenizer_t *tok) {
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  accel_serve_engine_t *engine = NULL;
  accel_serve_model_info_t info = {.struct_size = sizeof(info)};
  // --logits runs each prefix with one generated token.
  uint32_t ctx = (uint32_t)r->prompt_count + (o->generate ? o->generate : 1);
  accel_serve_engine_desc_t d = {
      .struct_size = sizeof(d),
      .flags = ACCEL_SERVE_PREFIX_CACHING | ACCEL_SERVE_CHUNKED_PREFILL |
               (o->f32_activations ? ACCEL_SERVE_F32_ACTIVATIONS : 0),
      .model_path = o->model,
      .kernels_path = o->kernels,
      .kv_bytes = 256ull << 20,
      .max_step_tokens = 512,
      .max_context = ctx < 64 ? 64 : ctx};
  accel_status_t st = accel_runtime_create(NULL, &rt);
  if (st == ACCEL_OK) st = find_device(rt, o->device, &dev);
  if (st == ACCEL_OK) st = accel_serve_engine_create(dev, &d, &engine);
  if (st == ACCEL_OK) st = accel_serve_model_info(engine, &info);
  int rc = 1;
  if (st == ACCEL_OK) {
    r->vocab = info.vocab;
    r->generated = calloc(o->generate + 1, sizeof(int32_t));
    r->at = calloc(o->generate + 1, sizeof(double));
    if (r->generated == NULL || r->at == NULL) st = ACCEL_ERROR_OUT_OF_MEMORY;
  }
  if (st == ACCEL_OK && o->logits != NULL) {
    st = prompt_logits(engine, r);
    if (st == ACCEL_OK &&
        write_npy(o->logits, r->logits, r->prompt_count, r->vocab) != 0) {
      goto out;
    }
  }
  double t0 = 0;
  if (st == ACCEL_OK && o->generate > 0) {
    int32_t eos = tok != NULL ? accel_tokenizer_eos(tok) : -1;
    st = generate(engine, r, o->generate, eos, &t0);
  }
  if (st == ACCEL_OK) {
    if (o->generate > 0 || o->json) report(r, tok, t0, o->json);
    rc = fflush(stdout) == 0 ? 0 : 1;
  }
out:
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-run: %s: %s: %s\n", o->model, accel_status_name(st),
            accel_last_error());
  }
  accel_serve_engine_destroy(engine);
  accel_runtime_destroy(rt);
  return rc;
}

int main(int argc, char **argv) {
  accel_tool_args_t args;
  int rc = accel_tool_parse(&k_spec, argc, argv, &args);
  if (rc != ACCEL_TOOL_CONTINUE) {
    return rc;
  }
  opts_t o = {.model = args.values[OPT_MODEL],
              .prompt = args.values[OPT_PROMPT],
              .tokens = args.values[OPT_TOKENS],
              .logits = args.values[OPT_LOGITS],
              .device = args.values[OPT_DEVICE],
              .kernels = args.values[OPT_KERNELS],
              .generate = args.values[OPT_LOGITS] ? 0 : 16,
              .tokenize = args.values[OPT_TOKENIZE] != NULL,
              .json = args.values[OPT_JSON] != NULL,
              .f32_activations = args.values[OPT_F32_ACTIVATIONS] != NULL};
  if (o.kernels == NULL) o.kernels = ACCEL_RUN_DEFAULT_KERNELS;
  if (o.model == NULL) {
    return accel_tool_usage_error(&k_spec, "--model FILE is required");
  }
  if (o.tokenize && o.prompt == NULL) {
    return accel_tool_usage_error(&k_spec, "--tokenize needs --prompt TEXT");
  }
  if (o.prompt == NULL && o.tokens == NULL) {
    return accel_tool_usage_error(
        &k_spec, "--prompt TEXT or --tokens ID,... is required (or "
                 "--tokenize with --prompt)");
  }
  // --prompt reads the model as GGUF (its vocabulary); the reader's
  // message says what is wrong with anything else.
  bool gguf_model = o.prompt != NULL || accel_gguf_file_is_gguf(o.model);
  const char *gen = args.values[OPT_GENERATE];
  if (gen != NULL && !parse_u32(gen, 1u << 20, &o.generate)) {
    return accel_tool_usage_error(&k_spec, "--generate: \"%s\" is not a count "
                                  "up to 1048576", gen);
  }
  if (o.generate == 0 && o.logits == NULL && !o.tokenize) {
    return accel_tool_usage_error(&k_spec,
                                  "--generate 0 needs --logits OUT.npy");
  }
  const char *threads = args.values[OPT_THREADS];
  uint32_t nthreads = 0;
  if (threads != NULL) {
    if (!parse_u32(threads, 65, &nthreads) || nthreads == 0) {
      return accel_tool_usage_error(&k_spec, "--threads: \"%s\" is not 1 to "
                                    "65", threads);
    }
    setenv("ACCEL_HOST_THREADS", threads, 1);
  }
  run_t r = {0};
  if (o.tokens != NULL && parse_tokens(o.tokens, &r) != 0) {
    free(r.prompt);
    return accel_tool_usage_error(&k_spec, "--tokens: \"%s\" is not a list "
                                  "of token ids", o.tokens);
  }
  accel_gguf_t *gguf = NULL;
  accel_tokenizer_t *tok = NULL;
  accel_status_t st = ACCEL_OK;
  if (gguf_model) {
    st = accel_gguf_open_file(o.model, &gguf);
    if (st == ACCEL_OK && (o.prompt != NULL || !o.tokenize)) {
      accel_status_t ts = accel_tokenizer_create_from_gguf(gguf, &tok);
      // A model without a vocabulary still runs from --tokens.
      if (ts != ACCEL_OK && o.prompt != NULL) st = ts;
    }
  }
  if (st == ACCEL_OK && o.prompt != NULL) st = tokenize(tok, o.prompt, &r);
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-run: %s: %s: %s\n", o.model, accel_status_name(st),
            accel_last_error());
    rc = 1;
  } else if (o.tokenize) {
    rc = print_tokens(&r);
  } else if (r.prompt_count == 0) {
    fprintf(stderr, "accel-run: the prompt has no tokens\n");
    rc = 1;
  } else {
    rc = run_model(&o, &r, tok);
  }
  free(r.prompt);
  free(r.generated);
  free(r.at);
  free(r.logits);
  accel_tokenizer_destroy(tok);
  accel_gguf_close(gguf);
  return rc;
}
