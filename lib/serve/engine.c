// The serving engine (include/accel/serve.h, docs/serving.md "The engine"):
// requests, their token streams, and the step loop over the scheduler and
// the model runner (serve_model.c).
//
// Locking: |mu| guards the request records, the pending lists and the
// counters; the scheduler and the KV cache belong to the stepping thread,
// which also takes |mu| while it admits, cancels and completes (short), and
// never while the model runs or a callback is called. Records are found by
// id under |mu| every time: accel_serve_release frees one at once, so the
// stepping thread never keeps a pointer to a record across an unlock.
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/kv_cache.h"
#include "accel/scheduler.h"
#include "accel/serve.h"
#include "core/error.h"
#include "core/lock.h"
#include "core/runtime_impl.h"
#include "serve/id_map.h"
#include "serve/serve_model.h"

typedef struct serve_request {
  uint64_t id;
  accel_serve_request_desc_t d;  // prompt points at |prompt|
  int32_t *prompt;
  int32_t *out;        // generated tokens not yet forgotten
  uint32_t out_count;  // generated so far
  uint32_t out_cap;
  uint32_t read;       // tokens the iterator has returned
  uint32_t end;        // accel_serve_end_t
} serve_request_t;

typedef struct id_list {
  uint64_t *ids;
  uint32_t count, cap;
} id_list_t;

struct accel_serve_engine {
  serve_model_t *model;
  accel_kv_cache_t *cache;
  accel_sched_t *sched;
  accel_serve_model_info_t info;
  uint32_t flags;

  pthread_mutex_t mu;
  pthread_cond_t tokens_cv;  // a token or an end was delivered, or a release
  pthread_cond_t work_cv;    // a submit or a release
  serve_id_map_t requests;   // guarded by mu
  id_list_t pending;         // submitted, not yet admitted (guarded by mu)
  id_list_t cancels;         // released while admitted (guarded by mu)
  uint64_t next_id;          // guarded by mu
  uint64_t work;             // submits and releases so far (guarded by mu)
  accel_status_t failed;     // sticky step failure (guarded by mu)
  uint32_t failed_steps;     // steps whose requests failed (guarded by mu)
  char failed_msg[256];
  uint64_t generated, finished, cancelled;  // guarded by mu
  accel_serve_stats_t sched_view;  // last step's scheduler/cache counters
                                   // (guarded by mu)

  // Stepping thread only.
  float *logits;                 // [max_step_seqs, vocab]
  int32_t *sampled;              // [max_step_seqs]
  uint64_t *sampled_ids;         // [max_step_seqs]
  accel_sched_finished_t *done;  // [max_step_seqs]
  accel_serve_token_t *deliver;  // [max_step_seqs]
  struct {
    accel_serve_token_fn fn;
    void *user;
  } *calls;                      // [max_step_seqs]
};

static accel_status_t id_list_push(id_list_t *l, uint64_t id) {
  if (l->count == l->cap) {
    uint32_t cap = l->cap ? 2 * l->cap : 16;
    uint64_t *ids = realloc(l->ids, sizeof(uint64_t) * cap);
    if (ids == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "serve: cannot allocate");
    }
    l->ids = ids;
    l->cap = cap;
  }
  l->ids[l->count++] = id;
  return ACCEL_OK;
}

static void request_free(serve_request_t *r) {
  free(r->prompt);
  free(r->out);
  free(r);
}

static void free_requests(accel_serve_engine_t *e) {
  for (uint32_t i = 0; i <= e->requests.mask && e->requests.values; ++i) {
    if (e->requests.values[i] != NULL) {
      request_free(e->requests.values[i]);
      e->requests.values[i] = NULL;
    }
  }
  serve_id_map_fini(&e->requests);
}

// ---------------------------------------------------------------------------
// Create and destroy
// ---------------------------------------------------------------------------

static accel_status_t check_desc(const accel_serve_engine_desc_t *d) {
  const uint32_t known = ACCEL_SERVE_PREFIX_CACHING |
                         ACCEL_SERVE_CHUNKED_PREFILL |
                         ACCEL_SERVE_PREEMPT_SWAP |
                         ACCEL_SERVE_DIRECT_LAUNCH |
                         ACCEL_SERVE_F32_ACTIVATIONS;
  if (d->struct_size < sizeof(*d)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve engine: struct_size %u is below %zu",
                       d->struct_size, sizeof(*d));
  }
  if (d->flags & ~known) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve engine: unknown flags 0x%x", d->flags & ~known);
  }
  if (d->reserved0 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve engine: reserved0 must be 0");
  }
  if (d->model_path == NULL || d->kernels_path == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve engine: model_path and kernels_path are "
                       "required");
  }
  if ((d->flags & ACCEL_SERVE_PREEMPT_SWAP) && d->swap_bytes == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve engine: swap preemption needs swap_bytes");
  }
  if (d->max_context > (1u << 20)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve engine: max_context %u above 1048576",
                       d->max_context);
  }
  return ACCEL_OK;
}

// Whether steps replay recorded command buffers: the desc's flags, turned
// off by ACCEL_SERVE_COMMAND_BUFFERS=0.
static accel_status_t use_command_buffers(const accel_serve_engine_desc_t *d,
                                          bool *out) {
  uint64_t v = 1;
  bool invalid = false;
  if (accel_env_u64("ACCEL_SERVE_COMMAND_BUFFERS", &v, &invalid) &&
      (invalid || v > 1)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve engine: ACCEL_SERVE_COMMAND_BUFFERS is "
                       "\"%.32s\", not 0 or 1",
                       getenv("ACCEL_SERVE_COMMAND_BUFFERS"));
  }
  *out = v == 1 && !(d->flags & ACCEL_SERVE_DIRECT_LAUNCH);
  return ACCEL_OK;
}

static accel_status_t engine_init(accel_serve_engine_t *e,
                                  accel_device_t *device,
                                  const accel_serve_engine_desc_t *desc) {
  bool replay = false;
  ACCEL_RETURN_IF_ERROR(use_command_buffers(desc, &replay));
  serve_model_desc_t md = {
      .model_path = desc->model_path, .kernels_path = desc->kernels_path,
      .kv_bytes = desc->kv_bytes ? desc->kv_bytes : 64ull << 20,
      .swap_bytes = desc->swap_bytes,
      .max_step_tokens = desc->max_step_tokens ? desc->max_step_tokens : 256,
      .max_step_seqs = desc->max_step_seqs ? desc->max_step_seqs : 64,
      .max_context = desc->max_context ? desc->max_context : 2048,
      .command_buffers = replay,
      .f32_activations = (desc->flags & ACCEL_SERVE_F32_ACTIVATIONS) != 0};
  ACCEL_RETURN_IF_ERROR(serve_model_create(device, &md, &e->model));
  const serve_model_config_t *c = serve_model_config(e->model);
  e->info = (accel_serve_model_info_t){
      .struct_size = sizeof(e->info), .layers = c->layers, .dim = c->dim,
      .heads = c->heads, .kv_heads = c->kv_heads, .head_dim = c->head_dim,
      .ffn = c->ffn, .vocab = c->vocab, .block_tokens = c->block_size,
      .device_blocks = serve_model_device_blocks(e->model),
      .host_blocks = serve_model_host_blocks(e->model),
      .max_context = md.max_context, .max_step_tokens = md.max_step_tokens,
      .block_bytes = serve_model_block_bytes(e->model)};
  accel_kv_cache_desc_t kd = {
      .struct_size = sizeof(kd),
      .flags = (desc->flags & ACCEL_SERVE_PREFIX_CACHING)
                   ? ACCEL_KV_CACHE_PREFIX_CACHING : 0,
      .block_tokens = c->block_size, .device_blocks = e->info.device_blocks,
      .host_blocks = e->info.host_blocks};
  ACCEL_RETURN_IF_ERROR(accel_kv_cache_create(&kd, &e->cache));
  accel_sched_desc_t sd = {
      .struct_size = sizeof(sd),
      .flags = (desc->flags & ACCEL_SERVE_CHUNKED_PREFILL)
                   ? ACCEL_SCHED_CHUNKED_PREFILL : 0,
      .max_step_tokens = md.max_step_tokens,
      .max_step_seqs = md.max_step_seqs,
      .preempt = (desc->flags & ACCEL_SERVE_PREEMPT_SWAP)
                     ? ACCEL_SCHED_PREEMPT_SWAP
                     : ACCEL_SCHED_PREEMPT_RECOMPUTE};
  ACCEL_RETURN_IF_ERROR(accel_sched_create(&sd, e->cache, &e->sched));
  uint32_t s = md.max_step_seqs;
  e->logits = malloc(sizeof(float) * s * c->vocab);
  e->sampled = malloc(sizeof(int32_t) * s);
  e->sampled_ids = malloc(sizeof(uint64_t) * s);
  e->done = malloc(sizeof(*e->done) * s);
  e->deliver = malloc(sizeof(*e->deliver) * s);
  e->calls = malloc(sizeof(*e->calls) * s);
  if (!e->logits || !e->sampled || !e->sampled_ids || !e->done ||
      !e->deliver || !e->calls) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "serve: cannot allocate");
  }
  return serve_id_map_init(&e->requests);
}

static void engine_free(accel_serve_engine_t *e) {
  free_requests(e);
  accel_sched_destroy(e->sched);
  accel_kv_cache_destroy(e->cache);
  serve_model_destroy(e->model);
  free(e->pending.ids);
  free(e->cancels.ids);
  free(e->logits);
  free(e->sampled);
  free(e->sampled_ids);
  free(e->done);
  free(e->deliver);
  free(e->calls);
  pthread_cond_destroy(&e->tokens_cv);
  pthread_cond_destroy(&e->work_cv);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

accel_status_t accel_serve_engine_create(accel_device_t *device,
                                         const accel_serve_engine_desc_t *desc,
                                         accel_serve_engine_t **out_engine) {
  if (device == NULL || desc == NULL || out_engine == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve engine: device, desc and out_engine must not "
                       "be NULL");
  }
  ACCEL_RETURN_IF_ERROR(check_desc(desc));
  accel_serve_engine_t *e = calloc(1, sizeof(*e));
  if (e == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "serve: cannot allocate");
  }
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->tokens_cv, NULL);
  pthread_cond_init(&e->work_cv, NULL);
  e->flags = desc->flags;
  e->next_id = 1;
  accel_status_t st = engine_init(e, device, desc);
  if (st != ACCEL_OK) {
    engine_free(e);
    return st;
  }
  *out_engine = e;
  return ACCEL_OK;
}

void accel_serve_engine_destroy(accel_serve_engine_t *engine) {
  if (engine != NULL) {
    engine_free(engine);
  }
}

accel_status_t accel_serve_model_info(const accel_serve_engine_t *engine,
                                      accel_serve_model_info_t *out) {
  if (engine == NULL || out == NULL || out->struct_size < sizeof(*out)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve model info: NULL argument or short struct_size");
  }
  *out = engine->info;
  return ACCEL_OK;
}

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

static accel_status_t check_request(const accel_serve_engine_t *e,
                                    const accel_serve_request_desc_t *d) {
  if (d->struct_size < sizeof(*d)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve request: struct_size %u is below %zu",
                       d->struct_size, sizeof(*d));
  }
  if (d->reserved0 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve request: reserved0 must be 0");
  }
  if (d->prompt == NULL || d->prompt_tokens == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve request: the prompt is empty");
  }
  if (d->max_new_tokens == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve request: max_new_tokens must be at least 1");
  }
  uint64_t total = (uint64_t)d->prompt_tokens + d->max_new_tokens;
  if (total > e->info.max_context) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve request: prompt (%u tokens) + max_new_tokens "
                       "(%u) is above the context limit %u",
                       d->prompt_tokens, d->max_new_tokens,
                       e->info.max_context);
  }
  if (!(e->flags & ACCEL_SERVE_CHUNKED_PREFILL) &&
      d->prompt_tokens > e->info.max_step_tokens) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve request: prompt of %u tokens above the step "
                       "budget %u (the engine has no chunked prefill)",
                       d->prompt_tokens, e->info.max_step_tokens);
  }
  for (uint32_t i = 0; i < d->prompt_tokens; ++i) {
    if (d->prompt[i] < 0 || (uint32_t)d->prompt[i] >= e->info.vocab) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "serve request: prompt token %u is %d, outside the "
                         "vocabulary [0, %u)",
                         i, d->prompt[i], e->info.vocab);
    }
  }
  if (d->eos_token < -1 || (d->eos_token >= 0 &&
                            (uint32_t)d->eos_token >= e->info.vocab)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve request: eos_token %d outside [-1, %u)",
                       d->eos_token, e->info.vocab);
  }
  const accel_sampling_params_t *p = &d->sampling;
  if (p->struct_size < sizeof(*p)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve request: sampling.struct_size %u is below %zu",
                       p->struct_size, sizeof(*p));
  }
  if (!isfinite(p->temperature) || p->temperature < 0.0f) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve request: temperature %g must be finite and not "
                       "negative",
                       (double)p->temperature);
  }
  if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve request: top_p %g outside (0, 1]",
                       (double)p->top_p);
  }
  return ACCEL_OK;
}

accel_status_t accel_serve_submit(accel_serve_engine_t *engine,
                                  const accel_serve_request_desc_t *desc,
                                  uint64_t *out_id) {
  if (engine == NULL || desc == NULL || out_id == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve submit: engine, desc and out_id must not be "
                       "NULL");
  }
  ACCEL_RETURN_IF_ERROR(check_request(engine, desc));
  serve_request_t *r = calloc(1, sizeof(*r));
  int32_t *prompt = malloc(sizeof(int32_t) * desc->prompt_tokens);
  uint32_t cap = desc->max_new_tokens < 64 ? desc->max_new_tokens : 64;
  int32_t *out = malloc(sizeof(int32_t) * cap);
  if (r == NULL || prompt == NULL || out == NULL) {
    free(r);
    free(prompt);
    free(out);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "serve submit: cannot "
                       "allocate the request");
  }
  memcpy(prompt, desc->prompt, sizeof(int32_t) * desc->prompt_tokens);
  r->d = *desc;
  r->d.prompt = prompt;
  r->prompt = prompt;
  r->out = out;
  r->out_cap = cap;
  pthread_mutex_lock(&engine->mu);
  accel_status_t st = engine->failed;
  if (st != ACCEL_OK) {
    st = accel_error(st, "serve submit: the engine failed: %s",
                     engine->failed_msg);
  }
  if (st == ACCEL_OK) {
    st = serve_id_map_reserve(&engine->requests);
  }
  if (st == ACCEL_OK) {
    r->id = engine->next_id;
    st = id_list_push(&engine->pending, r->id);
  }
  if (st == ACCEL_OK) {
    engine->next_id++;
    serve_id_map_insert(&engine->requests, r->id, r);
    engine->work++;
    pthread_cond_broadcast(&engine->work_cv);
    *out_id = r->id;
  }
  pthread_mutex_unlock(&engine->mu);
  if (st != ACCEL_OK) {
    request_free(r);
  }
  return st;
}

accel_status_t accel_serve_release(accel_serve_engine_t *engine, uint64_t id) {
  if (engine == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve release: NULL engine");
  }
  pthread_mutex_lock(&engine->mu);
  serve_request_t *r = serve_id_map_find(&engine->requests, id);
  if (r == NULL) {
    pthread_mutex_unlock(&engine->mu);
    return accel_error(ACCEL_ERROR_NOT_FOUND, "serve release: no request %llu",
                       (unsigned long long)id);
  }
  accel_status_t st = ACCEL_OK;
  if (r->end == ACCEL_SERVE_END_NONE) {
    // Admitted or not, the step cancels it in the scheduler (a request
    // still pending is skipped there because its record is gone).
    st = id_list_push(&engine->cancels, id);
    if (st == ACCEL_OK) {
      engine->cancelled++;
    }
  }
  if (st == ACCEL_OK) {
    serve_id_map_remove(&engine->requests, id);
    request_free(r);
    engine->work++;
    pthread_cond_broadcast(&engine->work_cv);
    pthread_cond_broadcast(&engine->tokens_cv);
  }
  pthread_mutex_unlock(&engine->mu);
  return st;
}

static void deadline_after(struct timespec *ts, uint64_t timeout_ns) {
  clock_gettime(CLOCK_REALTIME, ts);
  uint64_t ns = (uint64_t)ts->tv_nsec + timeout_ns % 1000000000ull;
  ts->tv_sec += (time_t)(timeout_ns / 1000000000ull + ns / 1000000000ull);
  ts->tv_nsec = (long)(ns % 1000000000ull);
}

accel_status_t accel_serve_next(accel_serve_engine_t *engine, uint64_t id,
                                uint64_t timeout_ns, int32_t *out_token,
                                uint32_t *out_end) {
  if (engine == NULL || out_token == NULL || out_end == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve next: engine, out_token and out_end must not "
                       "be NULL");
  }
  struct timespec deadline;
  bool forever = timeout_ns == ACCEL_TIMEOUT_INFINITE;
  if (!forever) {
    deadline_after(&deadline, timeout_ns);
  }
  pthread_mutex_lock(&engine->mu);
  for (;;) {
    serve_request_t *r = serve_id_map_find(&engine->requests, id);
    if (r == NULL) {
      pthread_mutex_unlock(&engine->mu);
      return accel_error(ACCEL_ERROR_NOT_FOUND, "serve next: no request %llu",
                         (unsigned long long)id);
    }
    if (r->read < r->out_count) {
      *out_token = r->out[r->read++];
      *out_end = r->read == r->out_count ? r->end : ACCEL_SERVE_END_NONE;
      break;
    }
    if (r->end != ACCEL_SERVE_END_NONE) {
      *out_token = -1;
      *out_end = r->end;
      break;
    }
    int rc = forever ? pthread_cond_wait(&engine->tokens_cv, &engine->mu)
                     : pthread_cond_timedwait(&engine->tokens_cv, &engine->mu,
                                              &deadline);
    if (rc != 0) {
      pthread_mutex_unlock(&engine->mu);
      return accel_error(ACCEL_ERROR_TIMEOUT,
                         "serve next: no token of request %llu within %llu ns",
                         (unsigned long long)id,
                         (unsigned long long)timeout_ns);
    }
  }
  pthread_mutex_unlock(&engine->mu);
  return ACCEL_OK;
}

accel_status_t accel_serve_wait_work(accel_serve_engine_t *engine,
                                     uint64_t timeout_ns) {
  if (engine == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve wait work: NULL engine");
  }
  struct timespec deadline;
  deadline_after(&deadline, timeout_ns == ACCEL_TIMEOUT_INFINITE
                                ? 3600ull * 1000000000ull
                                : timeout_ns);
  pthread_mutex_lock(&engine->mu);
  uint64_t seen = engine->work;
  int rc = 0;
  while (engine->work == seen && engine->pending.count == 0 && rc == 0) {
    rc = pthread_cond_timedwait(&engine->work_cv, &engine->mu, &deadline);
  }
  bool woke = engine->work != seen || engine->pending.count > 0;
  pthread_mutex_unlock(&engine->mu);
  return woke ? ACCEL_OK
              : accel_error(ACCEL_ERROR_TIMEOUT,
                            "serve wait work: nothing submitted within %llu ns",
                            (unsigned long long)timeout_ns);
}

// ---------------------------------------------------------------------------
// The step
// ---------------------------------------------------------------------------

// Admits submitted requests and applies releases (mu held).
static accel_status_t admit_locked(accel_serve_engine_t *e) {
  ACCEL_ASSERT_HELD(&e->mu);
  for (uint32_t i = 0; i < e->cancels.count; ++i) {
    // NOT_FOUND: it finished, or was released before it was admitted.
    (void)accel_sched_cancel(e->sched, e->cancels.ids[i]);
  }
  e->cancels.count = 0;
  uint32_t i = 0;
  accel_status_t st = ACCEL_OK;
  for (; i < e->pending.count; ++i) {
    serve_request_t *r = serve_id_map_find(&e->requests, e->pending.ids[i]);
    if (r == NULL) {
      continue;  // released before admission
    }
    accel_sched_request_t sr = {.struct_size = sizeof(sr),
                                .priority = r->d.priority,
                                .id = r->id,
                                .prompt = r->prompt,
                                .prompt_tokens = r->d.prompt_tokens,
                                .max_new_tokens = r->d.max_new_tokens,
                                .eos_token = r->d.eos_token};
    st = accel_sched_add(e->sched, &sr);
    if (st == ACCEL_ERROR_OUT_OF_MEMORY) {
      break;  // the rest stay pending
    }
    if (st != ACCEL_OK) {
      // The scheduler refused this request (submit checks what it can, so
      // this is a limit only the scheduler knows): end it, keep serving.
      r->end = ACCEL_SERVE_END_ERROR;
      pthread_cond_broadcast(&e->tokens_cv);
      st = ACCEL_OK;
    }
  }
  if (i != 0 && e->pending.count > i) {  // (never memmove a NULL array)
    memmove(e->pending.ids, e->pending.ids + i,
            sizeof(uint64_t) * (e->pending.count - i));
  }
  e->pending.count -= i;
  return st;
}

static void refresh_stats_locked(accel_serve_engine_t *e) {
  ACCEL_ASSERT_HELD(&e->mu);
  accel_sched_stats_t ss = {.struct_size = sizeof(ss)};
  accel_kv_cache_stats_t ks = {.struct_size = sizeof(ks)};
  (void)accel_sched_stats(e->sched, &ss);
  (void)accel_kv_cache_stats(e->cache, &ks);
  accel_serve_stats_t *v = &e->sched_view;
  v->waiting = ss.waiting;
  v->running = ss.running;
  v->swapped = ss.swapped;
  v->kv_used_blocks = ks.used_blocks;
  v->kv_cached_blocks = ks.cached_blocks;
  v->kv_free_blocks = ks.free_blocks;
  v->kv_token_slots = ks.token_slots;
  v->kv_tokens = ks.tokens;
  v->prefix_queries = ks.prefix_queries;
  v->prefix_hits = ks.prefix_hits;
  v->steps = ss.steps;
  v->preemptions = ss.preemptions;
  v->prefill_tokens = ss.prefill_tokens;
  v->decode_tokens = ss.decode_tokens;
  serve_model_counters_t mc;
  serve_model_counters(e->model, &mc);
  v->steps_direct = mc.steps_direct;
  v->steps_recorded = mc.steps_recorded;
  v->steps_replayed = mc.steps_replayed;
  v->step_host_ns = mc.issue_ns;
  v->command_buffers = mc.command_buffers;
  v->failed_steps = e->failed_steps;
}

// Appends a token to |r|'s stream (mu held).
static void push_token_locked(accel_serve_engine_t *e, serve_request_t *r,
                              int32_t token) {
  ACCEL_ASSERT_HELD(&e->mu);
  if (r->out_count == r->out_cap) {
    uint32_t cap = r->out_cap * 2;
    cap = cap > r->d.max_new_tokens ? r->d.max_new_tokens : cap;
    int32_t *out = realloc(r->out, sizeof(int32_t) * cap);
    if (out == NULL) {
      // The stream cannot grow: end it rather than lose tokens silently.
      r->end = ACCEL_SERVE_END_ERROR;
      return;
    }
    r->out = out;
    r->out_cap = cap;
  }
  r->out[r->out_count++] = token;
}

// Fails every unfinished request after a device failure (mu held).
static void fail_all_locked(accel_serve_engine_t *e, accel_status_t st) {
  ACCEL_ASSERT_HELD(&e->mu);
  e->failed = st;
  snprintf(e->failed_msg, sizeof(e->failed_msg), "%s", accel_last_error());
  for (uint32_t i = 0; i <= e->requests.mask; ++i) {
    serve_request_t *r = e->requests.values[i];
    if (r != NULL && r->end == ACCEL_SERVE_END_NONE) {
      r->end = ACCEL_SERVE_END_ERROR;
    }
  }
  pthread_cond_broadcast(&e->tokens_cv);
}

// Ends |id| with ACCEL_SERVE_END_ERROR and drops it from the scheduler (mu
// held); returns 1 if it was still running, else 0.
static uint32_t fail_request_locked(accel_serve_engine_t *e, uint64_t id) {
  ACCEL_ASSERT_HELD(&e->mu);
  // NOT_FOUND: released and cancelled already.
  (void)accel_sched_cancel(e->sched, id);
  serve_request_t *r = serve_id_map_find(&e->requests, id);
  if (r == NULL || r->end != ACCEL_SERVE_END_NONE) {
    return 0;
  }
  r->end = ACCEL_SERVE_END_ERROR;
  return 1;
}

// A step whose commands failed, on a stream the runner has replaced: ends
// the step's requests (its entries, and the sequences it swapped out, whose
// host copies may be incomplete) and completes the plan, which then has
// nothing left to complete (mu held). Returns how many requests ended.
static uint32_t fail_step_locked(accel_serve_engine_t *e,
                                 const accel_sched_plan_t *plan) {
  ACCEL_ASSERT_HELD(&e->mu);
  uint32_t n = 0, samples = 0;
  for (uint32_t i = 0; i < plan->entry_count; ++i) {
    n += fail_request_locked(e, plan->entries[i].id);
    samples += plan->entries[i].sample;
  }
  if (e->flags & ACCEL_SERVE_PREEMPT_SWAP) {
    for (uint32_t i = 0; i < plan->preempted_count; ++i) {
      n += fail_request_locked(e, plan->preempted[i]);
    }
  }
  memset(e->sampled, 0, sizeof(int32_t) * samples);
  uint32_t finished = 0;
  // Every entry was cancelled: this only ends the plan (none to end when
  // the plan had no entries).
  (void)accel_sched_complete(e->sched, e->sampled, samples, e->done, 0,
                             &finished);
  e->failed_steps++;
  pthread_cond_broadcast(&e->tokens_cv);
  return n;
}

// Samples every sampling entry's token (mu held: the records' parameters).
static accel_status_t sample_locked(accel_serve_engine_t *e,
                                    const accel_sched_plan_t *plan,
                                    uint32_t *out_samples) {
  ACCEL_ASSERT_HELD(&e->mu);
  uint32_t s = 0;
  for (uint32_t i = 0; i < plan->entry_count; ++i) {
    const accel_sched_entry_t *en = &plan->entries[i];
    if (!en->sample) {
      continue;
    }
    serve_request_t *r = serve_id_map_find(&e->requests, en->id);
    int32_t token = 0;
    if (r != NULL) {
      const float *row = e->logits + (uint64_t)s * e->info.vocab;
      ACCEL_RETURN_IF_ERROR(accel_sample(row, e->info.vocab, &r->d.sampling,
                                         r->out_count, &token));
    }
    // A record released during the step still completes (its token is
    // never delivered); the next step cancels it.
    e->sampled[s] = token;
    e->sampled_ids[s] = en->id;
    ++s;
  }
  *out_samples = s;
  return ACCEL_OK;
}

// Completes the plan and collects the deliveries (mu held).
static accel_status_t complete_locked(accel_serve_engine_t *e,
                                      const accel_sched_plan_t *plan,
                                      uint32_t samples,
                                      uint32_t *out_deliveries) {
  ACCEL_ASSERT_HELD(&e->mu);
  uint32_t finished = 0;
  *out_deliveries = 0;
  if (plan->entry_count == 0) {
    return ACCEL_OK;  // an empty plan has nothing to complete
  }
  ACCEL_RETURN_IF_ERROR(accel_sched_complete(e->sched, e->sampled, samples,
                                             e->done, samples, &finished));
  uint32_t n = 0;
  for (uint32_t s = 0; s < samples; ++s) {
    serve_request_t *r = serve_id_map_find(&e->requests, e->sampled_ids[s]);
    if (r == NULL) {
      continue;
    }
    uint32_t end = ACCEL_SERVE_END_NONE;
    for (uint32_t f = 0; f < finished; ++f) {
      if (e->done[f].id == r->id) {
        end = e->done[f].reason == 1 ? ACCEL_SERVE_END_EOS
                                     : ACCEL_SERVE_END_LENGTH;
        e->finished++;
      }
    }
    uint32_t index = r->out_count;
    push_token_locked(e, r, e->sampled[s]);
    if (r->end == ACCEL_SERVE_END_NONE) {
      r->end = end;
    }
    e->generated++;
    if (r->d.on_token != NULL) {
      e->deliver[n] = (accel_serve_token_t){
          .id = r->id, .token = e->sampled[s], .index = index, .end = r->end,
          .vocab = e->info.vocab,
          .logits = e->logits + (uint64_t)s * e->info.vocab};
      e->calls[n].fn = r->d.on_token;
      e->calls[n].user = r->d.user;
      ++n;
    }
  }
  pthread_cond_broadcast(&e->tokens_cv);
  *out_deliveries = n;
  return ACCEL_OK;
}

accel_status_t accel_serve_step(accel_serve_engine_t *engine,
                                uint32_t *out_pending) {
  if (engine == NULL || out_pending == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve step: engine and out_pending must not be NULL");
  }
  accel_serve_engine_t *e = engine;
  pthread_mutex_lock(&e->mu);
  accel_status_t st = e->failed;
  if (st != ACCEL_OK) {
    st = accel_error(st, "serve step: the engine failed: %s", e->failed_msg);
    pthread_mutex_unlock(&e->mu);
    return st;
  }
  st = admit_locked(e);
  accel_sched_plan_t plan;
  if (st == ACCEL_OK) {
    st = accel_sched_step(e->sched, &plan);
  }
  pthread_mutex_unlock(&e->mu);
  if (st != ACCEL_OK) {
    return st;
  }
  st = serve_model_run(e->model, &plan, e->logits);
  char why[256] = "";
  accel_status_t recovered = ACCEL_ERROR_INTERNAL;
  if (st != ACCEL_OK) {
    snprintf(why, sizeof(why), "%s", accel_last_error());
    recovered = serve_model_recover(e->model, st);
  }
  uint32_t samples = 0, deliveries = 0;
  pthread_mutex_lock(&e->mu);
  if (st == ACCEL_OK) {
    st = sample_locked(e, &plan, &samples);
  }
  if (st == ACCEL_OK) {
    st = complete_locked(e, &plan, samples, &deliveries);
  }
  if (st != ACCEL_OK && recovered == ACCEL_OK) {
    uint32_t n = fail_step_locked(e, &plan);
    st = accel_error(st,
                     "serve step: %u request%s failed (the engine goes on): "
                     "%s",
                     n, n == 1 ? "" : "s", why);
  } else if (st != ACCEL_OK) {
    if (why[0] != '\0') {
      (void)accel_error(st, "%s", why);  // the step's failure, not recovery's
    }
    fail_all_locked(e, st);
  }
  refresh_stats_locked(e);
  accel_serve_stats_t *v = &e->sched_view;
  uint32_t pending = v->waiting + v->running + v->swapped + e->pending.count;
  pthread_mutex_unlock(&e->mu);
  for (uint32_t i = 0; i < deliveries; ++i) {
    e->calls[i].fn(e->calls[i].user, &e->deliver[i]);
  }
  if (st == ACCEL_OK) {
    *out_pending = pending;
  }
  return st;
}

accel_status_t accel_serve_stats(const accel_serve_engine_t *engine,
                                 accel_serve_stats_t *out) {
  if (engine == NULL || out == NULL || out->struct_size < sizeof(*out)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve stats: NULL argument or short struct_size");
  }
  accel_serve_engine_t *e = (accel_serve_engine_t *)engine;
  pthread_mutex_lock(&e->mu);
  accel_serve_stats_t v = e->sched_view;
  v.struct_size = sizeof(v);
  v.waiting += e->pending.count;
  v.requests = e->requests.count;
  v.generated_tokens = e->generated;
  v.finished = e->finished;
  v.cancelled = e->cancelled;
  pthread_mutex_unlock(&e->mu);
  *out = v;
  return ACCEL_OK;
}
