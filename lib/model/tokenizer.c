// Loading a tokenizer from a GGUF vocabulary (docs/tokenizers.md): every
// array is checked for its type and length, the texts are copied into one
// arena, and the text -> id and merge tables are built once, so that
// loading is linear in the vocabulary and merges.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xxhash.h>

#include "core/error.h"
#include "model/tokenizer_impl.h"

#define KEY_PREFIX "tokenizer.ggml."

// ---- tables -----------------------------------------------------------------

// The hash tables are probed at random, so a large one is mapped apart and
// asked for transparent huge pages: one TLB entry and one fault per 2 MiB
// instead of 512 (loading llama-bpe touches 16 MiB of tables).
#define HUGE_TABLE_BYTES (2u << 20)

static void *table_alloc(size_t count, size_t elem) {
  size_t bytes = count * elem;
  if (bytes < HUGE_TABLE_BYTES) {
    return calloc(count, elem);
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return NULL;
  }
  (void)madvise(p, bytes, MADV_HUGEPAGE);  // a hint: fine if refused
  return p;
}

static void table_free(void *p, size_t count, size_t elem) {
  if (p == NULL) {
    return;
  }
  if (count * elem < HUGE_TABLE_BYTES) {
    free(p);
  } else {
    munmap(p, count * elem);
  }
}

static uint64_t table_size(uint64_t n) {
  uint64_t size = 16;
  while (size < 2 * n) {
    size <<= 1;
  }
  return size;
}

// tok_find with the text's XXH3 hash |h| already computed.
static int32_t find_hashed(const accel_tokenizer_t *t, const char *s,
                           size_t len, uint64_t h) {
  uint32_t tag = (uint32_t)(h >> 32);
  for (uint64_t i = h & t->by_text_mask;; i = (i + 1) & t->by_text_mask) {
    const text_slot_t *slot = &t->by_text[i];
    if (slot->id_plus1 == 0) {
      return -1;
    }
    if (slot->tag == tag && slot->size == len &&
        memcmp(t->text + slot->offset, s, len) == 0) {
      return (int32_t)(slot->id_plus1 - 1);
    }
  }
}

int32_t tok_find(const accel_tokenizer_t *t, const char *s, size_t len) {
  return find_hashed(t, s, len, XXH3_64bits(s, len));
}

static void text_insert(accel_tokenizer_t *t, int32_t id, uint64_t h) {
  size_t len;
  const char *s = tok_text(t, id, &len);
  text_slot_t fresh = {(uint32_t)id + 1, (uint32_t)(h >> 32),
                       (uint32_t)t->offset[id], (uint32_t)len};
  for (uint64_t i = h & t->by_text_mask;; i = (i + 1) & t->by_text_mask) {
    text_slot_t *slot = &t->by_text[i];
    if (slot->id_plus1 == 0 || (slot->tag == fresh.tag && slot->size == len &&
                                memcmp(t->text + slot->offset, s, len) == 0)) {
      *slot = fresh;  // a later duplicate wins
      return;
    }
  }
}

static inline uint64_t pair_hash(int32_t left, int32_t right) {
  uint64_t k = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
  // MurmurHash3's full finalizer: the table masks the low bits, which a
  // single round leaves as little more than right ^ (left >> 1) (a
  // 280k-merge load took 80 ms of probing with it, 4 ms without).
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

const merge_slot_t *tok_find_merge(const accel_tokenizer_t *t, int32_t left,
                                   int32_t right) {
  uint64_t i = pair_hash(left, right) & t->merges_mask;
  for (;; i = (i + 1) & t->merges_mask) {
    const merge_slot_t *m = &t->merges[i];
    if (m->left_plus1 == 0) {
      return NULL;
    }
    if (m->left_plus1 == left + 1 && m->right == right) {
      return m;
    }
  }
}

// ---- loading ----------------------------------------------------------------

// Finds the array |key| with elements of |elem_type| (the GGUF reader's
// types; INT32 also accepts UINT32). |required|: NOT_FOUND/FORMAT when
// absent; otherwise *out_found says.
static accel_status_t find_array(const accel_gguf_t *g, const char *key,
                                 uint32_t elem_type, accel_status_t missing,
                                 accel_gguf_value_t *out, bool *out_found) {
  accel_gguf_value_t v;
  if (accel_gguf_find_kv(g, key, &v) != ACCEL_OK) {
    *out_found = false;
    if (missing == ACCEL_OK) {
      return ACCEL_OK;
    }
    return accel_error(missing, "tokenizer: the vocabulary has no %s", key);
  }
  bool ok =
      v.type == ACCEL_GGUF_VALUE_ARRAY &&
      (v.array_type == elem_type || (elem_type == ACCEL_GGUF_VALUE_INT32 &&
                                     v.array_type == ACCEL_GGUF_VALUE_UINT32));
  if (!ok) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "tokenizer: %s is not an array of %s (value type %u, "
                       "element type %u)",
                       key,
                       elem_type == ACCEL_GGUF_VALUE_STRING    ? "strings"
                       : elem_type == ACCEL_GGUF_VALUE_FLOAT32 ? "float32"
                                                               : "int32",
                       v.type, v.array_type);
  }
  *out = v;
  *out_found = true;
  return ACCEL_OK;
}

static accel_status_t find_bool(const accel_gguf_t *g, const char *key,
                                bool *inout) {
  accel_gguf_value_t v;
  if (accel_gguf_find_kv(g, key, &v) != ACCEL_OK) {
    return ACCEL_OK;  // absent: the default stays
  }
  if (v.type != ACCEL_GGUF_VALUE_BOOL) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "tokenizer: %s has value type %u, not bool", key,
                       v.type);
  }
  *inout = v.scalar.u64 != 0;
  return ACCEL_OK;
}

// A special token id: absent keeps the default (cleared when out of the
// vocabulary); present must name a token.
static accel_status_t find_id(const accel_gguf_t *g, const char *key,
                              uint32_t n_tokens, int32_t *inout) {
  uint64_t id;
  accel_gguf_value_t v;
  if (accel_gguf_find_kv(g, key, &v) != ACCEL_OK) {
    if (*inout >= 0 && (uint32_t)*inout >= n_tokens) {
      *inout = -1;
    }
    return ACCEL_OK;
  }
  ACCEL_RETURN_IF_ERROR(accel_gguf_find_u64(g, key, &id));
  if (id >= n_tokens) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "tokenizer: %s is %llu, beyond the %u tokens", key,
                       (unsigned long long)id, n_tokens);
  }
  *inout = (int32_t)id;
  return ACCEL_OK;
}

static accel_status_t load_model_kind(const accel_gguf_t *g,
                                      accel_tokenizer_t *t) {
  accel_gguf_string_t model;
  accel_status_t st = accel_gguf_find_string(g, KEY_PREFIX "model", &model);
  if (st == ACCEL_ERROR_NOT_FOUND) {
    return accel_error(st, "tokenizer: the file has no " KEY_PREFIX
                           "model "
                           "(no vocabulary)");
  }
  ACCEL_RETURN_IF_ERROR(st);
  if (model.size == 5 && memcmp(model.data, "llama", 5) == 0) {
    t->kind = ACCEL_TOKENIZER_KIND_SPM;
    t->pretok = PRETOK_NONE;
    t->add_bos = true;
    t->add_space_prefix = true;
    t->bos = 1;
    t->eos = 2;
    t->unk = 0;
    return ACCEL_OK;
  }
  if (!(model.size == 4 && memcmp(model.data, "gpt2", 4) == 0)) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "tokenizer: model \"%.*s\" is not supported (llama, "
                       "gpt2)",
                       (int)(model.size > 64 ? 64 : model.size), model.data);
  }
  t->kind = ACCEL_TOKENIZER_KIND_BPE;
  t->bos = 11;  // llama.cpp's defaults for gpt2 vocabularies
  t->eos = 11;
  t->unk = -1;
  accel_gguf_string_t pre = {"default", 7};
  st = accel_gguf_find_string(g, KEY_PREFIX "pre", &pre);
  if (st != ACCEL_OK && st != ACCEL_ERROR_NOT_FOUND) {
    return st;
  }
  static const struct {
    const char *name;
    pretok_kind_t kind;
  } kPre[] = {{"llama-bpe", PRETOK_LLAMA3},
              {"llama3", PRETOK_LLAMA3},
              {"llama-v3", PRETOK_LLAMA3},
              {"qwen2", PRETOK_QWEN2}};
  for (size_t i = 0; i < sizeof(kPre) / sizeof(kPre[0]); ++i) {
    if (strlen(kPre[i].name) == pre.size &&
        memcmp(kPre[i].name, pre.data, pre.size) == 0) {
      t->pretok = kPre[i].kind;
      // llama.cpp: llama-3 vocabularies look whole words up before merging
      // and add BOS unless the file says otherwise.
      t->ignore_merges = t->add_bos = kPre[i].kind == PRETOK_LLAMA3;
      return ACCEL_OK;
    }
  }
  return accel_error(ACCEL_ERROR_UNSUPPORTED,
                     "tokenizer: pre-tokenizer \"%.*s\" is not supported "
                     "(llama-bpe, qwen2)",
                     (int)(pre.size > 64 ? 64 : pre.size), pre.data);
}

static accel_status_t load_tokens(const accel_gguf_t *g, accel_tokenizer_t *t) {
  accel_gguf_value_t tokens = {0};
  bool found;
  ACCEL_RETURN_IF_ERROR(find_array(g, KEY_PREFIX "tokens",
                                   ACCEL_GGUF_VALUE_STRING,
                                   ACCEL_ERROR_NOT_FOUND, &tokens, &found));
  if (tokens.array_count == 0 || tokens.array_count >= INT32_MAX) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "tokenizer: " KEY_PREFIX
                       "tokens has %llu entries "
                       "(1 to %d)",
                       (unsigned long long)tokens.array_count, INT32_MAX - 1);
  }
  uint32_t n = (uint32_t)tokens.array_count;
  t->n_tokens = n;
  t->offset = malloc((n + 1) * sizeof(*t->offset));
  t->type = malloc(n);
  if (t->offset == NULL || t->type == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "tokenizer: no memory for %u tokens", n);
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; ++i) {
    accel_gguf_string_t s;
    ACCEL_RETURN_IF_ERROR(accel_gguf_array_string(g, &tokens, i, &s));
    t->offset[i] = total;
    total += s.size;
  }
  t->offset[n] = total;
  if (total > UINT32_MAX) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "tokenizer: %llu bytes of token text (at most 4 GiB)",
                       (unsigned long long)total);
  }
  t->text = malloc(total != 0 ? total : 1);
  if (t->text == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "tokenizer: no memory for %llu bytes of token text",
                       (unsigned long long)total);
  }
  for (uint32_t i = 0; i < n; ++i) {
    accel_gguf_string_t s;
    ACCEL_RETURN_IF_ERROR(accel_gguf_array_string(g, &tokens, i, &s));
    memcpy(t->text + t->offset[i], s.data, s.size);
  }

  accel_gguf_value_t types = {0};
  ACCEL_RETURN_IF_ERROR(find_array(g, KEY_PREFIX "token_type",
                                   ACCEL_GGUF_VALUE_INT32, ACCEL_OK, &types,
                                   &found));
  if (found && types.array_count != n) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "tokenizer: " KEY_PREFIX
                       "token_type has %llu entries "
                       "for %u tokens",
                       (unsigned long long)types.array_count, n);
  }
  for (uint32_t i = 0; i < n; ++i) {
    int32_t ty = TOKEN_TYPE_NORMAL;
    if (found) {
      memcpy(&ty, (const uint8_t *)types.array_data + 4ull * i, 4);
    }
    if (ty < 0 || ty > TOKEN_TYPE_BYTE) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "tokenizer: " KEY_PREFIX
                         "token_type[%u] is %d "
                         "(0 to 6)",
                         i, ty);
    }
    t->type[i] = (uint8_t)ty;
  }

  accel_gguf_value_t scores = {0};
  ACCEL_RETURN_IF_ERROR(find_array(
      g, KEY_PREFIX "scores", ACCEL_GGUF_VALUE_FLOAT32,
      t->kind == ACCEL_TOKENIZER_KIND_SPM ? ACCEL_ERROR_FORMAT : ACCEL_OK,
      &scores, &found));
  if (found && scores.array_count != n) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "tokenizer: " KEY_PREFIX
                       "scores has %llu entries for "
                       "%u tokens",
                       (unsigned long long)scores.array_count, n);
  }
  if (t->kind == ACCEL_TOKENIZER_KIND_SPM) {
    t->scores = malloc(n * sizeof(float));
    if (t->scores == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "tokenizer: no memory for %u scores", n);
    }
    memcpy(t->scores, scores.array_data, n * sizeof(float));
  }

  t->by_text_mask = table_size(n) - 1;
  t->by_text = table_alloc(t->by_text_mask + 1, sizeof(*t->by_text));
  if (t->by_text == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "tokenizer: no memory for the token table");
  }
  // In batches, the slots prefetched first: the inserts are cache misses
  // in a table of several MiB (as the merges below).
  for (uint32_t base = 0; base < n; base += 64) {
    uint32_t m = n - base < 64 ? n - base : 64;
    uint64_t h[64];
    for (uint32_t k = 0; k < m; ++k) {
      size_t len;
      const char *s = tok_text(t, (int32_t)(base + k), &len);
      h[k] = XXH3_64bits(s, len);
      __builtin_prefetch(&t->by_text[h[k] & t->by_text_mask], 1);
    }
    for (uint32_t k = 0; k < m; ++k) {
      text_insert(t, (int32_t)(base + k), h[k]);
    }
  }
  return ACCEL_OK;
}

static accel_status_t load_merges(const accel_gguf_t *g, accel_tokenizer_t *t) {
  accel_gguf_value_t merges = {0};
  bool found;
  ACCEL_RETURN_IF_ERROR(find_array(g, KEY_PREFIX "merges",
                                   ACCEL_GGUF_VALUE_STRING, ACCEL_ERROR_FORMAT,
                                   &merges, &found));
  if (merges.array_count > (1u << 24)) {  // ranks are exact in a float
    return accel_error(ACCEL_ERROR_FORMAT,
                       "tokenizer: " KEY_PREFIX "merges has %llu entries (at "
                       "most 2^24)",
                       (unsigned long long)merges.array_count);
  }
  t->merges_mask = table_size(merges.array_count) - 1;
  t->merges = table_alloc(t->merges_mask + 1, sizeof(*t->merges));
  if (t->merges == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "tokenizer: no memory for %llu merges",
                       (unsigned long long)merges.array_count);
  }
  // In batches, prefetching each stage's slots and texts before the next
  // stage reads them: the lookups are cache misses in tables of several
  // MiB, and overlapping them took llama-bpe's 280k merges from about
  // 50 ms to about 20 ms of CPU time here.
  enum { BATCH = 64 };
  struct pending {
    const char *l, *r;
    size_t ln, rn;
    uint64_t hl, hr, slot;
    int32_t left, right;
  } p[BATCH];
  const uint64_t mask = t->by_text_mask;
  for (uint64_t base = 0; base < merges.array_count; base += BATCH) {
    uint64_t m =
        merges.array_count - base < BATCH ? merges.array_count - base : BATCH;
    uint64_t bad = UINT64_MAX;  // a merge without a space, if any
    for (uint64_t k = 0; k < m; ++k) {
      accel_gguf_string_t s;
      ACCEL_RETURN_IF_ERROR(accel_gguf_array_string(g, &merges, base + k, &s));
      // As llama.cpp: the first space after the first byte splits the pair.
      const char *sp = s.size > 1 ? memchr(s.data + 1, ' ', s.size - 1) : NULL;
      if (sp == NULL) {
        bad = base + k;
        p[k].l = s.data, p[k].ln = s.size;
        m = k;
        break;
      }
      p[k].l = s.data, p[k].ln = (size_t)(sp - s.data);
      p[k].r = sp + 1, p[k].rn = s.size - p[k].ln - 1;
      p[k].hl = XXH3_64bits(p[k].l, p[k].ln);
      p[k].hr = XXH3_64bits(p[k].r, p[k].rn);
      __builtin_prefetch(&t->by_text[p[k].hl & mask]);
      __builtin_prefetch(&t->by_text[p[k].hr & mask]);
    }
    for (uint64_t k = 0; k < m; ++k) {
      __builtin_prefetch(t->text + t->by_text[p[k].hl & mask].offset);
      __builtin_prefetch(t->text + t->by_text[p[k].hr & mask].offset);
    }
    for (uint64_t k = 0; k < m; ++k) {
      p[k].left = find_hashed(t, p[k].l, p[k].ln, p[k].hl);
      p[k].right = find_hashed(t, p[k].r, p[k].rn, p[k].hr);
      if (p[k].left < 0 || p[k].right < 0) {
        const char *name = p[k].left < 0 ? p[k].l : p[k].r;
        size_t size = p[k].left < 0 ? p[k].ln : p[k].rn;
        return accel_error(ACCEL_ERROR_FORMAT,
                           "tokenizer: " KEY_PREFIX
                           "merges[%llu] names "
                           "\"%.*s\", which is not a token",
                           (unsigned long long)(base + k),
                           (int)(size > 64 ? 64 : size), name);
      }
      p[k].slot = pair_hash(p[k].left, p[k].right) & t->merges_mask;
      __builtin_prefetch(&t->merges[p[k].slot]);
    }
    for (uint64_t k = 0; k < m; ++k) {
      uint64_t i = p[k].slot;
      merge_slot_t *slot = &t->merges[i];
      while (slot->left_plus1 != 0 && !(slot->left_plus1 == p[k].left + 1 &&
                                        slot->right == p[k].right)) {
        i = (i + 1) & t->merges_mask;
        slot = &t->merges[i];
      }
      if (slot->left_plus1 == 0) {  // the first rank of a pair counts
        *slot = (merge_slot_t){p[k].left + 1, p[k].right, (int32_t)(base + k)};
      }
    }
    if (bad != UINT64_MAX) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "tokenizer: " KEY_PREFIX
                         "merges[%llu] \"%.*s\" is "
                         "not two tokens separated by a space",
                         (unsigned long long)bad,
                         (int)(p[m].ln > 64 ? 64 : p[m].ln), p[m].l);
    }
  }
  return ACCEL_OK;
}

static int compare_user_defined(const void *a, const void *b, void *arg) {
  const accel_tokenizer_t *t = arg;
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  uint64_t lx = t->offset[x + 1] - t->offset[x];
  uint64_t ly = t->offset[y + 1] - t->offset[y];
  if (lx != ly) {
    return lx > ly ? -1 : 1;
  }
  return x < y ? -1 : x > y;
}

static int compare_user_prefix(const void *a, const void *b, void *arg) {
  const accel_tokenizer_t *t = arg;
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  uint32_t px = tok_user_prefix(t, x), py = tok_user_prefix(t, y);
  if (px != py) {
    return px < py ? -1 : 1;
  }
  return x < y ? -1 : x > y;
}

static accel_status_t load_specials(const accel_gguf_t *g,
                                    accel_tokenizer_t *t) {
  uint32_t n = t->n_tokens;
  ACCEL_RETURN_IF_ERROR(find_id(g, KEY_PREFIX "bos_token_id", n, &t->bos));
  ACCEL_RETURN_IF_ERROR(find_id(g, KEY_PREFIX "eos_token_id", n, &t->eos));
  ACCEL_RETURN_IF_ERROR(find_id(g, KEY_PREFIX "unknown_token_id", n, &t->unk));
  ACCEL_RETURN_IF_ERROR(find_bool(g, KEY_PREFIX "add_bos_token", &t->add_bos));
  ACCEL_RETURN_IF_ERROR(find_bool(g, KEY_PREFIX "add_eos_token", &t->add_eos));
  ACCEL_RETURN_IF_ERROR(
      find_bool(g, KEY_PREFIX "add_space_prefix", &t->add_space_prefix));

  for (int b = 0; b < 256; ++b) {
    char buf[8];
    if (t->kind == ACCEL_TOKENIZER_KIND_SPM) {
      snprintf(buf, sizeof(buf), "<0x%02X>", b);
      int32_t id = tok_find(t, buf, 6);
      buf[0] = (char)b;
      t->byte_token[b] = id >= 0 ? id : tok_find(t, buf, 1);
      if (t->byte_token[b] < 0) {
        t->byte_token[b] = t->unk;
      }
      t->raw_byte_token[b] = -1;
    } else {
      size_t len = tok_byte_char((uint8_t)b, buf);
      t->byte_token[b] = tok_find(t, buf, len);
      buf[0] = (char)b;
      t->raw_byte_token[b] = tok_find(t, buf, 1);
    }
  }

  uint32_t count = 0;
  for (uint32_t i = 0; i < n; ++i) {
    count += t->type[i] == TOKEN_TYPE_USER_DEFINED &&
             t->offset[i + 1] > t->offset[i];
  }
  t->user_defined = malloc((count != 0 ? count : 1) * sizeof(int32_t));
  if (t->user_defined == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "tokenizer: no memory for %u user-defined tokens",
                       count);
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (t->type[i] == TOKEN_TYPE_USER_DEFINED &&
        t->offset[i + 1] > t->offset[i]) {
      t->user_defined[t->n_user_defined++] = (int32_t)i;
      uint8_t first = (uint8_t)t->text[t->offset[i]];
      t->user_first_byte[first >> 3] |= (uint8_t)(1u << (first & 7));
    }
  }
  qsort_r(t->user_defined, t->n_user_defined, sizeof(int32_t),
          compare_user_defined, t);
  memset(t->user_single, 0xff, sizeof(t->user_single));
  t->user_by_prefix = malloc((count != 0 ? count : 1) * sizeof(uint32_t));
  if (t->user_by_prefix == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "tokenizer: no memory for %u user-defined tokens",
                       count);
  }
  for (uint32_t r = 0; r < t->n_user_defined; ++r) {
    int32_t id = t->user_defined[r];
    if (t->offset[id + 1] - t->offset[id] >= 2) {
      t->user_by_prefix[t->n_user_by_prefix++] = r;
    } else if (t->user_single[(uint8_t)t->text[t->offset[id]]] < 0) {
      t->user_single[(uint8_t)t->text[t->offset[id]]] = (int32_t)r;
    }
  }
  qsort_r(t->user_by_prefix, t->n_user_by_prefix, sizeof(uint32_t),
          compare_user_prefix, t);
  return ACCEL_OK;
}

accel_status_t accel_tokenizer_create_from_gguf(const accel_gguf_t *gguf,
                                                accel_tokenizer_t **out) {
  if (gguf == NULL || out == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_tokenizer_create_from_gguf: %s is NULL",
                       gguf == NULL ? "gguf" : "out");
  }
  accel_tokenizer_t *t = calloc(1, sizeof(*t));
  if (t == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "tokenizer: no memory for the tokenizer");
  }
  accel_status_t st = load_model_kind(gguf, t);
  if (st == ACCEL_OK) {
    st = load_tokens(gguf, t);
  }
  if (st == ACCEL_OK && t->kind == ACCEL_TOKENIZER_KIND_BPE) {
    st = load_merges(gguf, t);
  }
  if (st == ACCEL_OK) {
    st = load_specials(gguf, t);
  }
  if (st != ACCEL_OK) {
    accel_tokenizer_destroy(t);
    return st;
  }
  *out = t;
  return ACCEL_OK;
}

void accel_tokenizer_destroy(accel_tokenizer_t *tokenizer) {
  if (tokenizer == NULL) {
    return;
  }
  free(tokenizer->text);
  free(tokenizer->offset);
  free(tokenizer->scores);
  free(tokenizer->type);
  table_free(tokenizer->by_text, tokenizer->by_text_mask + 1,
             sizeof(*tokenizer->by_text));
  table_free(tokenizer->merges, tokenizer->merges_mask + 1,
             sizeof(*tokenizer->merges));
  free(tokenizer->user_defined);
  free(tokenizer->user_by_prefix);
  free(tokenizer);
}

accel_tokenizer_kind_t accel_tokenizer_kind(const accel_tokenizer_t *t) {
  return t != NULL ? t->kind : (accel_tokenizer_kind_t)0;
}

uint32_t accel_tokenizer_vocab_size(const accel_tokenizer_t *t) {
  return t != NULL ? t->n_tokens : 0;
}

int32_t accel_tokenizer_bos(const accel_tokenizer_t *t) {
  return t != NULL ? t->bos : -1;
}

int32_t accel_tokenizer_eos(const accel_tokenizer_t *t) {
  return t != NULL ? t->eos : -1;
}
