// The KV-cache block manager against a model of what each sequence holds:
// random request streams (adds with shared prefixes, appends, forks, frees,
// swaps, computed marks) checked after every step for the invariants (no
// block owned by two sequences unless their tokens agree there, reference
// counts exact, every block accounted for, nothing changed by a refused
// call), plus prefix hits, copy-on-write and swap by name.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "accel/kv_cache.h"

enum { BT = 4, DEVICE_BLOCKS = 48, HOST_BLOCKS = 24, MAX_SEQS = 24,
       MAX_TOKENS = 96 };

// What the test knows of a sequence: its tokens.
typedef struct model_seq {
  bool live, swapped;
  uint64_t id;
  int32_t tokens[MAX_TOKENS + 8];
  uint32_t count;
} model_seq_t;

typedef struct model {
  model_seq_t seq[MAX_SEQS];
} model_t;

static accel_kv_cache_t *make_cache(uint32_t flags) {
  accel_kv_cache_desc_t d = {.struct_size = sizeof(d),
                             .flags = flags,
                             .block_tokens = BT,
                             .device_blocks = DEVICE_BLOCKS,
                             .host_blocks = HOST_BLOCKS};
  accel_kv_cache_t *c = NULL;
  assert_accel_ok(accel_kv_cache_create(&d, &c));
  return c;
}

static accel_kv_cache_stats_t stats_of(const accel_kv_cache_t *c) {
  accel_kv_cache_stats_t s = {.struct_size = sizeof(s)};
  assert_accel_ok(accel_kv_cache_stats(c, &s));
  return s;
}

// Every invariant the manager promises, from the public API only.
static void check_invariants(const accel_kv_cache_t *c, const model_t *m) {
  uint32_t refs[DEVICE_BLOCKS] = {0};
  int owner[DEVICE_BLOCKS];
  uint32_t owner_index[DEVICE_BLOCKS];
  uint32_t filled[DEVICE_BLOCKS] = {0};
  memset(owner, -1, sizeof(owner));
  uint32_t live = 0, swapped = 0, host_blocks = 0;
  for (int i = 0; i < MAX_SEQS; ++i) {
    const model_seq_t *s = &m->seq[i];
    if (!s->live) {
      continue;
    }
    live++;
    uint32_t want_blocks = (s->count + BT - 1) / BT;
    uint32_t table[MAX_TOKENS / BT + 4];
    uint32_t n = 0;
    uint64_t tokens = 0;
    accel_status_t st =
        accel_kv_cache_block_table(c, s->id, table, 32, &n, &tokens);
    if (s->swapped) {
      assert_int_equal(st, ACCEL_ERROR_BUSY);
      swapped++;
      host_blocks += want_blocks;
      continue;
    }
    assert_accel_ok(st);
    assert_int_equal(n, want_blocks);
    assert_int_equal(tokens, s->count);
    for (uint32_t k = 0; k < n; ++k) {
      uint32_t b = table[k];
      assert_true(b < DEVICE_BLOCKS);
      uint32_t fill = s->count - k * BT < BT ? s->count - k * BT : BT;
      refs[b]++;
      if (owner[b] < 0) {
        owner[b] = i;
        owner_index[b] = k;
        filled[b] = fill;
        continue;
      }
      // A shared block: at the same position, with the same tokens.
      const model_seq_t *o = &m->seq[owner[b]];
      if (owner_index[b] != k || filled[b] != fill ||
          memcmp(o->tokens + k * BT, s->tokens + k * BT,
                 fill * sizeof(int32_t)) != 0) {
        fail_msg("block %u shared by sequences %llu (index %u) and %llu "
                 "(index %u) whose tokens differ there",
                 b, (unsigned long long)o->id, owner_index[b],
                 (unsigned long long)s->id, k);
      }
    }
  }
  accel_kv_cache_stats_t st = stats_of(c);
  uint32_t used = 0;
  uint64_t held = 0;
  for (uint32_t b = 0; b < DEVICE_BLOCKS; ++b) {
    if (refs[b] != 0) {
      used++;
      held += filled[b];
    }
  }
  assert_int_equal(st.used_blocks, used);
  assert_int_equal(st.free_blocks + st.cached_blocks + st.used_blocks,
                   DEVICE_BLOCKS);
  assert_int_equal(st.sequences, live);
  assert_int_equal(st.swapped_sequences, swapped);
  assert_int_equal(st.host_used_blocks, host_blocks);
  assert_int_equal(st.tokens, held);
  assert_int_equal(st.token_slots, (uint64_t)used * BT);
}

static model_seq_t *free_slot(model_t *m) {
  for (int i = 0; i < MAX_SEQS; ++i) {
    if (!m->seq[i].live) {
      return &m->seq[i];
    }
  }
  return NULL;
}

static model_seq_t *random_live(model_t *m, test_rng_t *rng, bool resident) {
  int start = (int)test_rng_range(rng, 0, MAX_SEQS - 1);
  for (int k = 0; k < MAX_SEQS; ++k) {
    model_seq_t *s = &m->seq[(start + k) % MAX_SEQS];
    if (s->live && (!resident || !s->swapped)) {
      return s;
    }
  }
  return NULL;
}

// Same stats before and after a refused call: nothing changed.
static void expect_unchanged(const accel_kv_cache_stats_t *a,
                             const accel_kv_cache_t *c) {
  accel_kv_cache_stats_t b = stats_of(c);
  assert_memory_equal(a, &b, sizeof(b));
}

static void random_stream(uint32_t flags, const char *name) {
  test_rng_t rng;
  test_rng_init(&rng, name);
  accel_kv_cache_t *c = make_cache(flags);
  model_t *m = calloc(1, sizeof(*m));
  // Prompts start with one of three shared prefixes, for prefix hits.
  int32_t prefixes[3][24];
  for (int p = 0; p < 3; ++p) {
    for (int t = 0; t < 24; ++t) {
      prefixes[p][t] = (int32_t)test_rng_range(&rng, 0, 1000);
    }
  }
  uint64_t next_id = 1;
  uint32_t oom = 0;
  for (int step = 0; step < 4000; ++step) {
    uint32_t op = (uint32_t)test_rng_range(&rng, 0, 99);
    accel_kv_cache_stats_t before = stats_of(c);
    if (op < 20) {  // add
      model_seq_t *s = free_slot(m);
      if (s == NULL) {
        continue;
      }
      uint32_t n = (uint32_t)test_rng_range(&rng, 1, 40);
      int p = (int)test_rng_range(&rng, 0, 2);
      uint32_t shared = (uint32_t)test_rng_range(&rng, 0, 24);
      for (uint32_t t = 0; t < n; ++t) {
        s->tokens[t] = t < shared ? prefixes[p][t]
                                  : (int32_t)test_rng_range(&rng, 0, 1000);
      }
      int can = accel_kv_cache_can_add(c, s->tokens, n);
      uint32_t cached = 99;
      accel_status_t st = accel_kv_cache_add(c, next_id, s->tokens, n, &cached);
      assert_int_equal(can, st == ACCEL_OK);
      if (st == ACCEL_ERROR_OUT_OF_MEMORY) {
        oom++;
        expect_unchanged(&before, c);
        continue;
      }
      assert_accel_ok(st);
      assert_true(cached % BT == 0 && cached < n);
      if ((flags & ACCEL_KV_CACHE_PREFIX_CACHING) == 0) {
        assert_int_equal(cached, 0);
      }
      s->live = true;
      s->swapped = false;
      s->id = next_id++;
      s->count = n;
    } else if (op < 55) {  // append
      model_seq_t *s = random_live(m, &rng, true);
      if (s == NULL || s->count >= MAX_TOKENS) {
        continue;
      }
      int32_t token = (int32_t)test_rng_range(&rng, 0, 1000);
      accel_kv_copy_t copy;
      uint32_t copied = 7;
      accel_status_t st = accel_kv_cache_append(c, s->id, token, &copy,
                                                &copied);
      if (st == ACCEL_ERROR_OUT_OF_MEMORY) {
        oom++;
        expect_unchanged(&before, c);
        continue;
      }
      assert_accel_ok(st);
      assert_true(copied == 0 || copied == 1);
      if (copied) {
        assert_true(copy.src != copy.dst && copy.dst < DEVICE_BLOCKS);
      }
      s->tokens[s->count++] = token;
    } else if (op < 62) {  // fork
      model_seq_t *p = random_live(m, &rng, true);
      model_seq_t *s = free_slot(m);
      if (p == NULL || s == NULL) {
        continue;
      }
      assert_accel_ok(accel_kv_cache_fork(c, p->id, next_id));
      *s = *p;
      s->id = next_id++;
    } else if (op < 80) {  // free
      model_seq_t *s = random_live(m, &rng, false);
      if (s == NULL) {
        continue;
      }
      assert_accel_ok(accel_kv_cache_free(c, s->id));
      s->live = false;
    } else if (op < 88) {  // swap out
      model_seq_t *s = random_live(m, &rng, true);
      if (s == NULL) {
        continue;
      }
      accel_kv_copy_t copies[32];
      uint32_t n = 0;
      accel_status_t st = accel_kv_cache_swap_out(c, s->id, copies, 32, &n);
      if (st == ACCEL_ERROR_OUT_OF_MEMORY) {
        oom++;
        expect_unchanged(&before, c);
        continue;
      }
      assert_accel_ok(st);
      assert_int_equal(n, (s->count + BT - 1) / BT);
      s->swapped = true;
    } else if (op < 95) {  // swap in
      model_seq_t *s = NULL;
      for (int i = 0; i < MAX_SEQS && s == NULL; ++i) {
        if (m->seq[i].live && m->seq[i].swapped) {
          s = &m->seq[i];
        }
      }
      if (s == NULL) {
        continue;
      }
      accel_kv_copy_t copies[32];
      uint32_t n = 0;
      accel_status_t st = accel_kv_cache_swap_in(c, s->id, copies, 32, &n);
      if (st == ACCEL_ERROR_OUT_OF_MEMORY) {
        oom++;
        expect_unchanged(&before, c);
        continue;
      }
      assert_accel_ok(st);
      s->swapped = false;
    } else {  // the model step computed some prefix
      model_seq_t *s = random_live(m, &rng, true);
      if (s == NULL) {
        continue;
      }
      assert_accel_ok(accel_kv_cache_set_computed(
          c, s->id, test_rng_range(&rng, 0, s->count)));
    }
    check_invariants(c, m);
  }
  for (int i = 0; i < MAX_SEQS; ++i) {
    if (m->seq[i].live) {
      assert_accel_ok(accel_kv_cache_free(c, m->seq[i].id));
      m->seq[i].live = false;
    }
  }
  check_invariants(c, m);
  accel_kv_cache_stats_t st = stats_of(c);
  assert_int_equal(st.used_blocks, 0);
  assert_int_equal(st.host_used_blocks, 0);
  assert_int_equal(st.sequences, 0);
  if ((flags & ACCEL_KV_CACHE_PREFIX_CACHING) == 0) {
    assert_int_equal(st.cached_blocks, 0);
  } else {
    assert_true(st.prefix_hits > 0);  // the shared prefixes were found
  }
  assert_true(oom > 0);  // the stream ran the cache full
  accel_kv_cache_destroy(c);
  free(m);
}

static void test_random_streams_keep_invariants(void **state) {
  (void)state;
  random_stream(0, "random_stream_plain");
  random_stream(ACCEL_KV_CACHE_PREFIX_CACHING, "random_stream_prefix");
}

// A prompt whose full blocks were computed is found again, exactly, once
// its first sequence is gone (cached blocks), and shared while it lives.
static void test_prefix_hits_share_computed_blocks(void **state) {
  (void)state;
  accel_kv_cache_t *c = make_cache(ACCEL_KV_CACHE_PREFIX_CACHING);
  int32_t prompt[10] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  uint32_t cached = 1;
  assert_accel_ok(accel_kv_cache_add(c, 1, prompt, 10, &cached));
  assert_int_equal(cached, 0);
  uint32_t a[4], b[4], n;
  assert_accel_ok(accel_kv_cache_block_table(c, 1, a, 4, &n, NULL));
  assert_int_equal(n, 3);
  // Not computed yet: a second prompt shares nothing.
  assert_accel_ok(accel_kv_cache_add(c, 2, prompt, 10, &cached));
  assert_int_equal(cached, 0);
  assert_accel_ok(accel_kv_cache_free(c, 2));
  assert_accel_ok(accel_kv_cache_set_computed(c, 1, 10));
  // Two full blocks hit; the third (partial, and holding the last token)
  // is the new sequence's own.
  assert_accel_ok(accel_kv_cache_add(c, 3, prompt, 10, &cached));
  assert_int_equal(cached, 8);
  assert_accel_ok(accel_kv_cache_block_table(c, 3, b, 4, &n, NULL));
  assert_int_equal(b[0], a[0]);
  assert_int_equal(b[1], a[1]);
  assert_int_not_equal(b[2], a[2]);
  // A prompt of exactly two blocks hits only the first: its last token is
  // always computed.
  assert_accel_ok(accel_kv_cache_add(c, 4, prompt, 8, &cached));
  assert_int_equal(cached, 4);
  // A prompt that differs in the second block hits the first only.
  int32_t other[10];
  memcpy(other, prompt, sizeof(other));
  other[5] = 99;
  assert_accel_ok(accel_kv_cache_add(c, 5, other, 10, &cached));
  assert_int_equal(cached, 4);
  // Everyone gone: the computed blocks stay cached and are found again.
  for (uint64_t s = 1; s <= 5; ++s) {
    if (s != 2) {
      assert_accel_ok(accel_kv_cache_free(c, s));
    }
  }
  accel_kv_cache_stats_t st = stats_of(c);
  assert_int_equal(st.used_blocks, 0);
  assert_int_equal(st.cached_blocks, 2);
  assert_accel_ok(accel_kv_cache_add(c, 6, prompt, 10, &cached));
  assert_int_equal(cached, 8);
  assert_accel_ok(accel_kv_cache_block_table(c, 6, b, 4, &n, NULL));
  assert_int_equal(b[0], a[0]);
  assert_int_equal(b[1], a[1]);
  st = stats_of(c);
  assert_int_equal(st.prefix_hits, 2 + 1 + 1 + 2);
  accel_kv_cache_destroy(c);
}

// Cached blocks are evicted least recently used first, and only when no
// free block is left.
static void test_eviction_is_lru_and_last_resort(void **state) {
  (void)state;
  accel_kv_cache_desc_t d = {.struct_size = sizeof(d),
                             .flags = ACCEL_KV_CACHE_PREFIX_CACHING,
                             .block_tokens = 2, .device_blocks = 6};
  accel_kv_cache_t *c = NULL;
  assert_accel_ok(accel_kv_cache_create(&d, &c));
  int32_t p1[3] = {1, 2, 3}, p2[3] = {4, 5, 6}, p3[5] = {7, 8, 9, 10, 11};
  uint32_t cached;
  assert_accel_ok(accel_kv_cache_add(c, 1, p1, 3, &cached));
  assert_accel_ok(accel_kv_cache_set_computed(c, 1, 3));
  assert_accel_ok(accel_kv_cache_free(c, 1));  // p1's block cached (older)
  assert_accel_ok(accel_kv_cache_add(c, 2, p2, 3, &cached));
  assert_accel_ok(accel_kv_cache_set_computed(c, 2, 3));
  assert_accel_ok(accel_kv_cache_free(c, 2));  // p2's block cached (newer)
  accel_kv_cache_stats_t st = stats_of(c);
  assert_int_equal(st.cached_blocks, 2);
  assert_int_equal(st.free_blocks, 4);
  // 3 blocks: all free ones, no eviction.
  assert_accel_ok(accel_kv_cache_add(c, 3, p3, 5, &cached));
  assert_int_equal(stats_of(c).evictions, 0);
  // 2 more blocks: one free, then p1's (the older) is evicted.
  int32_t p4[3] = {20, 21, 22};
  assert_accel_ok(accel_kv_cache_add(c, 4, p4, 3, &cached));
  assert_int_equal(stats_of(c).evictions, 1);
  assert_accel_ok(accel_kv_cache_free(c, 3));  // room again (3 free)
  assert_accel_ok(accel_kv_cache_add(c, 5, p2, 3, &cached));
  assert_int_equal(cached, 2);  // p2 still cached
  assert_accel_ok(accel_kv_cache_add(c, 6, p1, 3, &cached));
  assert_int_equal(cached, 0);  // p1 was evicted
  accel_kv_cache_destroy(c);
}

// Forked sequences share every block; an append to a shared partial block
// copies it first (once per writer), full blocks stay shared.
static void test_fork_copies_on_write(void **state) {
  (void)state;
  accel_kv_cache_t *c = make_cache(0);
  int32_t prompt[6] = {1, 2, 3, 4, 5, 6};
  assert_accel_ok(accel_kv_cache_add(c, 1, prompt, 6, NULL));
  assert_accel_ok(accel_kv_cache_fork(c, 1, 2));
  uint32_t a[4], b[4], n;
  assert_accel_ok(accel_kv_cache_block_table(c, 1, a, 4, &n, NULL));
  accel_kv_copy_t copy;
  uint32_t copied;
  assert_accel_ok(accel_kv_cache_append(c, 2, 7, &copy, &copied));
  assert_int_equal(copied, 1);
  assert_int_equal(copy.src, a[1]);
  assert_accel_ok(accel_kv_cache_block_table(c, 2, b, 4, &n, NULL));
  assert_int_equal(b[0], a[0]);  // the full block stays shared
  assert_int_equal(b[1], copy.dst);
  // The parent now owns its partial block alone: no copy.
  assert_accel_ok(accel_kv_cache_append(c, 1, 8, &copy, &copied));
  assert_int_equal(copied, 0);
  assert_int_equal(stats_of(c).copies_on_write, 1);
  // Filling the block then starts a fresh one without a copy.
  assert_accel_ok(accel_kv_cache_append(c, 2, 9, &copy, &copied));
  assert_accel_ok(accel_kv_cache_append(c, 2, 10, &copy, &copied));
  assert_int_equal(copied, 0);
  assert_accel_ok(accel_kv_cache_block_table(c, 2, b, 4, &n, NULL));
  assert_int_equal(n, 3);
  accel_kv_cache_destroy(c);
}

// Swap out and back in: the copies name every block, the table is refused
// meanwhile, and the sequence goes on where it was.
static void test_swap_round_trip(void **state) {
  (void)state;
  accel_kv_cache_t *c = make_cache(0);
  int32_t prompt[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  assert_accel_ok(accel_kv_cache_add(c, 1, prompt, 9, NULL));
  uint32_t before[4], after[4], n;
  assert_accel_ok(accel_kv_cache_block_table(c, 1, before, 4, &n, NULL));
  accel_kv_copy_t copies[4];
  assert_accel_status(accel_kv_cache_swap_out(c, 1, copies, 2, &n),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_kv_cache_swap_out(c, 1, copies, 4, &n));
  assert_int_equal(n, 3);
  for (uint32_t i = 0; i < 3; ++i) {
    assert_int_equal(copies[i].src, before[i]);
    assert_true(copies[i].dst < HOST_BLOCKS);
  }
  assert_accel_status(accel_kv_cache_block_table(c, 1, after, 4, &n, NULL),
                      ACCEL_ERROR_BUSY);
  accel_kv_copy_t copy;
  uint32_t copied;
  assert_accel_status(accel_kv_cache_append(c, 1, 10, &copy, &copied),
                      ACCEL_ERROR_BUSY);
  assert_accel_status(accel_kv_cache_swap_out(c, 1, copies, 4, &n),
                      ACCEL_ERROR_BUSY);
  assert_int_equal(stats_of(c).used_blocks, 0);
  assert_accel_ok(accel_kv_cache_swap_in(c, 1, copies, 4, &n));
  assert_int_equal(n, 3);
  assert_int_equal(stats_of(c).host_used_blocks, 0);
  uint64_t tokens = 0;
  assert_accel_ok(accel_kv_cache_block_table(c, 1, after, 4, &n, &tokens));
  assert_int_equal(tokens, 9);
  for (uint32_t i = 0; i < 3; ++i) {
    assert_int_equal(copies[i].dst, after[i]);
  }
  assert_accel_ok(accel_kv_cache_append(c, 1, 10, &copy, &copied));
  assert_accel_status(accel_kv_cache_swap_in(c, 1, copies, 4, &n),
                      ACCEL_ERROR_BUSY);
  accel_kv_cache_destroy(c);
}

static void test_misuse_is_refused(void **state) {
  (void)state;
  accel_kv_cache_t *c = NULL;
  accel_kv_cache_desc_t d = {.struct_size = sizeof(d), .block_tokens = 16,
                             .device_blocks = 8};
  assert_accel_status(accel_kv_cache_create(NULL, &c),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  d.block_tokens = 0;
  assert_accel_status(accel_kv_cache_create(&d, &c),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  d.block_tokens = 16;
  d.flags = 2;
  assert_accel_status(accel_kv_cache_create(&d, &c),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  d.flags = 0;
  d.struct_size = 8;
  assert_accel_status(accel_kv_cache_create(&d, &c),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(c);
  c = make_cache(0);
  int32_t t[2] = {1, 2};
  assert_accel_status(accel_kv_cache_add(c, 1, t, 0, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_kv_cache_add(c, 1, NULL, 2, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_kv_cache_add(c, 1, t, 2, NULL));
  assert_accel_status(accel_kv_cache_add(c, 1, t, 2, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "already exists"));
  assert_accel_status(accel_kv_cache_fork(c, 1, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_kv_cache_fork(c, 9, 2), ACCEL_ERROR_NOT_FOUND);
  assert_accel_status(accel_kv_cache_free(c, 9), ACCEL_ERROR_NOT_FOUND);
  assert_accel_status(accel_kv_cache_set_computed(c, 1, 3),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_kv_copy_t copy;
  uint32_t copied;
  assert_accel_status(accel_kv_cache_append(c, 1, 3, NULL, &copied),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_kv_cache_append(c, 7, 3, &copy, &copied),
                      ACCEL_ERROR_NOT_FOUND);
  // A prompt larger than the whole cache.
  int32_t big[DEVICE_BLOCKS * BT + 1] = {0};
  assert_int_equal(accel_kv_cache_can_add(c, big, DEVICE_BLOCKS * BT + 1), 0);
  assert_accel_status(
      accel_kv_cache_add(c, 2, big, DEVICE_BLOCKS * BT + 1, NULL),
      ACCEL_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(accel_last_error(), "needs 49 blocks"));
  accel_kv_cache_stats_t st = {.struct_size = 4};
  assert_accel_status(accel_kv_cache_stats(c, &st),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_int_equal(accel_kv_cache_can_add(NULL, t, 2), 0);
  accel_kv_cache_destroy(c);
  accel_kv_cache_destroy(NULL);
}

// Many sequences: the sequence table grows and deletes correctly.
static void test_thousands_of_sequences(void **state) {
  (void)state;
  accel_kv_cache_desc_t d = {.struct_size = sizeof(d), .block_tokens = 1,
                             .device_blocks = 5000};
  accel_kv_cache_t *c = NULL;
  assert_accel_ok(accel_kv_cache_create(&d, &c));
  for (uint64_t s = 0; s < 5000; ++s) {
    int32_t t = (int32_t)s;
    assert_accel_ok(accel_kv_cache_add(c, s * 7919, &t, 1, NULL));
  }
  for (uint64_t s = 0; s < 5000; s += 2) {
    assert_accel_ok(accel_kv_cache_free(c, s * 7919));
  }
  for (uint64_t s = 0; s < 5000; ++s) {
    uint32_t n = 0;
    accel_status_t st =
        accel_kv_cache_block_table(c, s * 7919, NULL, 0, &n, NULL);
    assert_int_equal(st, s % 2 ? ACCEL_OK : ACCEL_ERROR_NOT_FOUND);
  }
  assert_int_equal(stats_of(c).sequences, 2500);
  accel_kv_cache_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_streams_keep_invariants),
      cmocka_unit_test(test_prefix_hits_share_computed_blocks),
      cmocka_unit_test(test_eviction_is_lru_and_last_resort),
      cmocka_unit_test(test_fork_copies_on_write),
      cmocka_unit_test(test_swap_round_trip),
      cmocka_unit_test(test_misuse_is_refused),
      cmocka_unit_test(test_thousands_of_sequences),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
