// The serving scheduler (include/accel/scheduler.h, docs/serving.md).
//
// Requests are waiting (sorted by priority, then arrival), running (in
// admission order), swapped, or finished (kept until cancelled, so that
// their tokens can be read). A request's |tokens| hold its prompt and what
// it generated; |kv_tokens| of them have a slot in the KV cache and
// |computed| of those have their KV written. A step schedules running
// sequences first (appending the token sampled last step to the cache,
// preempting the lowest-priority, latest-admitted sequence not yet
// scheduled when blocks run out), then, if nobody was preempted, swapped
// sequences and waiting prompts in order, stopping at the first that does
// not fit (no overtaking within a priority, so nobody starves).
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "accel/scheduler.h"
#include "core/error.h"
#include "serve/id_map.h"

typedef enum req_state {
  REQ_WAITING,
  REQ_RUNNING,
  REQ_SWAPPED,
  REQ_FINISHED,
} req_state_t;

typedef struct req {
  uint64_t id;
  int32_t priority;
  uint64_t arrival;   // order of accel_sched_add
  uint64_t admitted;  // order of admission to running (victim choice)
  req_state_t state;
  int32_t *tokens;
  uint32_t count, cap;
  uint32_t prompt_tokens;
  uint32_t max_new, generated;
  int32_t eos;
  uint32_t kv_tokens;  // tokens with a slot in the cache
  uint32_t computed;   // of those, KV written
} req_t;

// A growable array of |T|.
#define VEC(T) \
  struct {     \
    T *v;      \
    uint32_t n, cap; \
  }

typedef VEC(req_t *) req_vec_t;
typedef VEC(accel_kv_copy_t) copy_vec_t;

struct accel_sched {
  accel_sched_desc_t desc;
  accel_kv_cache_t *cache;
  serve_id_map_t reqs;  // req_t by id
  req_vec_t waiting, running, swapped;
  uint64_t arrivals, admissions;
  // The pending plan.
  bool pending;
  VEC(accel_sched_entry_t) entries;
  VEC(uint32_t) tables;       // every entry's block table, back to back
  VEC(uint32_t) table_first;  // where each entry's table starts
  copy_vec_t swap_out, swap_in, copy;
  VEC(uint64_t) preempted;
  VEC(accel_sched_finished_t) finished;
  accel_sched_stats_t stats;
};

// Makes room for |more| elements in the vector at |vec| (elements of |size|
// bytes).
static accel_status_t vec_room(void *vec, size_t size, uint32_t more) {
  struct {
    void *v;
    uint32_t n, cap;
  } *w = vec;
  if (w->n + more <= w->cap) {
    return ACCEL_OK;
  }
  uint32_t cap = w->cap ? w->cap : 16;
  while (cap < w->n + more) {
    cap *= 2;
  }
  void *grown = realloc(w->v, (size_t)cap * size);
  if (grown == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "scheduler: cannot grow a list to %u entries", cap);
  }
  w->v = grown;
  w->cap = cap;
  return ACCEL_OK;
}

#define VEC_PUSH(vec, value)                                          \
  (vec_room(&(vec), sizeof(*(vec).v), 1) == ACCEL_OK                  \
       ? ((vec).v[(vec).n++] = (value), ACCEL_OK)                     \
       : ACCEL_ERROR_OUT_OF_MEMORY)

static void vec_remove(req_vec_t *q, const req_t *r) {
  for (uint32_t i = 0; i < q->n; ++i) {
    if (q->v[i] == r) {
      memmove(&q->v[i], &q->v[i + 1], (q->n - i - 1) * sizeof(q->v[0]));
      q->n--;
      return;
    }
  }
}

// True when |a| runs before |b|: higher priority, then earlier arrival.
static bool before(const req_t *a, const req_t *b) {
  return a->priority != b->priority ? a->priority > b->priority
                                    : a->arrival < b->arrival;
}

// Inserts |r| into |q| in priority-then-arrival order.
static accel_status_t insert_ordered(req_vec_t *q, req_t *r) {
  ACCEL_RETURN_IF_ERROR(vec_room(q, sizeof(q->v[0]), 1));
  uint32_t i = q->n;
  while (i > 0 && before(r, q->v[i - 1])) {
    q->v[i] = q->v[i - 1];
    --i;
  }
  q->v[i] = r;
  q->n++;
  return ACCEL_OK;
}

accel_status_t accel_sched_create(const accel_sched_desc_t *desc,
                                  accel_kv_cache_t *cache,
                                  accel_sched_t **out) {
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  ACCEL_CHECK_ARG(cache != NULL, "cache (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out (NULL)");
  if (desc->struct_size < sizeof(*desc) || desc->max_step_tokens == 0 ||
      desc->max_step_seqs == 0 ||
      (desc->flags & ~(uint32_t)ACCEL_SCHED_CHUNKED_PREFILL) != 0 ||
      desc->preempt > ACCEL_SCHED_PREEMPT_SWAP || desc->reserved0 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "scheduler: invalid desc (struct_size %u, budget %u "
                       "tokens, %u sequences, flags 0x%x, preempt %u)",
                       desc->struct_size, desc->max_step_tokens,
                       desc->max_step_seqs, desc->flags, desc->preempt);
  }
  accel_kv_cache_stats_t ks = {.struct_size = sizeof(ks)};
  ACCEL_RETURN_IF_ERROR(accel_kv_cache_stats(cache, &ks));
  if (desc->preempt == ACCEL_SCHED_PREEMPT_SWAP && ks.host_blocks == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "scheduler: swap preemption needs a KV cache with "
                       "host blocks");
  }
  accel_sched_t *s = calloc(1, sizeof(*s));
  if (s == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "scheduler: allocate");
  }
  s->desc = *desc;
  s->cache = cache;
  accel_status_t st = serve_id_map_init(&s->reqs);
  if (st != ACCEL_OK) {
    free(s);
    return st;
  }
  *out = s;
  return ACCEL_OK;
}

static void req_destroy(req_t *r) {
  if (r != NULL) {
    free(r->tokens);
    free(r);
  }
}

void accel_sched_destroy(accel_sched_t *s) {
  if (s == NULL) {
    return;
  }
  for (uint32_t i = 0; i <= s->reqs.mask; ++i) {
    req_t *r = s->reqs.values[i];
    if (r != NULL) {
      if (r->state == REQ_RUNNING || r->state == REQ_SWAPPED) {
        (void)accel_kv_cache_free(s->cache, r->id);
      }
      req_destroy(r);
    }
  }
  serve_id_map_fini(&s->reqs);
  free(s->waiting.v);
  free(s->running.v);
  free(s->swapped.v);
  free(s->entries.v);
  free(s->tables.v);
  free(s->table_first.v);
  free(s->swap_out.v);
  free(s->swap_in.v);
  free(s->copy.v);
  free(s->preempted.v);
  free(s->finished.v);
  free(s);
}

// The cache's shape and occupancy now.
static accel_kv_cache_stats_t kv_geometry(const accel_sched_t *s) {
  accel_kv_cache_stats_t ks = {.struct_size = sizeof(ks)};
  (void)accel_kv_cache_stats(s->cache, &ks);  // cannot fail: valid args
  return ks;
}

// Blocks that hold |tokens| tokens.
static uint32_t blocks_of(const accel_sched_t *s, uint32_t tokens) {
  uint32_t bt = kv_geometry(s).block_tokens;
  return (tokens + bt - 1) / bt;
}

accel_status_t accel_sched_add(accel_sched_t *s,
                               const accel_sched_request_t *q) {
  ACCEL_CHECK_ARG(s != NULL, "sched (NULL)");
  ACCEL_CHECK_ARG(q != NULL, "request (NULL)");
  if (q->struct_size < sizeof(*q) || q->prompt == NULL ||
      q->prompt_tokens == 0 || q->max_new_tokens == 0 || q->reserved0 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "scheduler: request %llu: invalid (struct_size %u, "
                       "%u prompt tokens, max_new_tokens %u)",
                       (unsigned long long)q->id, q->struct_size,
                       q->prompt_tokens, q->max_new_tokens);
  }
  if (serve_id_map_find(&s->reqs, q->id) != NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "scheduler: request %llu already exists",
                       (unsigned long long)q->id);
  }
  if ((s->desc.flags & ACCEL_SCHED_CHUNKED_PREFILL) == 0 &&
      q->prompt_tokens > s->desc.max_step_tokens) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "scheduler: request %llu: a prompt of %u tokens is "
                       "over the step budget of %u without chunked prefill",
                       (unsigned long long)q->id, q->prompt_tokens,
                       s->desc.max_step_tokens);
  }
  uint64_t total = (uint64_t)q->prompt_tokens + q->max_new_tokens;
  uint64_t slots = (uint64_t)kv_geometry(s).device_blocks *
                   kv_geometry(s).block_tokens;
  if (total > slots) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "scheduler: request %llu needs %llu tokens of KV, "
                       "more than the cache holds (%llu)",
                       (unsigned long long)q->id, (unsigned long long)total,
                       (unsigned long long)slots);
  }
  if (total > UINT32_MAX) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "scheduler: request %llu: %llu tokens",
                       (unsigned long long)q->id, (unsigned long long)total);
  }
  req_t *r = calloc(1, sizeof(*r));
  uint32_t cap = q->prompt_tokens + 16;
  int32_t *tokens = malloc((size_t)cap * sizeof(int32_t));
  accel_status_t st = r != NULL && tokens != NULL
                          ? serve_id_map_reserve(&s->reqs)
                          : ACCEL_ERROR_OUT_OF_MEMORY;
  if (st == ACCEL_OK) {
    st = vec_room(&s->waiting, sizeof(s->waiting.v[0]), 1);
  }
  if (st != ACCEL_OK) {
    free(r);
    free(tokens);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "scheduler: cannot queue request %llu",
                       (unsigned long long)q->id);
  }
  memcpy(tokens, q->prompt, (size_t)q->prompt_tokens * sizeof(int32_t));
  *r = (req_t){.id = q->id,
               .priority = q->priority,
               .arrival = s->arrivals++,
               .state = REQ_WAITING,
               .tokens = tokens,
               .count = q->prompt_tokens,
               .cap = cap,
               .prompt_tokens = q->prompt_tokens,
               .max_new = q->max_new_tokens,
               .eos = q->eos_token};
  serve_id_map_insert(&s->reqs, r->id, r);
  (void)insert_ordered(&s->waiting, r);  // room reserved above
  return ACCEL_OK;
}

// Takes |r| out of whatever queue holds it and out of the cache.
static void release_request(accel_sched_t *s, req_t *r) {
  if (r->state == REQ_WAITING) {
    vec_remove(&s->waiting, r);
  } else if (r->state == REQ_RUNNING || r->state == REQ_SWAPPED) {
    vec_remove(r->state == REQ_RUNNING ? &s->running : &s->swapped, r);
    (void)accel_kv_cache_free(s->cache, r->id);
  }
}

accel_status_t accel_sched_cancel(accel_sched_t *s, uint64_t id) {
  ACCEL_CHECK_ARG(s != NULL, "sched (NULL)");
  req_t *r = serve_id_map_find(&s->reqs, id);
  if (r == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND, "scheduler: no request %llu",
                       (unsigned long long)id);
  }
  if (r->state != REQ_FINISHED) {
    s->stats.cancelled++;
  }
  release_request(s, r);
  serve_id_map_remove(&s->reqs, id);
  req_destroy(r);
  return ACCEL_OK;
}

// Preempts |v| (running, not scheduled in this step): by swap when so
// configured and host blocks allow, else by recompute.
static accel_status_t preempt(accel_sched_t *s, req_t *v) {
  vec_remove(&s->running, v);
  ACCEL_RETURN_IF_ERROR(VEC_PUSH(s->preempted, v->id));
  s->stats.preemptions++;
  if (s->desc.preempt == ACCEL_SCHED_PREEMPT_SWAP) {
    uint32_t blocks = blocks_of(s, v->kv_tokens);
    ACCEL_RETURN_IF_ERROR(
        vec_room(&s->swap_out, sizeof(accel_kv_copy_t), blocks));
    uint32_t n = 0;
    accel_status_t st = accel_kv_cache_swap_out(
        s->cache, v->id, s->swap_out.v + s->swap_out.n, blocks, &n);
    if (st == ACCEL_OK) {
      s->swap_out.n += n;
      v->state = REQ_SWAPPED;
      s->stats.swaps_out++;
      return VEC_PUSH(s->swapped, v);
    }
    if (st != ACCEL_ERROR_OUT_OF_MEMORY) {
      return st;
    }
    // No host room: recompute instead.
  }
  ACCEL_RETURN_IF_ERROR(accel_kv_cache_free(s->cache, v->id));
  v->kv_tokens = 0;
  v->computed = 0;
  v->state = REQ_WAITING;
  return insert_ordered(&s->waiting, v);
}

// Adds |r|'s entry for |count| tokens from |r->computed|.
static accel_status_t add_entry(accel_sched_t *s, req_t *r, uint32_t count) {
  uint32_t blocks = 0;
  ACCEL_RETURN_IF_ERROR(
      accel_kv_cache_block_table(s->cache, r->id, NULL, 0, &blocks, NULL));
  ACCEL_RETURN_IF_ERROR(vec_room(&s->tables, sizeof(uint32_t), blocks));
  ACCEL_RETURN_IF_ERROR(VEC_PUSH(s->table_first, s->tables.n));
  ACCEL_RETURN_IF_ERROR(accel_kv_cache_block_table(
      s->cache, r->id, s->tables.v + s->tables.n, blocks, &blocks, NULL));
  s->tables.n += blocks;
  accel_sched_entry_t e = {.id = r->id,
                           .tokens = r->tokens,
                           .start = r->computed,
                           .count = count,
                           .blocks = blocks,
                           .sample = r->computed + count == r->count};
  return VEC_PUSH(s->entries, e);
}

// Gives every token of |r| a KV slot (the token sampled last step), copying
// on write where needed. ACCEL_ERROR_OUT_OF_MEMORY when no block is left.
static accel_status_t append_pending(accel_sched_t *s, req_t *r) {
  while (r->kv_tokens < r->count) {
    accel_kv_copy_t copy;
    uint32_t copied = 0;
    ACCEL_RETURN_IF_ERROR(accel_kv_cache_append(
        s->cache, r->id, r->tokens[r->kv_tokens], &copy, &copied));
    r->kv_tokens++;
    if (copied) {
      ACCEL_RETURN_IF_ERROR(VEC_PUSH(s->copy, copy));
    }
  }
  return ACCEL_OK;
}

// The tokens |r| computes this step within |budget|, or 0 to skip it.
static uint32_t step_tokens(const accel_sched_t *s, const req_t *r,
                            uint32_t budget) {
  uint32_t pending = r->count - r->computed;
  if (pending <= budget) {
    return pending;
  }
  // A sequence preempted by recompute refills in chunks whatever the flag:
  // its prompt and generated tokens together may exceed any budget.
  bool chunk = (s->desc.flags & ACCEL_SCHED_CHUNKED_PREFILL) != 0 ||
               r->generated != 0;
  return chunk ? budget : 0;
}

static int compare_running(const void *a, const void *b) {
  const req_t *x = *(req_t *const *)a, *y = *(req_t *const *)b;
  if (x->priority != y->priority) {
    return x->priority > y->priority ? -1 : 1;
  }
  return x->admitted < y->admitted ? -1 : x->admitted > y->admitted;
}

// Schedules the running sequences; sets |*preempted| when blocks ran out.
static accel_status_t schedule_running(accel_sched_t *s, uint32_t *budget,
                                       uint32_t *seqs, bool *preempted) {
  if (s->running.n > 1) {  // (qsort may not be given a NULL array)
    qsort(s->running.v, s->running.n, sizeof(req_t *), compare_running);
  }
  for (uint32_t i = 0; i < s->running.n && *budget != 0 && *seqs != 0;) {
    req_t *r = s->running.v[i];
    accel_status_t st = append_pending(s, r);
    if (st == ACCEL_ERROR_OUT_OF_MEMORY) {
      // The last running sequence not yet scheduled gives way: another, or
      // this one itself.
      req_t *victim = s->running.v[s->running.n - 1];
      *preempted = true;
      ACCEL_RETURN_IF_ERROR(preempt(s, victim));
      continue;  // retry |r|, or (|r| was the victim) the next at |i|
    }
    ACCEL_RETURN_IF_ERROR(st);
    uint32_t n = step_tokens(s, r, *budget);
    if (n != 0) {
      ACCEL_RETURN_IF_ERROR(add_entry(s, r, n));
      *budget -= n;
      (*seqs)--;
    }
    ++i;
  }
  return ACCEL_OK;
}

// Brings swapped sequences back while device blocks allow.
static accel_status_t schedule_swapped(accel_sched_t *s, uint32_t *budget,
                                       uint32_t *seqs) {
  while (s->swapped.n != 0 && *budget != 0 && *seqs != 0) {
    req_t *r = s->swapped.v[0];
    accel_kv_cache_stats_t ks = kv_geometry(s);
    // Its blocks, and room for the tokens it appends now.
    uint32_t blocks = blocks_of(s, r->kv_tokens);
    if (blocks_of(s, r->count) > ks.free_blocks + ks.cached_blocks ||
        step_tokens(s, r, *budget) == 0) {
      break;
    }
    ACCEL_RETURN_IF_ERROR(
        vec_room(&s->swap_in, sizeof(accel_kv_copy_t), blocks));
    uint32_t n = 0;
    accel_status_t st = accel_kv_cache_swap_in(
        s->cache, r->id, s->swap_in.v + s->swap_in.n, blocks, &n);
    if (st == ACCEL_ERROR_OUT_OF_MEMORY) {
      break;
    }
    ACCEL_RETURN_IF_ERROR(st);
    s->swap_in.n += n;
    s->stats.swaps_in++;
    vec_remove(&s->swapped, r);
    r->state = REQ_RUNNING;
    ACCEL_RETURN_IF_ERROR(VEC_PUSH(s->running, r));
    st = append_pending(s, r);
    if (st == ACCEL_ERROR_OUT_OF_MEMORY) {
      break;  // runs next step
    }
    ACCEL_RETURN_IF_ERROR(st);
    uint32_t t = step_tokens(s, r, *budget);
    ACCEL_RETURN_IF_ERROR(add_entry(s, r, t));
    *budget -= t;
    (*seqs)--;
  }
  return ACCEL_OK;
}

// Admits waiting prompts in order while they fit.
static accel_status_t schedule_waiting(accel_sched_t *s, uint32_t *budget,
                                       uint32_t *seqs) {
  while (s->waiting.n != 0 && *budget != 0 && *seqs != 0) {
    req_t *r = s->waiting.v[0];
    if (!accel_kv_cache_can_add(s->cache, r->tokens, r->count)) {
      break;  // first come, first served: nobody overtakes it
    }
    uint32_t cached = 0;
    accel_status_t st =
        accel_kv_cache_add(s->cache, r->id, r->tokens, r->count, &cached);
    if (st == ACCEL_ERROR_OUT_OF_MEMORY) {
      break;
    }
    ACCEL_RETURN_IF_ERROR(st);
    r->kv_tokens = r->count;
    r->computed = cached;
    uint32_t n = step_tokens(s, r, *budget);
    if (n == 0) {  // does not fit this step's budget unchunked
      ACCEL_RETURN_IF_ERROR(accel_kv_cache_free(s->cache, r->id));
      r->kv_tokens = r->computed = 0;
      break;
    }
    ACCEL_RETURN_IF_ERROR(vec_room(&s->running, sizeof(req_t *), 1));
    vec_remove(&s->waiting, r);
    r->state = REQ_RUNNING;
    r->admitted = s->admissions++;
    s->running.v[s->running.n++] = r;
    ACCEL_RETURN_IF_ERROR(add_entry(s, r, n));
    *budget -= n;
    (*seqs)--;
  }
  return ACCEL_OK;
}

accel_status_t accel_sched_step(accel_sched_t *s, accel_sched_plan_t *out) {
  ACCEL_CHECK_ARG(s != NULL, "sched (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out (NULL)");
  if (s->pending) {
    return accel_error(ACCEL_ERROR_BUSY,
                       "scheduler: the previous step's plan was not "
                       "completed");
  }
  s->entries.n = s->tables.n = s->table_first.n = 0;
  s->swap_out.n = s->swap_in.n = s->copy.n = s->preempted.n = 0;
  uint32_t budget = s->desc.max_step_tokens;
  uint32_t seqs = s->desc.max_step_seqs;
  bool preempted = false;
  ACCEL_RETURN_IF_ERROR(schedule_running(s, &budget, &seqs, &preempted));
  if (!preempted) {
    ACCEL_RETURN_IF_ERROR(schedule_swapped(s, &budget, &seqs));
    ACCEL_RETURN_IF_ERROR(schedule_waiting(s, &budget, &seqs));
  }
  for (uint32_t i = 0; i < s->entries.n; ++i) {
    s->entries.v[i].block_table = s->tables.v + s->table_first.v[i];
  }
  *out = (accel_sched_plan_t){
      .entries = s->entries.v,
      .entry_count = s->entries.n,
      .tokens = s->desc.max_step_tokens - budget,
      .swap_out = s->swap_out.v,
      .swap_out_count = s->swap_out.n,
      .swap_in = s->swap_in.v,
      .swap_in_count = s->swap_in.n,
      .copy = s->copy.v,
      .copy_count = s->copy.n,
      .preempted = s->preempted.v,
      .preempted_count = s->preempted.n};
  s->pending = s->entries.n != 0;
  if (s->pending) {
    s->stats.steps++;
  }
  return ACCEL_OK;
}

// Appends |token| to |r|'s tokens.
static accel_status_t push_token(req_t *r, int32_t token) {
  if (r->count == r->cap) {
    uint32_t cap = r->cap * 2;
    int32_t *grown = realloc(r->tokens, (size_t)cap * sizeof(int32_t));
    if (grown == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "scheduler: request %llu: %u tokens",
                         (unsigned long long)r->id, cap);
    }
    r->tokens = grown;
    r->cap = cap;
  }
  r->tokens[r->count++] = token;
  return ACCEL_OK;
}

accel_status_t accel_sched_complete(accel_sched_t *s, const int32_t *tokens,
                                    uint32_t count,
                                    accel_sched_finished_t *finished,
                                    uint32_t capacity,
                                    uint32_t *out_finished) {
  ACCEL_CHECK_ARG(s != NULL, "sched (NULL)");
  ACCEL_CHECK_ARG(tokens != NULL || count == 0, "tokens (NULL)");
  ACCEL_CHECK_ARG(out_finished != NULL, "out_finished (NULL)");
  ACCEL_CHECK_ARG(finished != NULL || capacity == 0, "finished (NULL)");
  if (!s->pending) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "scheduler: no step to complete");
  }
  uint32_t samples = 0;
  for (uint32_t i = 0; i < s->entries.n; ++i) {
    samples += s->entries.v[i].sample;
  }
  if (count != samples) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "scheduler: %u sampled tokens for a step with %u "
                       "sampling entries",
                       count, samples);
  }
  s->finished.n = 0;
  uint32_t k = 0;
  for (uint32_t i = 0; i < s->entries.n; ++i) {
    const accel_sched_entry_t *e = &s->entries.v[i];
    int32_t token = e->sample ? tokens[k++] : 0;
    req_t *r = serve_id_map_find(&s->reqs, e->id);
    if (r == NULL || r->state != REQ_RUNNING) {
      continue;  // cancelled since the step
    }
    r->computed = e->start + e->count;
    uint32_t prompt_part =
        e->start < r->prompt_tokens
            ? (r->computed < r->prompt_tokens ? r->computed : r->prompt_tokens) -
                  e->start
            : 0;
    s->stats.prefill_tokens += prompt_part;
    s->stats.decode_tokens += e->count - prompt_part;
    ACCEL_RETURN_IF_ERROR(
        accel_kv_cache_set_computed(s->cache, r->id, r->computed));
    if (!e->sample) {
      continue;
    }
    ACCEL_RETURN_IF_ERROR(push_token(r, token));
    r->generated++;
    bool eos = r->eos >= 0 && token == r->eos;
    if (r->generated >= r->max_new || eos) {
      release_request(s, r);
      r->state = REQ_FINISHED;
      s->stats.finished++;
      accel_sched_finished_t f = {.id = r->id,
                                  .generated = r->generated,
                                  .reason = eos ? 1u : 0u};
      ACCEL_RETURN_IF_ERROR(VEC_PUSH(s->finished, f));
    }
  }
  s->pending = false;
  uint32_t n = s->finished.n < capacity ? s->finished.n : capacity;
  if (n != 0) {
    memcpy(finished, s->finished.v, (size_t)n * sizeof(*finished));
  }
  *out_finished = s->finished.n;
  return ACCEL_OK;
}

accel_status_t accel_sched_tokens(const accel_sched_t *s, uint64_t id,
                                  const int32_t **out_tokens,
                                  uint32_t *out_count,
                                  uint32_t *out_prompt_tokens) {
  ACCEL_CHECK_ARG(s != NULL, "sched (NULL)");
  req_t *r = serve_id_map_find(&s->reqs, id);
  if (r == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND, "scheduler: no request %llu",
                       (unsigned long long)id);
  }
  if (out_tokens != NULL) {
    *out_tokens = r->tokens;
  }
  if (out_count != NULL) {
    *out_count = r->count;
  }
  if (out_prompt_tokens != NULL) {
    *out_prompt_tokens = r->prompt_tokens;
  }
  return ACCEL_OK;
}

accel_status_t accel_sched_stats(const accel_sched_t *s,
                                 accel_sched_stats_t *out) {
  ACCEL_CHECK_ARG(s != NULL, "sched (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out (NULL)");
  if (out->struct_size < sizeof(*out)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "scheduler: stats struct_size %u, expected %zu",
                       out->struct_size, sizeof(*out));
  }
  accel_sched_stats_t st = s->stats;
  st.struct_size = sizeof(st);
  st.waiting = s->waiting.n;
  st.running = s->running.n;
  st.swapped = s->swapped.n;
  *out = st;
  return ACCEL_OK;
}
