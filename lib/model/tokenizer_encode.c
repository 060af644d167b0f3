// Encoding (docs/tokenizers.md): user-defined tokens are split out of the
// text first, then each piece of raw text is encoded by SentencePiece's
// bigram merges (highest score first) or by BPE merges (lowest rank first,
// word by word after the pre-tokenizer). Both keep their candidate pairs in
// one binary heap and skip pairs made stale by an earlier merge, as
// llama.cpp does, so that a text of n bytes costs O(n log n).
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/tokenizer_impl.h"

typedef struct symbol {
  uint32_t start;  // byte offset in the buffer being merged
  uint32_t n;      // bytes; 0 once merged into its left neighbour
  int32_t prev, next;
  int32_t id;  // BPE: the token of the symbol's text, or -1
} symbol_t;

// A candidate merge of symbols |left| and |right|. SentencePiece orders by
// score (higher first), BPE by rank (|score| = -rank, exact in a float as
// the loader allows at most 2^24 merges); ties go to the leftmost pair, as
// llama.cpp's comparators do. |size| is the pair's bytes when pushed:
// symbols only grow, so while both are alive their sizes add up to it
// exactly when neither has merged since (the candidate is not stale).
// 16 bytes: the heap of a long text is many MiB and sifts miss the cache.
typedef struct bigram {
  float score;
  int32_t left, right;
  uint32_t size;
} bigram_t;

typedef struct work {
  const accel_tokenizer_t *t;
  int32_t *ids;
  size_t n_ids, cap_ids;
  symbol_t *sym;
  size_t cap_sym;
  bigram_t *heap;
  size_t n_heap, cap_heap;
  char *buf;  // the text being merged (escaped or byte-level)
  size_t cap_buf;
  char *enc;  // BPE: a word in the byte-level alphabet
  size_t cap_enc;
  uint32_t *cps;
  uint32_t *lens;
  size_t cap_cps;
} work_t;

static accel_status_t grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) {
    return ACCEL_OK;
  }
  size_t cap2 = *cap != 0 ? *cap : 64;
  while (cap2 < need) {
    cap2 *= 2;
  }
  void *q = realloc(*p, cap2 * elem);
  if (q == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "tokenizer: no memory to encode (%zu elements)", need);
  }
  *p = q;
  *cap = cap2;
  return ACCEL_OK;
}

static accel_status_t push_id(work_t *w, int32_t id) {
  ACCEL_RETURN_IF_ERROR(
      grow((void **)&w->ids, &w->cap_ids, w->n_ids + 1, sizeof(int32_t)));
  w->ids[w->n_ids++] = id;
  return ACCEL_OK;
}

static inline bool before(const bigram_t *a, const bigram_t *b) {
  return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static accel_status_t heap_push(work_t *w, const bigram_t *b) {
  ACCEL_RETURN_IF_ERROR(
      grow((void **)&w->heap, &w->cap_heap, w->n_heap + 1, sizeof(bigram_t)));
  size_t i = w->n_heap++;
  while (i > 0 && before(b, &w->heap[(i - 1) / 2])) {
    w->heap[i] = w->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  w->heap[i] = *b;
  return ACCEL_OK;
}

static bigram_t heap_pop(work_t *w) {
  bigram_t top = w->heap[0];
  bigram_t last = w->heap[--w->n_heap];
  size_t i = 0, n = w->n_heap;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) {
      break;
    }
    if (c + 1 < n && before(&w->heap[c + 1], &w->heap[c])) {
      ++c;
    }
    if (!before(&w->heap[c], &last)) {
      break;
    }
    w->heap[i] = w->heap[c];
    i = c;
  }
  if (n > 0) {
    w->heap[i] = last;
  }
  return top;
}

// Unlinks |right| after merging it into |left|.
static void merge_symbols(work_t *w, int32_t left, int32_t right) {
  symbol_t *l = &w->sym[left], *r = &w->sym[right];
  l->n += r->n;
  r->n = 0;
  l->next = r->next;
  if (r->next >= 0) {
    w->sym[r->next].prev = left;
  }
}

// Splits w->buf[0, size) into one symbol per byte (BPE) or per UTF-8
// character by its lead byte (SentencePiece, llama.cpp's unicode_len_utf8).
static accel_status_t make_symbols(work_t *w, size_t size, bool per_byte,
                                   size_t *out_count) {
  ACCEL_RETURN_IF_ERROR(
      grow((void **)&w->sym, &w->cap_sym, size + 1, sizeof(symbol_t)));
  static const uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 2, 2, 3, 4};
  size_t count = 0;
  for (size_t off = 0; off < size; ++count) {
    size_t len = per_byte ? 1 : kLen[(uint8_t)w->buf[off] >> 4];
    if (len > size - off) {
      len = size - off;
    }
    w->sym[count] =
        (symbol_t){(uint32_t)off, (uint32_t)len, (int32_t)count - 1, -1, -1};
    off += len;
    w->sym[count].next = off == size ? -1 : (int32_t)count + 1;
  }
  *out_count = count;
  return ACCEL_OK;
}

// ---- SentencePiece ----------------------------------------------------------

static accel_status_t spm_try_bigram(work_t *w, int32_t left, int32_t right) {
  if (left < 0 || right < 0) {
    return ACCEL_OK;
  }
  uint32_t size = w->sym[left].n + w->sym[right].n;
  int32_t id = tok_find(w->t, w->buf + w->sym[left].start, size);
  if (id < 0) {
    return ACCEL_OK;
  }
  bigram_t b = {w->t->scores[id], left, right, size};
  return heap_push(w, &b);
}

static accel_status_t spm_encode(work_t *w, const char *text, size_t len,
                                 bool space_prefix) {
  // Spaces become U+2581 (3 bytes), one in front where the rule says.
  ACCEL_RETURN_IF_ERROR(grow((void **)&w->buf, &w->cap_buf, 3 * len + 4, 1));
  size_t size = 0;
  if (space_prefix) {
    memcpy(w->buf, "\xe2\x96\x81", 3);
    size = 3;
  }
  for (size_t i = 0; i < len; ++i) {
    if (text[i] == ' ') {
      memcpy(w->buf + size, "\xe2\x96\x81", 3);
      size += 3;
    } else {
      w->buf[size++] = text[i];
    }
  }
  if (size > UINT32_MAX / 2) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "tokenizer: text of %zu bytes is too long", len);
  }
  size_t count;
  ACCEL_RETURN_IF_ERROR(make_symbols(w, size, false, &count));
  w->n_heap = 0;
  for (size_t i = 1; i < count; ++i) {
    ACCEL_RETURN_IF_ERROR(spm_try_bigram(w, (int32_t)i - 1, (int32_t)i));
  }
  while (w->n_heap > 0) {
    bigram_t b = heap_pop(w);
    symbol_t *l = &w->sym[b.left], *r = &w->sym[b.right];
    if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) {
      continue;  // stale: one side merged since
    }
    merge_symbols(w, b.left, b.right);
    ACCEL_RETURN_IF_ERROR(spm_try_bigram(w, w->sym[b.left].prev, b.left));
    ACCEL_RETURN_IF_ERROR(spm_try_bigram(w, b.left, w->sym[b.left].next));
  }
  for (int32_t i = count != 0 ? 0 : -1; i != -1; i = w->sym[i].next) {
    const symbol_t *s = &w->sym[i];
    int32_t id = tok_find(w->t, w->buf + s->start, s->n);
    if (id >= 0) {
      ACCEL_RETURN_IF_ERROR(push_id(w, id));
      continue;
    }
    // Every merge forms a token, so this is a lone character the
    // vocabulary lacks: its bytes go through byte fallback.
    for (uint32_t k = 0; k < s->n; ++k) {
      uint8_t byte = (uint8_t)w->buf[s->start + k];
      if (w->t->byte_token[byte] < 0) {
        return accel_error(ACCEL_ERROR_UNSUPPORTED,
                           "tokenizer: byte 0x%02X has no token (no <0x%02X>, "
                           "no unknown token)",
                           byte, byte);
      }
      ACCEL_RETURN_IF_ERROR(push_id(w, w->t->byte_token[byte]));
    }
  }
  return ACCEL_OK;
}

// ---- byte-level BPE ---------------------------------------------------------

static accel_status_t bpe_add_bigram(work_t *w, int32_t left, int32_t right) {
  if (left < 0 || right < 0 || w->sym[left].id < 0 || w->sym[right].id < 0) {
    return ACCEL_OK;
  }
  const merge_slot_t *m =
      tok_find_merge(w->t, w->sym[left].id, w->sym[right].id);
  if (m == NULL) {
    return ACCEL_OK;
  }
  bigram_t b = {-(float)m->rank, left, right,
                w->sym[left].n + w->sym[right].n};
  return heap_push(w, &b);
}

// Writes |word| (|len| raw bytes) in the byte-level alphabet to w->enc.
static accel_status_t byte_encode(work_t *w, const char *word, size_t len,
                                  size_t *out_size) {
  ACCEL_RETURN_IF_ERROR(grow((void **)&w->enc, &w->cap_enc, 2 * len + 1, 1));
  size_t size = 0;
  for (size_t i = 0; i < len; ++i) {
    size += tok_byte_char((uint8_t)word[i], w->enc + size);
  }
  *out_size = size;
  return ACCEL_OK;
}

static accel_status_t bpe_word(work_t *w, size_t size) {
  const accel_tokenizer_t *t = w->t;
  if (t->ignore_merges) {
    size_t enc_size;
    ACCEL_RETURN_IF_ERROR(byte_encode(w, w->buf, size, &enc_size));
    int32_t id = tok_find(t, w->enc, enc_size);
    if (id >= 0) {
      return push_id(w, id);
    }
  }
  size_t count;
  ACCEL_RETURN_IF_ERROR(make_symbols(w, size, true, &count));
  w->n_heap = 0;
  for (size_t i = 0; i < count; ++i) {
    w->sym[i].id = t->byte_token[(uint8_t)w->buf[i]];
  }
  for (size_t i = 1; i < count; ++i) {
    ACCEL_RETURN_IF_ERROR(bpe_add_bigram(w, (int32_t)i - 1, (int32_t)i));
  }
  while (w->n_heap > 0) {
    bigram_t b = heap_pop(w);
    symbol_t *l = &w->sym[b.left], *r = &w->sym[b.right];
    if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) {
      continue;  // stale: one side merged since
    }
    merge_symbols(w, b.left, b.right);
    // The merged text's token (or -1: then it merges no further).
    size_t enc_size;
    ACCEL_RETURN_IF_ERROR(byte_encode(w, w->buf + w->sym[b.left].start,
                                      w->sym[b.left].n, &enc_size));
    w->sym[b.left].id = tok_find(t, w->enc, enc_size);
    ACCEL_RETURN_IF_ERROR(bpe_add_bigram(w, w->sym[b.left].prev, b.left));
    ACCEL_RETURN_IF_ERROR(bpe_add_bigram(w, b.left, w->sym[b.left].next));
  }
  for (size_t i = 0; i < count; ++i) {
    const symbol_t *s = &w->sym[i];
    if (s->n == 0) {
      continue;
    }
    if (s->id >= 0) {
      ACCEL_RETURN_IF_ERROR(push_id(w, s->id));
      continue;
    }
    // No token for this text: llama.cpp looks each byte of its byte-level
    // spelling up as a one-byte token and drops those that are none.
    size_t enc_size;
    ACCEL_RETURN_IF_ERROR(byte_encode(w, w->buf + s->start, s->n, &enc_size));
    for (size_t k = 0; k < enc_size; ++k) {
      int32_t id = t->raw_byte_token[(uint8_t)w->enc[k]];
      if (id >= 0) {
        ACCEL_RETURN_IF_ERROR(push_id(w, id));
      }
    }
  }
  return ACCEL_OK;
}

static accel_status_t bpe_encode(work_t *w, const char *text, size_t len) {
  ACCEL_RETURN_IF_ERROR(
      grow((void **)&w->cps, &w->cap_cps, len + 1, sizeof(uint32_t)));
  free(w->lens);
  w->lens = malloc((len + 1) * sizeof(uint32_t));
  if (w->lens == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "tokenizer: no memory to encode %zu bytes", len);
  }
  size_t n = 0;
  for (size_t i = 0; i < len; ++n) {
    i += tok_utf8_decode((const uint8_t *)text + i, len - i, &w->cps[n]);
  }
  size_t words = tok_pretokenize(w->t->pretok, w->cps, n, w->lens);
  // Each code point comes back as at most 4 bytes (U+FFFD for an invalid
  // byte is 3), so a word needs at most 4 bytes per code point.
  size_t at = 0;
  for (size_t k = 0; k < words; ++k) {
    ACCEL_RETURN_IF_ERROR(
        grow((void **)&w->buf, &w->cap_buf, 4 * (size_t)w->lens[k] + 1, 1));
    size_t size = 0;
    for (uint32_t j = 0; j < w->lens[k]; ++j) {
      size += tok_utf8_encode(w->cps[at + j], w->buf + size);
    }
    at += w->lens[k];
    ACCEL_RETURN_IF_ERROR(bpe_word(w, size));
  }
  return ACCEL_OK;
}

// ---- user-defined tokens and the entry point --------------------------------

// A span of the input: raw text, or a user-defined token (id >= 0).
typedef struct fragment {
  size_t start, len;
  int32_t id;
} fragment_t;

// An occurrence of user-defined token |rank| at |pos|.
typedef struct occurrence {
  size_t pos;
  uint32_t rank, len;
} occurrence_t;

static int by_rank_then_pos(const void *a, const void *b) {
  const occurrence_t *x = a, *y = b;
  if (x->rank != y->rank) {
    return x->rank < y->rank ? -1 : 1;
  }
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int by_pos(const void *a, const void *b) {
  const occurrence_t *x = a, *y = b;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static accel_status_t add_occurrence(occurrence_t **occ, size_t *n, size_t *cap,
                                     size_t pos, uint32_t rank, uint32_t len) {
  ACCEL_RETURN_IF_ERROR(grow((void **)occ, cap, *n + 1, sizeof(**occ)));
  (*occ)[(*n)++] = (occurrence_t){pos, rank, len};
  return ACCEL_OK;
}

// Every occurrence of every user-defined token in |text|, found in one
// pass: at each byte that starts one, the tokens of the same first two
// bytes (a binary search) are compared.
static accel_status_t find_occurrences(const accel_tokenizer_t *t,
                                       const char *text, size_t len,
                                       occurrence_t **out, size_t *out_n) {
  occurrence_t *occ = NULL;
  size_t n = 0, cap = 0;
  for (size_t p = 0; p < len; ++p) {
    uint8_t c = (uint8_t)text[p];
    if (!((t->user_first_byte[c >> 3] >> (c & 7)) & 1)) {
      continue;
    }
    if (t->user_single[c] >= 0) {
      ACCEL_RETURN_IF_ERROR(
          add_occurrence(&occ, &n, &cap, p, (uint32_t)t->user_single[c], 1));
    }
    if (p + 1 >= len) {
      continue;
    }
    uint32_t prefix = (uint32_t)c << 8 | (uint8_t)text[p + 1];
    size_t lo = 0, hi = t->n_user_by_prefix;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (tok_user_prefix(t, t->user_by_prefix[mid]) < prefix) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    for (; lo < t->n_user_by_prefix &&
           tok_user_prefix(t, t->user_by_prefix[lo]) == prefix;
         ++lo) {
      uint32_t rank = t->user_by_prefix[lo];
      size_t tl;
      const char *tt = tok_text(t, t->user_defined[rank], &tl);
      if (tl <= len - p && memcmp(text + p, tt, tl) == 0) {
        ACCEL_RETURN_IF_ERROR(
            add_occurrence(&occ, &n, &cap, p, rank, (uint32_t)tl));
      }
    }
  }
  *out = occ;
  *out_n = n;
  return ACCEL_OK;
}

// Splits |text| at user-defined tokens as llama.cpp's tokenizer_st_partition
// does with parse_special off: token by token, longest text first, each at
// its leftmost non-overlapping occurrences in what is still raw text. An
// occurrence is therefore taken when, in that order (rank, then position),
// it overlaps neither a token taken before nor the previous occurrence of
// the same token that was taken.
static accel_status_t partition(const accel_tokenizer_t *t, const char *text,
                                size_t len, fragment_t **out, size_t *out_n) {
  occurrence_t *occ = NULL;
  size_t n_occ = 0;
  accel_status_t st = ACCEL_OK;
  if (t->n_user_defined != 0) {
    st = find_occurrences(t, text, len, &occ, &n_occ);
  }
  uint8_t *claimed = NULL;
  if (st == ACCEL_OK && n_occ != 0) {
    claimed = calloc(len, 1);
    if (claimed == NULL) {
      st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "tokenizer: no memory to encode %zu bytes", len);
    }
  }
  size_t taken = 0;
  if (st == ACCEL_OK && n_occ != 0) {
    qsort(occ, n_occ, sizeof(*occ), by_rank_then_pos);
    size_t same_end = 0;
    for (size_t i = 0; i < n_occ; ++i) {
      if (i == 0 || occ[i].rank != occ[i - 1].rank) {
        same_end = 0;
      }
      bool free_span = occ[i].pos >= same_end;
      for (uint32_t k = 0; free_span && k < occ[i].len; ++k) {
        free_span = !claimed[occ[i].pos + k];
      }
      if (free_span) {
        memset(claimed + occ[i].pos, 1, occ[i].len);
        same_end = occ[i].pos + occ[i].len;
        occ[taken++] = occ[i];
      }
    }
    qsort(occ, taken, sizeof(*occ), by_pos);
  }
  free(claimed);
  fragment_t *f = NULL;
  if (st == ACCEL_OK) {
    f = malloc((2 * taken + 1) * sizeof(*f));
    if (f == NULL) {
      st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "tokenizer: no memory to encode %zu bytes", len);
    }
  }
  size_t n = 0, at = 0;
  for (size_t i = 0; st == ACCEL_OK && i < taken; ++i) {
    if (occ[i].pos > at) {
      f[n++] = (fragment_t){at, occ[i].pos - at, -1};
    }
    f[n++] = (fragment_t){occ[i].pos, occ[i].len, t->user_defined[occ[i].rank]};
    at = occ[i].pos + occ[i].len;
  }
  if (st == ACCEL_OK && at < len) {
    f[n++] = (fragment_t){at, len - at, -1};
  }
  free(occ);
  *out = f;
  *out_n = n;
  return st;
}

static accel_status_t encode_all(work_t *w, const char *text, size_t len,
                                 bool add_special) {
  const accel_tokenizer_t *t = w->t;
  if (add_special &&
      ((t->add_bos && t->bos < 0) || (t->add_eos && t->eos < 0))) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "tokenizer: the vocabulary asks for a %s token it does "
                       "not have",
                       t->add_bos && t->bos < 0 ? "BOS" : "EOS");
  }
  if (add_special && t->add_bos) {
    ACCEL_RETURN_IF_ERROR(push_id(w, t->bos));
  }
  fragment_t *f = NULL;
  size_t n = 0;
  if (len != 0) {
    ACCEL_RETURN_IF_ERROR(partition(t, text, len, &f, &n));
  }
  accel_status_t st = ACCEL_OK;
  bool prev_special = true;  // SentencePiece: a space before the first word
  for (size_t i = 0; i < n && st == ACCEL_OK; ++i) {
    if (f[i].id >= 0) {
      st = push_id(w, f[i].id);
      prev_special = true;
    } else if (f[i].len == 0) {
      continue;
    } else if (t->kind == ACCEL_TOKENIZER_KIND_SPM) {
      st = spm_encode(w, text + f[i].start, f[i].len,
                      t->add_space_prefix && prev_special);
      prev_special = false;
    } else {
      st = bpe_encode(w, text + f[i].start, f[i].len);
    }
  }
  free(f);
  if (st == ACCEL_OK && add_special && t->add_eos) {
    st = push_id(w, t->eos);
  }
  return st;
}

accel_status_t accel_tokenizer_encode(const accel_tokenizer_t *tokenizer,
                                      const char *text, size_t size,
                                      accel_tokenizer_encode_flags_t flags,
                                      int32_t *ids, size_t capacity,
                                      size_t *out_count) {
  if (tokenizer == NULL || out_count == NULL || (text == NULL && size != 0) ||
      (ids == NULL && capacity != 0)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_tokenizer_encode: %s is NULL",
                       tokenizer == NULL   ? "tokenizer"
                       : out_count == NULL ? "out_count"
                       : text == NULL      ? "text (with a non-zero size)"
                                           : "ids (with a non-zero capacity)");
  }
  if (flags & ~(uint32_t)ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_tokenizer_encode: unknown flags 0x%x",
                       flags & ~(uint32_t)ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL);
  }
  work_t w = {.t = tokenizer};
  accel_status_t st =
      encode_all(&w, text, size, flags & ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL);
  if (st == ACCEL_OK && capacity != 0 && capacity < w.n_ids) {
    *out_count = w.n_ids;
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "accel_tokenizer_encode: the text needs %zu ids, "
                     "capacity is %zu",
                     w.n_ids, capacity);
  } else if (st == ACCEL_OK) {
    if (capacity != 0 && w.n_ids != 0) {
      memcpy(ids, w.ids, w.n_ids * sizeof(int32_t));
    }
    *out_count = w.n_ids;
  }
  free(w.ids);
  free(w.sym);
  free(w.heap);
  free(w.buf);
  free(w.enc);
  free(w.cps);
  free(w.lens);
  return st;
}
