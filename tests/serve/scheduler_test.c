// The scheduler driven as a model runner drives it, with a fake model and a
// simulated KV store: every step the test runs the plan's copies in the
// documented order, checks that each entry can read the right KV for every
// earlier token through its block table (so block tables, prefix hits,
// copy-on-write and swaps are all checked together), writes the entry's
// KV, and samples with a deterministic model. Every request must produce
// exactly the tokens it produces alone, whatever preemption, swapping,
// chunking and cancellations happened, and the cache must end empty.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "accel/scheduler.h"

enum { BT = 4, DEVICE_BLOCKS = 40, HOST_BLOCKS = 40, MAX_REQS = 64,
       MAX_TOKENS = 128, VOCAB = 50, EOS = 7 };

// One KV slot: which token at which position it holds (-1: never written).
typedef struct slot {
  int32_t pos, token;
} slot_t;

static slot_t g_dev[DEVICE_BLOCKS][BT];
static slot_t g_host[HOST_BLOCKS][BT];

// The fake model: the next token is a hash of the whole history.
static int32_t model_next(const int32_t *tokens, uint32_t n) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t i = 0; i < n; ++i) {
    h = (h ^ (uint32_t)tokens[i]) * 1099511628211ull;
  }
  return (int32_t)(h % VOCAB);
}

typedef struct request {
  uint64_t id;
  int32_t prompt[MAX_TOKENS];
  uint32_t prompt_len, max_new;
  int32_t priority;
  int32_t expect[MAX_TOKENS * 2];  // prompt + what it generates alone
  uint32_t expect_len;
  bool added, done, cancelled;
  uint64_t added_step, first_step;
} request_t;

static void reference_run(request_t *r) {
  memcpy(r->expect, r->prompt, r->prompt_len * sizeof(int32_t));
  r->expect_len = r->prompt_len;
  for (uint32_t g = 0; g < r->max_new; ++g) {
    int32_t t = model_next(r->expect, r->expect_len);
    r->expect[r->expect_len++] = t;
    if (t == EOS) {
      break;
    }
  }
}

static void copy_blocks(slot_t (*dst)[BT], slot_t (*src)[BT],
                        const accel_kv_copy_t *c, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    memcpy(dst[c[i].dst], src[c[i].src], sizeof(slot_t) * BT);
  }
}

// Runs one plan like a model runner: copies, then each entry's reads and
// writes; returns the sampled tokens in |out|.
static uint32_t run_plan(const accel_sched_plan_t *p, int32_t *out,
                         const accel_sched_desc_t *desc) {
  assert_true(p->tokens <= desc->max_step_tokens);
  assert_true(p->entry_count <= desc->max_step_seqs);
  copy_blocks(g_host, g_dev, p->swap_out, p->swap_out_count);
  copy_blocks(g_dev, g_host, p->swap_in, p->swap_in_count);
  copy_blocks(g_dev, g_dev, p->copy, p->copy_count);
  uint32_t sampled = 0, tokens = 0;
  for (uint32_t i = 0; i < p->entry_count; ++i) {
    const accel_sched_entry_t *e = &p->entries[i];
    tokens += e->count;
    assert_true(e->count >= 1);
    uint32_t end = e->start + e->count;
    assert_true(e->blocks * BT >= end);
    // Attention reads the KV of every earlier token through the table.
    for (uint32_t pos = 0; pos < e->start; ++pos) {
      slot_t s = g_dev[e->block_table[pos / BT]][pos % BT];
      if (s.pos != (int32_t)pos || s.token != e->tokens[pos]) {
        fail_msg("sequence %llu reads position %u from block %u: holds "
                 "position %d token %d, expected token %d",
                 (unsigned long long)e->id, pos, e->block_table[pos / BT],
                 s.pos, s.token, e->tokens[pos]);
      }
    }
    for (uint32_t pos = e->start; pos < end; ++pos) {
      g_dev[e->block_table[pos / BT]][pos % BT] =
          (slot_t){.pos = (int32_t)pos, .token = e->tokens[pos]};
    }
    if (e->sample) {
      out[sampled++] = model_next(e->tokens, end);
    }
  }
  assert_int_equal(tokens, p->tokens);
  return sampled;
}

typedef struct scenario {
  const char *name;
  uint32_t kv_flags, sched_flags, preempt, budget, seqs;
  bool cancel;
} scenario_t;

static void run_scenario(const scenario_t *sc) {
  test_rng_t rng;
  test_rng_init(&rng, sc->name);
  memset(g_dev, 0xff, sizeof(g_dev));
  memset(g_host, 0xff, sizeof(g_host));
  accel_kv_cache_desc_t kd = {.struct_size = sizeof(kd),
                              .flags = sc->kv_flags,
                              .block_tokens = BT,
                              .device_blocks = DEVICE_BLOCKS,
                              .host_blocks = HOST_BLOCKS};
  accel_kv_cache_t *kv = NULL;
  assert_accel_ok(accel_kv_cache_create(&kd, &kv));
  accel_sched_desc_t sd = {.struct_size = sizeof(sd),
                           .flags = sc->sched_flags,
                           .max_step_tokens = sc->budget,
                           .max_step_seqs = sc->seqs,
                           .preempt = sc->preempt};
  accel_sched_t *s = NULL;
  assert_accel_ok(accel_sched_create(&sd, kv, &s));
  request_t *reqs = calloc(MAX_REQS, sizeof(*reqs));
  int32_t prefix[2][24];
  for (int p = 0; p < 2; ++p) {
    for (int t = 0; t < 24; ++t) {
      prefix[p][t] = (int32_t)test_rng_range(&rng, 10, VOCAB - 1);
    }
  }
  for (uint32_t i = 0; i < MAX_REQS; ++i) {
    request_t *r = &reqs[i];
    r->id = 1000 + i * 13;
    uint32_t max_prompt = (sc->sched_flags & ACCEL_SCHED_CHUNKED_PREFILL)
                              ? 60
                              : (sc->budget < 40 ? sc->budget : 40);
    r->prompt_len = (uint32_t)test_rng_range(&rng, 1, max_prompt);
    uint32_t shared = (uint32_t)test_rng_range(&rng, 0, 24);
    int p = (int)test_rng_range(&rng, 0, 1);
    for (uint32_t t = 0; t < r->prompt_len; ++t) {
      r->prompt[t] = t < shared ? prefix[p][t]
                                : (int32_t)test_rng_range(&rng, 10, VOCAB - 1);
    }
    r->max_new = (uint32_t)test_rng_range(&rng, 1, 40);
    r->priority = (int32_t)test_rng_range(&rng, 0, 2);
    reference_run(r);
  }
  uint32_t next = 0, finished_count = 0, live = 0;
  int32_t sampled[64];
  accel_sched_finished_t fin[64];
  for (uint64_t step = 0; finished_count < MAX_REQS; ++step) {
    assert_true(step < 20000);
    // Arrivals: up to two requests a step.
    for (int a = (int)test_rng_range(&rng, 0, 2); a > 0 && next < MAX_REQS;
         --a) {
      request_t *r = &reqs[next++];
      accel_sched_request_t q = {.struct_size = sizeof(q),
                                 .priority = r->priority,
                                 .id = r->id,
                                 .prompt = r->prompt,
                                 .prompt_tokens = r->prompt_len,
                                 .max_new_tokens = r->max_new,
                                 .eos_token = EOS};
      assert_accel_ok(accel_sched_add(s, &q));
      r->added = true;
      r->added_step = step;
      live++;
    }
    if (sc->cancel && live != 0 && test_rng_range(&rng, 0, 9) == 0) {
      request_t *r = &reqs[test_rng_range(&rng, 0, next - 1)];
      if (r->added && !r->done) {
        assert_accel_ok(accel_sched_cancel(s, r->id));
        r->done = r->cancelled = true;
        finished_count++;
        live--;
      }
    }
    accel_sched_plan_t plan;
    assert_accel_ok(accel_sched_step(s, &plan));
    if (plan.entry_count == 0) {
      assert_true(live == 0 || next < MAX_REQS);  // nothing stuck
      continue;
    }
    uint32_t n = run_plan(&plan, sampled, &sd);
    uint32_t nf = 0;
    assert_accel_ok(accel_sched_complete(s, sampled, n, fin, 64, &nf));
    for (uint32_t f = 0; f < nf; ++f) {
      request_t *r = NULL;
      for (uint32_t i = 0; i < next && r == NULL; ++i) {
        if (reqs[i].id == fin[f].id) {
          r = &reqs[i];
        }
      }
      assert_non_null(r);
      const int32_t *tokens = NULL;
      uint32_t count = 0, prompt = 0;
      assert_accel_ok(accel_sched_tokens(s, r->id, &tokens, &count, &prompt));
      assert_int_equal(prompt, r->prompt_len);
      if (count != r->expect_len ||
          memcmp(tokens, r->expect, count * sizeof(int32_t)) != 0) {
        fail_msg("request %llu: %u tokens differ from its run alone (%u)",
                 (unsigned long long)r->id, count, r->expect_len);
      }
      assert_int_equal(fin[f].generated, r->expect_len - r->prompt_len);
      assert_accel_ok(accel_sched_cancel(s, r->id));  // forget it
      r->done = true;
      finished_count++;
      live--;
    }
  }
  accel_kv_cache_stats_t ks = {.struct_size = sizeof(ks)};
  assert_accel_ok(accel_kv_cache_stats(kv, &ks));
  assert_int_equal(ks.used_blocks, 0);
  assert_int_equal(ks.host_used_blocks, 0);
  assert_int_equal(ks.sequences, 0);
  accel_sched_stats_t ss = {.struct_size = sizeof(ss)};
  assert_accel_ok(accel_sched_stats(s, &ss));
  assert_int_equal(ss.waiting + ss.running + ss.swapped, 0);
  print_message("%s: %llu steps, %llu preemptions, %llu swaps out, %llu "
                "prefix hits of %llu, %llu cancelled\n",
                sc->name, (unsigned long long)ss.steps,
                (unsigned long long)ss.preemptions,
                (unsigned long long)ss.swaps_out,
                (unsigned long long)ks.prefix_hits,
                (unsigned long long)ks.prefix_queries,
                (unsigned long long)ss.cancelled);
  assert_true(ss.preemptions > 0);  // the cache is small enough to preempt
  if (sc->preempt == ACCEL_SCHED_PREEMPT_SWAP) {
    assert_true(ss.swaps_out > 0 && ss.swaps_in > 0);
  }
  accel_sched_destroy(s);
  accel_kv_cache_destroy(kv);
  free(reqs);
}

static void test_recompute_preemption_gives_the_same_tokens(void **state) {
  (void)state;
  scenario_t sc = {.name = "recompute", .budget = 48, .seqs = 8,
                   .preempt = ACCEL_SCHED_PREEMPT_RECOMPUTE};
  run_scenario(&sc);
  sc.name = "recompute_prefix_chunked";
  sc.kv_flags = ACCEL_KV_CACHE_PREFIX_CACHING;
  sc.sched_flags = ACCEL_SCHED_CHUNKED_PREFILL;
  sc.budget = 16;
  run_scenario(&sc);
}

static void test_swap_preemption_gives_the_same_tokens(void **state) {
  (void)state;
  scenario_t sc = {.name = "swap", .budget = 48, .seqs = 8,
                   .preempt = ACCEL_SCHED_PREEMPT_SWAP};
  run_scenario(&sc);
  sc.name = "swap_prefix_chunked_cancel";
  sc.kv_flags = ACCEL_KV_CACHE_PREFIX_CACHING;
  sc.sched_flags = ACCEL_SCHED_CHUNKED_PREFILL;
  sc.budget = 24;
  sc.cancel = true;
  run_scenario(&sc);
}

static accel_sched_t *small_sched(accel_kv_cache_t **kv, uint32_t budget,
                                  uint32_t flags) {
  accel_kv_cache_desc_t kd = {.struct_size = sizeof(kd), .block_tokens = BT,
                              .device_blocks = DEVICE_BLOCKS};
  assert_accel_ok(accel_kv_cache_create(&kd, kv));
  accel_sched_desc_t sd = {.struct_size = sizeof(sd), .flags = flags,
                           .max_step_tokens = budget, .max_step_seqs = 4};
  accel_sched_t *s = NULL;
  assert_accel_ok(accel_sched_create(&sd, *kv, &s));
  return s;
}

static void add_simple(accel_sched_t *s, uint64_t id, int32_t priority,
                       uint32_t prompt, uint32_t max_new) {
  int32_t tokens[64];
  for (uint32_t i = 0; i < prompt; ++i) {
    tokens[i] = (int32_t)(id + i) % VOCAB;
  }
  accel_sched_request_t q = {.struct_size = sizeof(q), .priority = priority,
                             .id = id, .prompt = tokens,
                             .prompt_tokens = prompt,
                             .max_new_tokens = max_new, .eos_token = -1};
  assert_accel_ok(accel_sched_add(s, &q));
}

// Higher priority is admitted first; equal priority in arrival order; a
// chunked prompt mixes with decode steps within the budget.
static void test_priority_order_and_chunked_prefill(void **state) {
  (void)state;
  accel_kv_cache_t *kv;
  accel_sched_t *s = small_sched(&kv, 8, ACCEL_SCHED_CHUNKED_PREFILL);
  add_simple(s, 1, 0, 6, 4);
  add_simple(s, 2, 0, 6, 4);
  add_simple(s, 3, 5, 6, 4);
  accel_sched_plan_t p;
  assert_accel_ok(accel_sched_step(s, &p));
  // Budget 8: request 3 (priority 5) whole, then 2 tokens of request 1.
  assert_int_equal(p.entry_count, 2);
  assert_int_equal(p.entries[0].id, 3);
  assert_int_equal(p.entries[0].count, 6);
  assert_int_equal(p.entries[0].sample, 1);
  assert_int_equal(p.entries[1].id, 1);
  assert_int_equal(p.entries[1].count, 2);
  assert_int_equal(p.entries[1].sample, 0);
  int32_t t[2] = {9, 9};
  uint32_t nf;
  assert_accel_status(accel_sched_step(s, &p), ACCEL_ERROR_BUSY);
  assert_accel_status(accel_sched_complete(s, t, 2, NULL, 0, &nf),
                      ACCEL_ERROR_INVALID_ARGUMENT);  // one sample only
  assert_accel_ok(accel_sched_complete(s, t, 1, NULL, 0, &nf));
  assert_accel_ok(accel_sched_step(s, &p));
  // Decode of 3 (1 token), then request 1's remaining 4 tokens, then 3 of
  // request 2's prompt.
  assert_int_equal(p.entry_count, 3);
  assert_int_equal(p.entries[0].id, 3);
  assert_int_equal(p.entries[0].count, 1);
  assert_int_equal(p.entries[1].id, 1);
  assert_int_equal(p.entries[1].start, 2);
  assert_int_equal(p.entries[1].count, 4);
  assert_int_equal(p.entries[2].id, 2);
  assert_int_equal(p.entries[2].count, 3);
  assert_int_equal(p.tokens, 8);
  accel_sched_destroy(s);
  accel_kv_cache_destroy(kv);
}

// A steady stream of equal-priority requests: each is admitted within a
// bounded number of steps of its arrival (nobody is overtaken forever).
static void test_no_starvation_under_a_steady_stream(void **state) {
  (void)state;
  accel_kv_cache_t *kv;
  accel_sched_t *s = small_sched(&kv, 16, 0);
  uint64_t arrival[400] = {0};
  bool seen[400] = {false};
  uint64_t worst = 0;
  int32_t sampled[16];
  accel_sched_finished_t fin[16];
  for (uint64_t step = 0; step < 1500; ++step) {
    if (step < 400) {
      add_simple(s, step, 0, 3 + step % 5, 2 + step % 7);
      arrival[step] = step;
    }
    accel_sched_plan_t p;
    assert_accel_ok(accel_sched_step(s, &p));
    for (uint32_t i = 0; i < p.entry_count; ++i) {
      uint64_t id = p.entries[i].id;
      if (!seen[id]) {
        seen[id] = true;
        if (step - arrival[id] > worst) {
          worst = step - arrival[id];
        }
      }
      sampled[i] = 1;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < p.entry_count; ++i) {
      n += p.entries[i].sample;
    }
    uint32_t nf = 0;
    if (p.entry_count != 0) {
      assert_accel_ok(accel_sched_complete(s, sampled, n, fin, 16, &nf));
    }
    for (uint32_t f = 0; f < nf && f < 16; ++f) {
      assert_accel_ok(accel_sched_cancel(s, fin[f].id));
    }
  }
  for (int i = 0; i < 400; ++i) {
    assert_true(seen[i]);
  }
  // The queue grows (arrivals outpace service), but each waits its turn:
  // the wait stays below the queue's length in steps.
  assert_true(worst < 1100);
  accel_sched_stats_t ss = {.struct_size = sizeof(ss)};
  assert_accel_ok(accel_sched_stats(s, &ss));
  assert_int_equal(ss.finished, 400);
  accel_sched_destroy(s);
  accel_kv_cache_destroy(kv);
}

static void test_misuse_is_refused(void **state) {
  (void)state;
  accel_kv_cache_t *kv;
  accel_sched_t *s = small_sched(&kv, 8, 0);
  int32_t tokens[16] = {0};
  accel_sched_request_t q = {.struct_size = sizeof(q), .id = 1,
                             .prompt = tokens, .prompt_tokens = 9,
                             .max_new_tokens = 1, .eos_token = -1};
  assert_accel_status(accel_sched_add(s, &q), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "over the step budget"));
  q.prompt_tokens = 4;
  q.max_new_tokens = 0;
  assert_accel_status(accel_sched_add(s, &q), ACCEL_ERROR_INVALID_ARGUMENT);
  q.max_new_tokens = DEVICE_BLOCKS * BT;
  assert_accel_status(accel_sched_add(s, &q), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "more than the cache holds"));
  q.max_new_tokens = 2;
  assert_accel_ok(accel_sched_add(s, &q));
  assert_accel_status(accel_sched_add(s, &q), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_sched_cancel(s, 77), ACCEL_ERROR_NOT_FOUND);
  uint32_t nf;
  assert_accel_status(accel_sched_complete(s, NULL, 0, NULL, 0, &nf),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  // Cancel while a plan is pending: the completion skips it.
  accel_sched_plan_t p;
  assert_accel_ok(accel_sched_step(s, &p));
  assert_int_equal(p.entry_count, 1);
  assert_accel_ok(accel_sched_cancel(s, 1));
  int32_t t = 3;
  assert_accel_ok(accel_sched_complete(s, &t, 1, NULL, 0, &nf));
  assert_int_equal(nf, 0);
  accel_kv_cache_stats_t ks = {.struct_size = sizeof(ks)};
  assert_accel_ok(accel_kv_cache_stats(kv, &ks));
  assert_int_equal(ks.used_blocks, 0);
  accel_sched_desc_t sd = {.struct_size = sizeof(sd), .max_step_tokens = 8,
                           .max_step_seqs = 1,
                           .preempt = ACCEL_SCHED_PREEMPT_SWAP};
  accel_sched_t *bad = NULL;
  assert_accel_status(accel_sched_create(&sd, kv, &bad),
                      ACCEL_ERROR_INVALID_ARGUMENT);  // no host blocks
  sd.preempt = 0;
  sd.max_step_tokens = 0;
  assert_accel_status(accel_sched_create(&sd, kv, &bad),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_sched_destroy(s);
  accel_sched_destroy(NULL);
  accel_kv_cache_destroy(kv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_recompute_preemption_gives_the_same_tokens),
      cmocka_unit_test(test_swap_preemption_gives_the_same_tokens),
      cmocka_unit_test(test_priority_order_and_chunked_prefill),
      cmocka_unit_test(test_no_starvation_under_a_steady_stream),
      cmocka_unit_test(test_misuse_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
