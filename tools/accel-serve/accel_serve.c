// accel-serve: an OpenAI-style completion server over the serving engine
// (include/accel/serve.h, docs/serving.md "The HTTP server").
//
// One engine thread runs the step loop; libmicrohttpd runs a thread per
// connection, which parses the request (completion_request.c), submits it,
// and reads the request's tokens with the engine's pull iterator, answering
// at the end or, with "stream": true, as server-sent events. A client that
// goes away mid-stream has its request released (its KV blocks return at
// the next step). GET /v1/models, /health and /metrics (Prometheus text:
// queues, KV blocks, waste, TTFT and TPOT histograms) read the engine's
// counters.
#include <arpa/inet.h>
#include <errno.h>
#include <json-c/json.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/accel.h"
#include "completion_request.h"
#include "tool_cli.h"

static const accel_tool_option_t k_options[] = {
    {"--model", "FILE", 0, "the decoder model .axe to serve (required)"},
    {"--kernels", "FILE", 0, "reference.axe, the kernels to run it on"},
    {"--port", "N", 0, "TCP port on 127.0.0.1 (0: any free port; 8000)"},
    {"--name", "NAME", 0, "the model's name in requests (\"decoder\")"},
    {"--kv-bytes", "N", 0, "KV-cache budget in bytes (64 MiB)"},
    {"--max-context", "N", 0, "prompt plus generated tokens (2048)"},
    {"--max-step-tokens", "N", 0, "tokens of one engine step (256)"},
};
enum { OPT_MODEL, OPT_KERNELS, OPT_PORT, OPT_NAME, OPT_KV_BYTES,
       OPT_MAX_CONTEXT, OPT_MAX_STEP_TOKENS };

static const accel_tool_spec_t k_spec = {
    .name = "accel-serve",
    .synopsis = "--model FILE --kernels FILE [--port N] [options]",
    .description = "Serves a decoder model over HTTP with OpenAI-style "
                   "/v1/completions (streaming as server-sent events), "
                   "/v1/models, /health and /metrics; stops on SIGINT or "
                   "SIGTERM.",
    .options = k_options,
    .option_count = sizeof(k_options) / sizeof(k_options[0]),
    .min_positional = 0,
    .max_positional = 0,
};

// Histogram bucket bounds (seconds) of TTFT and TPOT.
static const double k_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                   0.1,   0.25,   0.5,   1,    2.5,   5,
                                   10};
enum { BUCKETS = sizeof(k_buckets) / sizeof(k_buckets[0]) };

typedef struct histogram {
  uint64_t counts[BUCKETS + 1];  // last: +Inf
  uint64_t count;
  double sum;
} histogram_t;

typedef struct server {
  accel_serve_engine_t *engine;
  accel_serve_model_info_t info;
  completion_limits_t limits;
  const char *name;
  atomic_int stop;
  pthread_mutex_t mu;  // guards the histograms and counters below
  histogram_t ttft, tpot;
  uint64_t http_requests, http_errors, disconnects;
  atomic_uint_fast64_t completion_ids;
} server_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void observe(server_t *s, histogram_t *h, double v) {
  pthread_mutex_lock(&s->mu);
  int b = 0;
  while (b < BUCKETS && v > k_buckets[b]) ++b;
  h->counts[b]++;
  h->count++;
  h->sum += v;
  pthread_mutex_unlock(&s->mu);
}

// ---------------------------------------------------------------------------
// Engine thread
// ---------------------------------------------------------------------------

static void *engine_loop(void *arg) {
  server_t *s = arg;
  while (!atomic_load(&s->stop)) {
    uint32_t pending = 0;
    accel_serve_stats_t before = {.struct_size = sizeof(before)};
    (void)accel_serve_stats(s->engine, &before);
    accel_status_t st = accel_serve_step(s->engine, &pending);
    if (st != ACCEL_OK) {
      fprintf(stderr, "accel-serve: engine step failed: %s: %s\n",
              accel_status_name(st), accel_last_error());
      accel_serve_stats_t after = {.struct_size = sizeof(after)};
      (void)accel_serve_stats(s->engine, &after);
      if (after.failed_steps == before.failed_steps) {
        return NULL;  // the engine failed: every request ends with an error
      }
      continue;  // only that step's requests failed; the engine goes on
    }
    if (pending == 0) {
      (void)accel_serve_wait_work(s->engine, 50 * 1000 * 1000);
    }
  }
  return NULL;
}

// ---------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status,
                               const char *type, const char *body) {
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
  if (r == NULL) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  enum MHD_Result ok = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ok;
}

static enum MHD_Result respond_json(struct MHD_Connection *c, unsigned status,
                                    json_object *o) {
  enum MHD_Result ok = respond(
      c, status, "application/json",
      json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
  json_object_put(o);
  return ok;
}

static enum MHD_Result respond_error(server_t *s, struct MHD_Connection *c,
                                     unsigned status, const char *msg) {
  pthread_mutex_lock(&s->mu);
  s->http_errors++;
  pthread_mutex_unlock(&s->mu);
  json_object *e = json_object_new_object();
  json_object_object_add(e, "message", json_object_new_string(msg));
  json_object_object_add(e, "type",
                         json_object_new_string(status == 404
                                                    ? "not_found_error"
                                                    : status >= 500
                                                          ? "server_error"
                                                          : "invalid_request_error"));
  json_object_object_add(e, "code", json_object_new_int((int)status));
  json_object *o = json_object_new_object();
  json_object_object_add(o, "error", e);
  return respond_json(c, status, o);
}

static const char *finish_reason(uint32_t end) {
  switch (end) {
    case ACCEL_SERVE_END_EOS: return "stop";
    case ACCEL_SERVE_END_LENGTH: return "length";
    default: return "error";
  }
}

// A completion object (the whole answer, or one streamed chunk).
static json_object *completion_object(server_t *s, uint64_t cid,
                                      const int32_t *tokens, uint32_t n,
                                      const char *reason) {
  json_object *choice = json_object_new_object();
  json_object *toks = json_object_new_array();
  size_t cap = 16 * (size_t)n + 1, len = 0;
  char *text = malloc(cap);
  for (uint32_t i = 0; text != NULL && i < n; ++i) {
    json_object_array_add(toks, json_object_new_int(tokens[i]));
    len += completion_token_text(tokens[i], text + len, cap - len);
  }
  if (text != NULL) text[len] = '\0';
  json_object_object_add(choice, "index", json_object_new_int(0));
  json_object_object_add(choice, "text",
                         json_object_new_string(text ? text : ""));
  json_object_object_add(choice, "tokens", toks);
  json_object_object_add(choice, "finish_reason",
                         reason ? json_object_new_string(reason) : NULL);
  free(text);
  json_object *o = json_object_new_object();
  char id[40];
  snprintf(id, sizeof(id), "cmpl-%llu", (unsigned long long)cid);
  json_object_object_add(o, "id", json_object_new_string(id));
  json_object_object_add(o, "object", json_object_new_string("text_completion"));
  json_object_object_add(o, "created", json_object_new_int64(time(NULL)));
  json_object_object_add(o, "model", json_object_new_string(s->name));
  json_object *choices = json_object_new_array();
  json_object_array_add(choices, choice);
  json_object_object_add(o, "choices", choices);
  return o;
}

// ---------------------------------------------------------------------------
// /v1/completions
// ---------------------------------------------------------------------------

// One connection's state (MHD's con_cls).
typedef struct conn {
  char *body;
  size_t size, cap;
  bool too_large;
  // A streamed completion.
  server_t *s;
  uint64_t id, cid;
  uint32_t prompt_tokens, generated;
  double t_submit, t_first, t_last;
  bool done;  // [DONE] sent
  bool finished;  // the engine ended the request
} conn_t;

static void conn_timing(conn_t *k, double t) {
  if (k->generated == 0) {
    k->t_first = t;
    observe(k->s, &k->s->ttft, t - k->t_submit);
  }
  k->t_last = t;
}

static void conn_finish_timing(conn_t *k) {
  if (k->generated > 1) {
    observe(k->s, &k->s->tpot,
            (k->t_last - k->t_first) / (double)(k->generated - 1));
  }
}

static accel_status_t submit(server_t *s, const completion_request_t *r,
                             uint64_t *out_id) {
  accel_serve_request_desc_t d = {.struct_size = sizeof(d),
                                  .prompt = r->prompt,
                                  .prompt_tokens = r->prompt_tokens,
                                  .max_new_tokens = r->max_tokens,
                                  .eos_token = -1};
  d.sampling = (accel_sampling_params_t){.struct_size = sizeof(d.sampling),
                                         .top_k = r->top_k,
                                         .temperature = r->temperature,
                                         .top_p = r->top_p,
                                         .seed = r->seed};
  return accel_serve_submit(s->engine, &d, out_id);
}

// The SSE reader: one event per token, then the final chunk and [DONE].
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  conn_t *k = cls;
  (void)pos;
  if (k->done) {
    return MHD_CONTENT_READER_END_OF_STREAM;
  }
  if (k->finished) {
    int n = snprintf(buf, max, "data: [DONE]\n\n");
    k->done = true;
    return n;
  }
  int32_t token = -1;
  uint32_t end = 0;
  accel_status_t st = accel_serve_next(k->s->engine, k->id,
                                       200ull * 1000 * 1000, &token, &end);
  if (st == ACCEL_ERROR_TIMEOUT) {
    return 0;  // nothing yet: libmicrohttpd calls again
  }
  if (st != ACCEL_OK) {
    return MHD_CONTENT_READER_END_WITH_ERROR;
  }
  if (token >= 0) {
    conn_timing(k, now_s());
    k->generated++;
  }
  if (end != ACCEL_SERVE_END_NONE) {
    k->finished = true;
    conn_finish_timing(k);
  }
  json_object *o = completion_object(k->s, k->cid, &token, token >= 0 ? 1 : 0,
                                     end ? finish_reason(end) : NULL);
  int n = snprintf(buf, max, "data: %s\n\n",
                   json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
  json_object_put(o);
  return n < 0 || (size_t)n >= max ? MHD_CONTENT_READER_END_WITH_ERROR : n;
}

// Called when the streamed response ends, completed or not (a client that
// disconnected): the request is released, which cancels it if it runs.
static void stream_free(void *cls) {
  conn_t *k = cls;
  if (!k->finished) {
    pthread_mutex_lock(&k->s->mu);
    k->s->disconnects++;
    pthread_mutex_unlock(&k->s->mu);
  }
  (void)accel_serve_release(k->s->engine, k->id);
  free(k);
}

static enum MHD_Result completions(server_t *s, struct MHD_Connection *c,
                                   conn_t *k) {
  char err[256];
  completion_request_t r;
  int status = k->too_large
                   ? 413
                   : completion_request_parse(k->body ? k->body : "", k->size,
                                              &s->limits, &r, err,
                                              sizeof(err));
  if (k->too_large) {
    snprintf(err, sizeof(err), "the body is above %u bytes",
             COMPLETION_MAX_BODY);
  }
  if (status != 0) {
    return respond_error(s, c, (unsigned)status, err);
  }
  uint64_t id = 0;
  double t0 = now_s();
  accel_status_t st = submit(s, &r, &id);
  uint32_t prompt_tokens = r.prompt_tokens;
  bool stream = r.stream;
  completion_request_free(&r);
  if (st != ACCEL_OK) {
    snprintf(err, sizeof(err), "%s", accel_last_error());
    return respond_error(s, c, st == ACCEL_ERROR_INVALID_ARGUMENT ? 400 : 503,
                         err);
  }
  uint64_t cid = atomic_fetch_add(&s->completion_ids, 1) + 1;
  if (stream) {
    conn_t *sk = calloc(1, sizeof(*sk));
    if (sk == NULL) {
      (void)accel_serve_release(s->engine, id);
      return respond_error(s, c, 500, "out of memory");
    }
    *sk = (conn_t){.s = s, .id = id, .cid = cid,
                   .prompt_tokens = prompt_tokens, .t_submit = t0};
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 4096, stream_reader, sk, stream_free);
    if (resp == NULL) {
      stream_free(sk);
      return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ok;
  }
  // Not streamed: collect every token (this connection's thread waits).
  conn_t t = {.s = s, .t_submit = t0};
  int32_t *tokens = malloc(sizeof(int32_t) * s->info.max_context);
  uint32_t n = 0, end = 0;
  while (tokens != NULL && end == ACCEL_SERVE_END_NONE) {
    int32_t token;
    st = accel_serve_next(s->engine, id, ACCEL_TIMEOUT_INFINITE, &token, &end);
    if (st != ACCEL_OK) break;
    if (token >= 0) {
      conn_timing(&t, now_s());
      t.generated++;
      tokens[n++] = token;
    }
  }
  conn_finish_timing(&t);
  (void)accel_serve_release(s->engine, id);
  if (tokens == NULL || st != ACCEL_OK || end == ACCEL_SERVE_END_ERROR) {
    free(tokens);
    return respond_error(s, c, 500, "the engine failed");
  }
  json_object *o = completion_object(s, cid, tokens, n, finish_reason(end));
  free(tokens);
  json_object *usage = json_object_new_object();
  json_object_object_add(usage, "prompt_tokens",
                         json_object_new_int((int)prompt_tokens));
  json_object_object_add(usage, "completion_tokens",
                         json_object_new_int((int)n));
  json_object_object_add(usage, "total_tokens",
                         json_object_new_int((int)(prompt_tokens + n)));
  json_object_object_add(o, "usage", usage);
  return respond_json(c, 200, o);
}

// ---------------------------------------------------------------------------
// GET endpoints
// ---------------------------------------------------------------------------

static enum MHD_Result models(server_t *s, struct MHD_Connection *c) {
  json_object *m = json_object_new_object();
  json_object_object_add(m, "id", json_object_new_string(s->name));
  json_object_object_add(m, "object", json_object_new_string("model"));
  json_object_object_add(m, "owned_by", json_object_new_string("accel"));
  json_object_object_add(m, "max_context",
                         json_object_new_int((int)s->info.max_context));
  json_object_object_add(m, "vocab", json_object_new_int((int)s->info.vocab));
  json_object *data = json_object_new_array();
  json_object_array_add(data, m);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "object", json_object_new_string("list"));
  json_object_object_add(o, "data", data);
  return respond_json(c, 200, o);
}

typedef struct text {
  char *p;
  size_t len, cap;
} text_t;

static void emit(text_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void emit(text_t *t, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < t->cap - t->len) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = t->cap * 2 + (size_t)(n > 0 ? n : 0);
    char *p = realloc(t->p, cap);
    if (p == NULL) return;
    t->p = p;
    t->cap = cap;
  }
}

static void emit_metric(text_t *t, const char *name, const char *type,
                        const char *help, double v) {
  emit(t, "# HELP accel_serve_%s %s\n# TYPE accel_serve_%s %s\n"
          "accel_serve_%s %.17g\n", name, help, name, type, name, v);
}

static void emit_histogram(text_t *t, const char *name, const char *help,
                           const histogram_t *h) {
  emit(t, "# HELP accel_serve_%s %s\n# TYPE accel_serve_%s histogram\n", name,
       help, name);
  uint64_t cum = 0;
  for (int b = 0; b < BUCKETS; ++b) {
    cum += h->counts[b];
    emit(t, "accel_serve_%s_bucket{le=\"%g\"} %llu\n", name, k_buckets[b],
         (unsigned long long)cum);
  }
  emit(t, "accel_serve_%s_bucket{le=\"+Inf\"} %llu\n", name,
       (unsigned long long)h->count);
  emit(t, "accel_serve_%s_sum %.9g\naccel_serve_%s_count %llu\n", name, h->sum,
       name, (unsigned long long)h->count);
}

static enum MHD_Result metrics(server_t *s, struct MHD_Connection *c) {
  accel_serve_stats_t st = {.struct_size = sizeof(st)};
  (void)accel_serve_stats(s->engine, &st);
  text_t t = {.p = malloc(4096), .cap = 4096};
  if (t.p == NULL) return MHD_NO;
  double slots_bytes = (double)st.kv_token_slots;
  struct {
    const char *name, *type, *help;
    double v;
  } rows[] = {
      {"requests_waiting", "gauge", "requests not yet admitted", st.waiting},
      {"requests_running", "gauge", "requests running", st.running},
      {"requests_swapped", "gauge", "requests swapped to host", st.swapped},
      {"requests_live", "gauge", "request records not yet released",
       st.requests},
      {"kv_blocks_total", "gauge", "KV blocks in device memory",
       s->info.device_blocks},
      {"kv_blocks_used", "gauge", "KV blocks referenced", st.kv_used_blocks},
      {"kv_blocks_cached", "gauge", "unreferenced KV blocks kept for prefix "
       "hits", st.kv_cached_blocks},
      {"kv_blocks_free", "gauge", "free KV blocks", st.kv_free_blocks},
      {"kv_token_slots", "gauge", "token slots of the used blocks",
       st.kv_token_slots},
      {"kv_tokens", "gauge", "tokens held by the used blocks", st.kv_tokens},
      {"kv_waste_ratio", "gauge", "share of used KV slots holding no token",
       slots_bytes > 0 ? 1.0 - (double)st.kv_tokens / slots_bytes : 0.0},
      {"prefix_queries_total", "counter", "full prompt blocks looked up",
       (double)st.prefix_queries},
      {"prefix_hits_total", "counter", "prompt blocks found cached",
       (double)st.prefix_hits},
      {"steps_total", "counter", "engine steps", (double)st.steps},
      {"preemptions_total", "counter", "preemptions", (double)st.preemptions},
      {"prefill_tokens_total", "counter", "prompt tokens computed",
       (double)st.prefill_tokens},
      {"generated_tokens_total", "counter", "tokens generated",
       (double)st.generated_tokens},
      {"requests_finished_total", "counter", "requests finished",
       (double)st.finished},
      {"requests_cancelled_total", "counter", "requests released unfinished",
       (double)st.cancelled},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); ++i) {
    emit_metric(&t, rows[i].name, rows[i].type, rows[i].help, rows[i].v);
  }
  pthread_mutex_lock(&s->mu);
  emit_metric(&t, "http_requests_total", "counter", "HTTP requests",
              (double)s->http_requests);
  emit_metric(&t, "http_errors_total", "counter", "HTTP error answers",
              (double)s->http_errors);
  emit_metric(&t, "client_disconnects_total", "counter",
              "streams whose client left before the end",
              (double)s->disconnects);
  emit_histogram(&t, "ttft_seconds", "time to first token", &s->ttft);
  emit_histogram(&t, "tpot_seconds", "time per output token after the first",
                 &s->tpot);
  pthread_mutex_unlock(&s->mu);
  enum MHD_Result ok = respond(c, 200, "text/plain; version=0.0.4", t.p);
  free(t.p);
  return ok;
}

// ---------------------------------------------------------------------------
// Routing
// ---------------------------------------------------------------------------

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
  server_t *s = cls;
  (void)version;
  bool post = strcmp(method, "POST") == 0;
  if (*con_cls == NULL) {
    conn_t *k = calloc(1, sizeof(*k));
    if (k == NULL) return MHD_NO;
    *con_cls = k;
    pthread_mutex_lock(&s->mu);
    s->http_requests++;
    pthread_mutex_unlock(&s->mu);
    return MHD_YES;  // the body (if any) comes in later calls
  }
  conn_t *k = *con_cls;
  if (post && *upload_size > 0) {
    size_t need = k->size + *upload_size;
    if (need > COMPLETION_MAX_BODY) {
      k->too_large = true;
    } else {
      if (need + 1 > k->cap) {
        size_t cap = need * 2 + 1;
        char *b = realloc(k->body, cap);
        if (b == NULL) return MHD_NO;
        k->body = b;
        k->cap = cap;
      }
      memcpy(k->body + k->size, upload, *upload_size);
      k->size = need;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  bool get = strcmp(method, "GET") == 0;
  if (strcmp(url, "/v1/completions") == 0) {
    return post ? completions(s, c, k)
                : respond_error(s, c, 405, "use POST for /v1/completions");
  }
  if (strcmp(url, "/v1/models") == 0 || strcmp(url, "/health") == 0 ||
      strcmp(url, "/metrics") == 0) {
    if (!get) {
      return respond_error(s, c, 405, "use GET");
    }
    if (strcmp(url, "/v1/models") == 0) return models(s, c);
    if (strcmp(url, "/metrics") == 0) return metrics(s, c);
    return respond(c, 200, "application/json", "{\"status\":\"ok\"}");
  }
  char msg[160];
  snprintf(msg, sizeof(msg), "no endpoint %.100s", url);
  return respond_error(s, c, 404, msg);
}

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
  (void)cls;
  (void)c;
  (void)code;
  conn_t *k = *con_cls;
  if (k != NULL) {
    free(k->body);
    free(k);
    *con_cls = NULL;
  }
}

// ---------------------------------------------------------------------------

static bool parse_u64(const char *v, uint64_t max, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 || n > max) {
    return false;
  }
  *out = n;
  return true;
}

int main(int argc, char **argv) {
  accel_tool_args_t args;
  int rc = accel_tool_parse(&k_spec, argc, argv, &args);
  if (rc != ACCEL_TOOL_CONTINUE) {
    return rc;
  }
  const char *model = args.values[OPT_MODEL];
  const char *kernels = args.values[OPT_KERNELS];
  if (model == NULL || kernels == NULL) {
    return accel_tool_usage_error(&k_spec, "--model and --kernels are required");
  }
  uint64_t port = 8000, kv = 64ull << 20, ctx = 2048, step = 256;
  struct {
    int opt;
    uint64_t max, *v;
  } nums[] = {{OPT_PORT, 65535, &port},
              {OPT_KV_BYTES, UINT64_MAX, &kv},
              {OPT_MAX_CONTEXT, 1u << 20, &ctx},
              {OPT_MAX_STEP_TOKENS, 1u << 20, &step}};
  for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); ++i) {
    const char *v = args.values[nums[i].opt];
    if (v != NULL && !parse_u64(v, nums[i].max, nums[i].v)) {
      return accel_tool_usage_error(&k_spec, "%s: \"%s\" is not a number up "
                                    "to %llu", k_options[nums[i].opt].name, v,
                                    (unsigned long long)nums[i].max);
    }
  }
  // Signals are taken by sigwait below; every thread inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  static server_t s;
  pthread_mutex_init(&s.mu, NULL);
  s.name = args.values[OPT_NAME] ? args.values[OPT_NAME] : "decoder";
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  accel_status_t st = accel_runtime_create(NULL, &rt);
  if (st == ACCEL_OK) st = accel_device_get(rt, 0, &dev);
  accel_serve_engine_desc_t d = {
      .struct_size = sizeof(d),
      .flags = ACCEL_SERVE_PREFIX_CACHING | ACCEL_SERVE_CHUNKED_PREFILL,
      .model_path = model, .kernels_path = kernels, .kv_bytes = kv,
      .max_context = (uint32_t)ctx, .max_step_tokens = (uint32_t)step};
  if (st == ACCEL_OK) st = accel_serve_engine_create(dev, &d, &s.engine);
  s.info.struct_size = sizeof(s.info);
  if (st == ACCEL_OK) st = accel_serve_model_info(s.engine, &s.info);
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-serve: %s: %s\n", accel_status_name(st),
            accel_last_error());
    accel_runtime_destroy(rt);
    return 1;
  }
  s.limits = (completion_limits_t){.model = s.name, .vocab = s.info.vocab,
                                   .max_context = s.info.max_context,
                                   .byte_prompts = s.info.vocab >= 256};
  pthread_t engine_thread;
  pthread_create(&engine_thread, NULL, engine_loop, &s);

  struct sockaddr_in addr = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // poll, not select: the runtime holds many descriptors (above FD_SETSIZE).
  struct MHD_Daemon *daemon = MHD_start_daemon(
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
          MHD_USE_POLL |
          MHD_USE_ERROR_LOG,
      (uint16_t)port, NULL, NULL, handle, &s, MHD_OPTION_SOCK_ADDR, &addr,
      MHD_OPTION_NOTIFY_COMPLETED, request_done, NULL,
      MHD_OPTION_CONNECTION_TIMEOUT, 600u, MHD_OPTION_END);
  rc = 0;
  if (daemon == NULL) {
    fprintf(stderr, "accel-serve: cannot listen on 127.0.0.1:%llu\n",
            (unsigned long long)port);
    rc = 1;
  } else {
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    printf("accel-serve: serving \"%s\" (%u layers, vocab %u, %u KV blocks "
           "of %u tokens) on http://127.0.0.1:%u\n",
           s.name, s.info.layers, s.info.vocab, s.info.device_blocks,
           s.info.block_tokens, di ? di->port : (unsigned)port);
    fflush(stdout);
    int sig = 0;
    sigwait(&sigs, &sig);
    printf("accel-serve: stopping (signal %d)\n", sig);
    fflush(stdout);
    MHD_stop_daemon(daemon);
  }
  atomic_store(&s.stop, 1);
  pthread_join(engine_thread, NULL);
  accel_serve_engine_destroy(s.engine);
  accel_runtime_destroy(rt);
  return rc;
}
