// The KV-cache block manager (include/accel/kv_cache.h, docs/serving.md).
//
// Device blocks are in one of three states: free (on a stack), used (a
// reference count above zero), or cached (unreferenced but registered by
// the hash of its prefix, on an LRU list, evicted oldest first when a block
// is needed). Full blocks whose KV was computed are registered in a chained
// hash table keyed by XXH3-64 of (parent hash, tokens); a lookup compares
// the parent hash and the tokens too, so a hit is exact. Sequences are found
// by id in a serve_id_map.
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "accel/kv_cache.h"
#include "core/error.h"
#include "serve/id_map.h"

#define NONE UINT32_MAX
#define MAX_BLOCK_TOKENS 4096u

typedef struct block {
  uint32_t ref;
  uint32_t filled;    // tokens held
  bool registered;    // in the hash table (full, computed)
  uint64_t hash;      // of (parent_hash, tokens), valid when registered
  uint64_t parent_hash;
  uint32_t hash_next;  // chain in the hash table
  uint32_t lru_prev, lru_next;  // on the LRU list while cached
  uint32_t free_next;           // on the free stack while free
} block_t;

typedef struct sequence {
  uint64_t id;
  uint64_t tokens;
  uint32_t *blocks;  // device blocks, or host blocks while swapped
  uint32_t count, cap;
  uint64_t computed;  // tokens whose KV is computed (set_computed)
  bool swapped;
} sequence_t;

struct accel_kv_cache {
  accel_kv_cache_desc_t desc;
  uint32_t bt;  // tokens per block
  block_t *blocks;
  int32_t *tokens;  // bt tokens per device block
  uint32_t free_head, free_count;
  // Tokens held in referenced device blocks (the stats' |tokens|), kept
  // as blocks are filled, taken and released.
  uint64_t live_tokens;
  uint32_t lru_head, lru_tail, cached_count;
  uint32_t *buckets;  // hash table heads
  uint32_t bucket_mask;
  // Host swap space: a free stack and the tokens of each host block.
  uint32_t *host_free;
  uint32_t host_free_count;
  int32_t *host_tokens;
  uint32_t *host_filled;
  serve_id_map_t seqs;  // sequence_t by id
  uint32_t swapped_count;
  accel_kv_cache_stats_t stats;
};

static sequence_t *seq_find(const accel_kv_cache_t *c, uint64_t id) {
  return serve_id_map_find(&c->seqs, id);
}

// ---------------------------------------------------------------------------
// Blocks: free stack, LRU list, hash table

static int32_t *block_tokens(accel_kv_cache_t *c, uint32_t b) {
  return c->tokens + (uint64_t)b * c->bt;
}

static void lru_unlink(accel_kv_cache_t *c, uint32_t b) {
  block_t *k = &c->blocks[b];
  if (k->lru_prev != NONE) {
    c->blocks[k->lru_prev].lru_next = k->lru_next;
  } else {
    c->lru_head = k->lru_next;
  }
  if (k->lru_next != NONE) {
    c->blocks[k->lru_next].lru_prev = k->lru_prev;
  } else {
    c->lru_tail = k->lru_prev;
  }
  k->lru_prev = k->lru_next = NONE;
  c->cached_count--;
}

static void lru_push_tail(accel_kv_cache_t *c, uint32_t b) {
  block_t *k = &c->blocks[b];
  k->lru_prev = c->lru_tail;
  k->lru_next = NONE;
  if (c->lru_tail != NONE) {
    c->blocks[c->lru_tail].lru_next = b;
  } else {
    c->lru_head = b;
  }
  c->lru_tail = b;
  c->cached_count++;
}

static void hash_remove(accel_kv_cache_t *c, uint32_t b) {
  block_t *k = &c->blocks[b];
  uint32_t *link = &c->buckets[k->hash & c->bucket_mask];
  while (*link != b) {
    link = &c->blocks[*link].hash_next;
  }
  *link = k->hash_next;
  k->hash_next = NONE;
  k->registered = false;
}

// The registered block holding |tokens| after the prefix |parent_hash|
// (hash |hash|), or NONE.
static uint32_t hash_lookup(const accel_kv_cache_t *c, uint64_t hash,
                            uint64_t parent_hash, const int32_t *tokens) {
  for (uint32_t b = c->buckets[hash & c->bucket_mask]; b != NONE;
       b = c->blocks[b].hash_next) {
    const block_t *k = &c->blocks[b];
    if (k->hash == hash && k->parent_hash == parent_hash &&
        memcmp(c->tokens + (uint64_t)b * c->bt, tokens,
               (size_t)c->bt * sizeof(int32_t)) == 0) {
      return b;
    }
  }
  return NONE;
}

static uint64_t chain_hash(uint64_t parent_hash, const int32_t *tokens,
                           uint32_t bt) {
  return XXH3_64bits_withSeed(tokens, (size_t)bt * sizeof(int32_t),
                              parent_hash);
}

// Takes a block for new contents: a free one, else the least recently used
// cached one (evicted). The caller checked that one exists.
static uint32_t block_take(accel_kv_cache_t *c) {
  uint32_t b;
  if (c->free_count != 0) {
    b = c->free_head;
    c->free_head = c->blocks[b].free_next;
    c->free_count--;
  } else {
    b = c->lru_head;
    lru_unlink(c, b);
    hash_remove(c, b);
    c->stats.evictions++;
  }
  block_t *k = &c->blocks[b];
  k->ref = 1;
  k->filled = 0;
  k->free_next = NONE;
  return b;
}

static void block_free(accel_kv_cache_t *c, uint32_t b) {
  block_t *k = &c->blocks[b];
  k->filled = 0;
  k->free_next = c->free_head;
  c->free_head = b;
  c->free_count++;
}

// Drops one reference to device block |b|.
static void block_release(accel_kv_cache_t *c, uint32_t b) {
  block_t *k = &c->blocks[b];
  if (--k->ref != 0) {
    return;
  }
  c->live_tokens -= k->filled;
  if (k->registered) {
    lru_push_tail(c, b);  // stays findable until evicted
  } else {
    block_free(c, b);
  }
}

// Takes a reference to device block |b| found in the hash table.
static void block_revive(accel_kv_cache_t *c, uint32_t b) {
  if (c->blocks[b].ref++ == 0) {
    c->live_tokens += c->blocks[b].filled;
    lru_unlink(c, b);
  }
}

static uint32_t available_blocks(const accel_kv_cache_t *c) {
  return c->free_count + c->cached_count;
}

// ---------------------------------------------------------------------------
// Public entry points

accel_status_t accel_kv_cache_create(const accel_kv_cache_desc_t *desc,
                                     accel_kv_cache_t **out) {
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out (NULL)");
  if (desc->struct_size < sizeof(accel_kv_cache_desc_t)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "KV cache: desc struct_size %u, expected %zu",
                       desc->struct_size, sizeof(accel_kv_cache_desc_t));
  }
  if ((desc->flags & ~(uint32_t)ACCEL_KV_CACHE_PREFIX_CACHING) != 0 ||
      desc->reserved0 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "KV cache: unknown flags 0x%x or reserved field set",
                       desc->flags);
  }
  if (desc->block_tokens == 0 || desc->block_tokens > MAX_BLOCK_TOKENS ||
      desc->device_blocks == 0 || desc->device_blocks >= NONE / 2 ||
      desc->host_blocks >= NONE / 2) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "KV cache: block_tokens %u (1 to %u), device_blocks "
                       "%u (at least 1), host_blocks %u",
                       desc->block_tokens, MAX_BLOCK_TOKENS,
                       desc->device_blocks, desc->host_blocks);
  }
  accel_kv_cache_t *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "KV cache: cannot allocate");
  }
  c->desc = *desc;
  c->bt = desc->block_tokens;
  uint32_t n = desc->device_blocks;
  uint32_t buckets = 1;
  while (buckets < 2 * n) {
    buckets <<= 1;
  }
  c->blocks = calloc(n, sizeof(block_t));
  c->tokens = calloc((size_t)n * c->bt, sizeof(int32_t));
  c->buckets = malloc((size_t)buckets * sizeof(uint32_t));
  c->host_free = malloc(((size_t)desc->host_blocks + 1) * sizeof(uint32_t));
  c->host_tokens =
      calloc(((size_t)desc->host_blocks + 1) * c->bt, sizeof(int32_t));
  c->host_filled = calloc((size_t)desc->host_blocks + 1, sizeof(uint32_t));
  if (c->blocks == NULL || c->tokens == NULL || c->buckets == NULL ||
      c->host_free == NULL || c->host_tokens == NULL ||
      c->host_filled == NULL || serve_id_map_init(&c->seqs) != ACCEL_OK) {
    accel_kv_cache_destroy(c);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "KV cache: cannot allocate the tables of %u blocks of "
                       "%u tokens",
                       n, c->bt);
  }
  memset(c->buckets, 0xff, (size_t)buckets * sizeof(uint32_t));
  c->bucket_mask = buckets - 1;
  c->lru_head = c->lru_tail = NONE;
  c->free_head = NONE;
  for (uint32_t b = n; b-- > 0;) {
    c->blocks[b].hash_next = NONE;
    c->blocks[b].lru_prev = c->blocks[b].lru_next = NONE;
    block_free(c, b);  // block 0 ends on top of the stack
  }
  for (uint32_t h = 0; h < desc->host_blocks; ++h) {
    c->host_free[h] = desc->host_blocks - 1 - h;  // block 0 taken first
  }
  c->host_free_count = desc->host_blocks;
  *out = c;
  return ACCEL_OK;
}

static void seq_destroy(sequence_t *s) {
  if (s != NULL) {
    free(s->blocks);
    free(s);
  }
}

void accel_kv_cache_destroy(accel_kv_cache_t *c) {
  if (c == NULL) {
    return;
  }
  if (c->seqs.values != NULL) {
    for (uint32_t i = 0; i <= c->seqs.mask; ++i) {
      seq_destroy(c->seqs.values[i]);
    }
  }
  serve_id_map_fini(&c->seqs);
  free(c->blocks);
  free(c->tokens);
  free(c->buckets);
  free(c->host_free);
  free(c->host_tokens);
  free(c->host_filled);
  free(c);
}

static bool prefix_caching(const accel_kv_cache_t *c) {
  return (c->desc.flags & ACCEL_KV_CACHE_PREFIX_CACHING) != 0;
}

// How many leading full blocks of the prompt are cached (never covering its
// last token), and how many of those are cached-but-unreferenced (they stop
// counting as evictable once taken). Read-only.
static uint32_t prefix_hits(const accel_kv_cache_t *c, const int32_t *tokens,
                            uint32_t count, uint32_t *out_unreferenced,
                            uint32_t *hit_blocks) {
  *out_unreferenced = 0;
  if (!prefix_caching(c) || tokens == NULL || count == 0) {
    return 0;
  }
  uint32_t full = (count - 1) / c->bt;
  uint64_t parent = 0;
  uint32_t hits = 0;
  for (; hits < full; ++hits) {
    const int32_t *t = tokens + (uint64_t)hits * c->bt;
    uint64_t h = chain_hash(parent, t, c->bt);
    uint32_t b = hash_lookup(c, h, parent, t);
    if (b == NONE) {
      break;
    }
    if (c->blocks[b].ref == 0) {
      (*out_unreferenced)++;
    }
    if (hit_blocks != NULL) {
      hit_blocks[hits] = b;
    }
    parent = h;
  }
  return hits;
}

static uint32_t blocks_for(const accel_kv_cache_t *c, uint64_t tokens) {
  return (uint32_t)((tokens + c->bt - 1) / c->bt);
}

int accel_kv_cache_can_add(const accel_kv_cache_t *c, const int32_t *tokens,
                           uint32_t count) {
  if (c == NULL || count == 0) {
    return 0;
  }
  uint32_t unreferenced = 0;
  uint32_t hits = prefix_hits(c, tokens, count, &unreferenced, NULL);
  uint32_t need = blocks_for(c, count) - hits;
  return need <= available_blocks(c) - unreferenced;
}

static sequence_t *seq_new(uint64_t id, uint32_t blocks) {
  sequence_t *s = calloc(1, sizeof(*s));
  if (s == NULL) {
    return NULL;
  }
  s->id = id;
  s->cap = blocks > 4 ? blocks : 4;
  s->blocks = malloc((size_t)s->cap * sizeof(uint32_t));
  if (s->blocks == NULL) {
    free(s);
    return NULL;
  }
  return s;
}

accel_status_t accel_kv_cache_add(accel_kv_cache_t *c, uint64_t id,
                                  const int32_t *tokens, uint32_t count,
                                  uint32_t *out_cached_tokens) {
  ACCEL_CHECK_ARG(c != NULL, "cache (NULL)");
  ACCEL_CHECK_ARG(tokens != NULL, "tokens (NULL)");
  if (count == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "KV cache: sequence %llu has an empty prompt",
                       (unsigned long long)id);
  }
  if (seq_find(c, id) != NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "KV cache: sequence %llu already exists",
                       (unsigned long long)id);
  }
  uint32_t nblocks = blocks_for(c, count);
  uint32_t *hit_blocks = malloc((size_t)nblocks * sizeof(uint32_t));
  if (hit_blocks == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "KV cache: prompt table");
  }
  uint32_t unreferenced = 0;
  uint32_t hits = prefix_hits(c, tokens, count, &unreferenced, hit_blocks);
  uint32_t need = nblocks - hits;
  if (need > available_blocks(c) - unreferenced) {
    free(hit_blocks);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "KV cache: sequence %llu needs %u blocks (%u of its "
                       "%u cached), %u free or evictable",
                       (unsigned long long)id, need, hits, nblocks,
                       available_blocks(c) - unreferenced);
  }
  sequence_t *s = seq_new(id, nblocks);
  accel_status_t st = s != NULL ? serve_id_map_reserve(&c->seqs) : ACCEL_ERROR_OUT_OF_MEMORY;
  if (st != ACCEL_OK) {
    free(hit_blocks);
    seq_destroy(s);
    return s == NULL ? accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                                   "KV cache: cannot allocate a sequence")
                     : st;
  }
  // Revive the hits first, so that taking new blocks cannot evict them.
  for (uint32_t i = 0; i < hits; ++i) {
    block_revive(c, hit_blocks[i]);
    s->blocks[i] = hit_blocks[i];
  }
  for (uint32_t i = hits; i < nblocks; ++i) {
    uint32_t b = block_take(c);
    uint64_t first = (uint64_t)i * c->bt;
    uint32_t n = (uint32_t)(count - first < c->bt ? count - first : c->bt);
    memcpy(block_tokens(c, b), tokens + first, (size_t)n * sizeof(int32_t));
    c->blocks[b].filled = n;
    c->live_tokens += n;
    s->blocks[i] = b;
  }
  free(hit_blocks);
  s->count = nblocks;
  s->tokens = count;
  s->computed = (uint64_t)hits * c->bt;
  serve_id_map_insert(&c->seqs, s->id, s);
  if (prefix_caching(c)) {
    c->stats.prefix_queries += (count - 1) / c->bt;
    c->stats.prefix_hits += hits;
  }
  if (out_cached_tokens != NULL) {
    *out_cached_tokens = hits * c->bt;
  }
  return ACCEL_OK;
}

static accel_status_t seq_lookup(const accel_kv_cache_t *c, uint64_t id,
                                 sequence_t **out, bool want_resident) {
  sequence_t *s = seq_find(c, id);
  if (s == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND, "KV cache: no sequence %llu",
                       (unsigned long long)id);
  }
  if (want_resident && s->swapped) {
    return accel_error(ACCEL_ERROR_BUSY,
                       "KV cache: sequence %llu is swapped out",
                       (unsigned long long)id);
  }
  *out = s;
  return ACCEL_OK;
}

static accel_status_t seq_push_block(sequence_t *s, uint32_t b) {
  if (s->count == s->cap) {
    uint32_t cap = s->cap * 2;
    uint32_t *grown = realloc(s->blocks, (size_t)cap * sizeof(uint32_t));
    if (grown == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "KV cache: block table of %u", cap);
    }
    s->blocks = grown;
    s->cap = cap;
  }
  s->blocks[s->count++] = b;
  return ACCEL_OK;
}

accel_status_t accel_kv_cache_append(accel_kv_cache_t *c, uint64_t id,
                                     int32_t token, accel_kv_copy_t *out_copy,
                                     uint32_t *out_copied) {
  ACCEL_CHECK_ARG(c != NULL, "cache (NULL)");
  ACCEL_CHECK_ARG(out_copy != NULL && out_copied != NULL, "output (NULL)");
  sequence_t *s = NULL;
  ACCEL_RETURN_IF_ERROR(seq_lookup(c, id, &s, true));
  *out_copied = 0;
  if (s->tokens % c->bt == 0) {  // the last block is full: a new one
    if (available_blocks(c) == 0) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "KV cache: no block free or evictable for sequence "
                         "%llu",
                         (unsigned long long)id);
    }
    if (s->count == s->cap) {
      ACCEL_RETURN_IF_ERROR(seq_push_block(s, NONE));  // grow first
      s->count--;
    }
    uint32_t b = block_take(c);
    s->blocks[s->count++] = b;
  } else {
    uint32_t last = s->blocks[s->count - 1];
    if (c->blocks[last].ref > 1) {  // shared and not full: copy on write
      if (available_blocks(c) == 0) {
        return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                           "KV cache: no block free or evictable for the "
                           "copy-on-write of sequence %llu",
                           (unsigned long long)id);
      }
      uint32_t b = block_take(c);
      memcpy(block_tokens(c, b), block_tokens(c, last),
             (size_t)c->blocks[last].filled * sizeof(int32_t));
      c->blocks[b].filled = c->blocks[last].filled;
      c->live_tokens += c->blocks[b].filled;
      block_release(c, last);
      s->blocks[s->count - 1] = b;
      *out_copy = (accel_kv_copy_t){.src = last, .dst = b};
      *out_copied = 1;
      c->stats.copies_on_write++;
    }
  }
  uint32_t b = s->blocks[s->count - 1];
  block_tokens(c, b)[c->blocks[b].filled++] = token;
  c->live_tokens++;
  s->tokens++;
  return ACCEL_OK;
}

accel_status_t accel_kv_cache_fork(accel_kv_cache_t *c, uint64_t parent,
                                   uint64_t child) {
  ACCEL_CHECK_ARG(c != NULL, "cache (NULL)");
  sequence_t *p = NULL;
  ACCEL_RETURN_IF_ERROR(seq_lookup(c, parent, &p, true));
  if (seq_find(c, child) != NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "KV cache: sequence %llu already exists",
                       (unsigned long long)child);
  }
  sequence_t *s = seq_new(child, p->count);
  accel_status_t st = s != NULL ? serve_id_map_reserve(&c->seqs) : ACCEL_ERROR_OUT_OF_MEMORY;
  if (st != ACCEL_OK) {
    seq_destroy(s);
    return s == NULL ? accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                                   "KV cache: cannot allocate a sequence")
                     : st;
  }
  for (uint32_t i = 0; i < p->count; ++i) {
    s->blocks[i] = p->blocks[i];
    c->blocks[p->blocks[i]].ref++;
  }
  s->count = p->count;
  s->tokens = p->tokens;
  s->computed = p->computed;
  serve_id_map_insert(&c->seqs, s->id, s);
  return ACCEL_OK;
}

accel_status_t accel_kv_cache_set_computed(accel_kv_cache_t *c, uint64_t id,
                                           uint64_t tokens) {
  ACCEL_CHECK_ARG(c != NULL, "cache (NULL)");
  sequence_t *s = NULL;
  ACCEL_RETURN_IF_ERROR(seq_lookup(c, id, &s, true));
  if (tokens > s->tokens) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "KV cache: sequence %llu has %llu tokens, not %llu",
                       (unsigned long long)id,
                       (unsigned long long)s->tokens,
                       (unsigned long long)tokens);
  }
  if (tokens > s->computed) {
    s->computed = tokens;
  }
  if (!prefix_caching(c)) {
    return ACCEL_OK;
  }
  uint64_t parent = 0;
  uint32_t full = (uint32_t)(s->computed / c->bt);
  for (uint32_t i = 0; i < full; ++i) {
    uint32_t b = s->blocks[i];
    block_t *k = &c->blocks[b];
    if (k->registered) {
      parent = k->hash;
      continue;
    }
    uint64_t h = chain_hash(parent, block_tokens(c, b), c->bt);
    // Another block may already hold the same prefix (two sequences that
    // computed it at once): keep that one findable, this one private.
    if (hash_lookup(c, h, parent, block_tokens(c, b)) == NONE) {
      k->hash = h;
      k->parent_hash = parent;
      k->registered = true;
      uint32_t *head = &c->buckets[h & c->bucket_mask];
      k->hash_next = *head;
      *head = b;
    }
    parent = h;
  }
  return ACCEL_OK;
}

accel_status_t accel_kv_cache_free(accel_kv_cache_t *c, uint64_t id) {
  ACCEL_CHECK_ARG(c != NULL, "cache (NULL)");
  sequence_t *s = NULL;
  ACCEL_RETURN_IF_ERROR(seq_lookup(c, id, &s, false));
  for (uint32_t i = s->count; i-- > 0;) {  // the tail becomes oldest
    if (s->swapped) {
      c->host_free[c->host_free_count++] = s->blocks[i];
    } else {
      block_release(c, s->blocks[i]);
    }
  }
  if (s->swapped) {
    c->swapped_count--;
  }
  serve_id_map_remove(&c->seqs, id);
  seq_destroy(s);
  return ACCEL_OK;
}

accel_status_t accel_kv_cache_block_table(const accel_kv_cache_t *c,
                                          uint64_t id, uint32_t *blocks,
                                          uint32_t capacity,
                                          uint32_t *out_count,
                                          uint64_t *out_tokens) {
  ACCEL_CHECK_ARG(c != NULL, "cache (NULL)");
  ACCEL_CHECK_ARG(blocks != NULL || capacity == 0, "blocks (NULL)");
  sequence_t *s = NULL;
  ACCEL_RETURN_IF_ERROR(seq_lookup(c, id, &s, true));
  uint32_t n = s->count < capacity ? s->count : capacity;
  if (n != 0) {
    memcpy(blocks, s->blocks, (size_t)n * sizeof(uint32_t));
  }
  if (out_count != NULL) {
    *out_count = s->count;
  }
  if (out_tokens != NULL) {
    *out_tokens = s->tokens;
  }
  return ACCEL_OK;
}

// Refuses a copy list shorter than |s|'s block table.
static accel_status_t check_copy_room(const sequence_t *s, uint32_t capacity) {
  if (capacity < s->count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "KV cache: %u copies for the %u blocks of sequence "
                       "%llu",
                       capacity, s->count, (unsigned long long)s->id);
  }
  return ACCEL_OK;
}

accel_status_t accel_kv_cache_swap_out(accel_kv_cache_t *c, uint64_t id,
                                       accel_kv_copy_t *copies,
                                       uint32_t capacity,
                                       uint32_t *out_count) {
  ACCEL_CHECK_ARG(c != NULL, "cache (NULL)");
  ACCEL_CHECK_ARG(copies != NULL && out_count != NULL, "output (NULL)");
  sequence_t *s = NULL;
  ACCEL_RETURN_IF_ERROR(seq_lookup(c, id, &s, true));
  ACCEL_RETURN_IF_ERROR(check_copy_room(s, capacity));
  if (c->host_free_count < s->count) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "KV cache: sequence %llu needs %u host blocks, %u "
                       "free",
                       (unsigned long long)id, s->count, c->host_free_count);
  }
  for (uint32_t i = 0; i < s->count; ++i) {
    uint32_t b = s->blocks[i];
    uint32_t h = c->host_free[--c->host_free_count];
    memcpy(c->host_tokens + (uint64_t)h * c->bt, block_tokens(c, b),
           (size_t)c->blocks[b].filled * sizeof(int32_t));
    c->host_filled[h] = c->blocks[b].filled;
    copies[i] = (accel_kv_copy_t){.src = b, .dst = h};
    block_release(c, b);
    s->blocks[i] = h;
  }
  s->swapped = true;
  c->swapped_count++;
  *out_count = s->count;
  return ACCEL_OK;
}

accel_status_t accel_kv_cache_swap_in(accel_kv_cache_t *c, uint64_t id,
                                      accel_kv_copy_t *copies,
                                      uint32_t capacity,
                                      uint32_t *out_count) {
  ACCEL_CHECK_ARG(c != NULL, "cache (NULL)");
  ACCEL_CHECK_ARG(copies != NULL && out_count != NULL, "output (NULL)");
  sequence_t *s = NULL;
  ACCEL_RETURN_IF_ERROR(seq_lookup(c, id, &s, false));
  if (!s->swapped) {
    return accel_error(ACCEL_ERROR_BUSY,
                       "KV cache: sequence %llu is not swapped out",
                       (unsigned long long)id);
  }
  ACCEL_RETURN_IF_ERROR(check_copy_room(s, capacity));
  if (available_blocks(c) < s->count) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "KV cache: sequence %llu needs %u device blocks, %u "
                       "free or evictable",
                       (unsigned long long)id, s->count, available_blocks(c));
  }
  for (uint32_t i = 0; i < s->count; ++i) {
    uint32_t h = s->blocks[i];
    uint32_t b = block_take(c);
    memcpy(block_tokens(c, b), c->host_tokens + (uint64_t)h * c->bt,
           (size_t)c->host_filled[h] * sizeof(int32_t));
    c->blocks[b].filled = c->host_filled[h];
    c->live_tokens += c->blocks[b].filled;
    c->host_free[c->host_free_count++] = h;
    copies[i] = (accel_kv_copy_t){.src = h, .dst = b};
    s->blocks[i] = b;
  }
  s->swapped = false;
  c->swapped_count--;
  *out_count = s->count;
  return ACCEL_OK;
}

accel_status_t accel_kv_cache_stats(const accel_kv_cache_t *c,
                                    accel_kv_cache_stats_t *out) {
  ACCEL_CHECK_ARG(c != NULL, "cache (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out (NULL)");
  if (out->struct_size < sizeof(*out)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "KV cache: stats struct_size %u, expected %zu",
                       out->struct_size, sizeof(*out));
  }
  accel_kv_cache_stats_t s = c->stats;
  s.struct_size = sizeof(s);
  s.block_tokens = c->bt;
  s.host_blocks = c->desc.host_blocks;
  s.device_blocks = c->desc.device_blocks;
  s.free_blocks = c->free_count;
  s.cached_blocks = c->cached_count;
  s.used_blocks = c->desc.device_blocks - c->free_count - c->cached_count;
  s.host_used_blocks = c->desc.host_blocks - c->host_free_count;
  s.sequences = c->seqs.count;
  s.swapped_sequences = c->swapped_count;
  s.token_slots = (uint64_t)s.used_blocks * c->bt;
  s.tokens = c->live_tokens;
  *out = s;
  return ACCEL_OK;
}
