// Internals of the GGUF tokenizers (include/accel/tokenizer.h), shared by
// the loader (tokenizer.c), the byte-level alphabet and UTF-8 helpers
// (tokenizer_bytes.c), the encoders (tokenizer_encode.c), the
// pre-tokenizer (tokenizer_pretok.c) and pieces and the decoder
// (token_decoder.c).
#ifndef ACCEL_MODEL_TOKENIZER_IMPL_H_
#define ACCEL_MODEL_TOKENIZER_IMPL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/tokenizer.h"

// Token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum {
  TOKEN_TYPE_UNDEFINED = 0,
  TOKEN_TYPE_NORMAL = 1,
  TOKEN_TYPE_UNKNOWN = 2,
  TOKEN_TYPE_CONTROL = 3,
  TOKEN_TYPE_USER_DEFINED = 4,
  TOKEN_TYPE_UNUSED = 5,
  TOKEN_TYPE_BYTE = 6,
};

// The BPE pre-tokenizers (tokenizer.ggml.pre) and their longest digit run.
typedef enum pretok_kind {
  PRETOK_NONE = 0,    // SentencePiece: no split
  PRETOK_LLAMA3 = 1,  // "llama-bpe": \p{N}{1,3}
  PRETOK_QWEN2 = 2,   // "qwen2": \p{N}
} pretok_kind_t;

// One slot of the merge table: the pair (left, right) of token ids and its
// rank (the merge's index in tokenizer.ggml.merges). left_plus1 == 0 marks
// an empty slot (so that the table starts as zero pages).
typedef struct merge_slot {
  int32_t left_plus1;
  int32_t right;
  int32_t rank;
} merge_slot_t;

// One slot of the text -> id table: the token (id + 1, 0 for an empty
// slot), the high half of its text's hash (a probe that meets another text
// rarely reads it) and where its text lies, so that a lookup touches the
// slot and the text only.
typedef struct text_slot {
  uint32_t id_plus1;
  uint32_t tag;
  uint32_t offset;
  uint32_t size;
} text_slot_t;

struct accel_tokenizer {
  accel_tokenizer_kind_t kind;
  pretok_kind_t pretok;
  uint32_t n_tokens;
  // Token texts, copied: token i is text[offset[i] .. offset[i + 1]).
  char *text;
  uint64_t *offset;
  float *scores;  // SentencePiece only
  uint8_t *type;  // TOKEN_TYPE_*
  // Open-addressed text -> id table; a text given to several tokens maps
  // to the last, as llama.cpp's map does.
  text_slot_t *by_text;
  uint64_t by_text_mask;
  // BPE merges: open-addressed (left, right) -> rank table.
  merge_slot_t *merges;
  uint64_t merges_mask;
  // SentencePiece: the <0xXX> token of each byte (or the byte's own
  // one-character token, or unk; -1 when none). BPE: the token of each
  // byte's byte-level character, and of each single raw byte.
  int32_t byte_token[256];
  int32_t raw_byte_token[256];
  int32_t bos, eos, unk;
  bool add_bos, add_eos, add_space_prefix, ignore_merges;
  // User-defined tokens, split out of the text before encoding (llama.cpp
  // does so even with parse_special off), longest text first.
  int32_t *user_defined;
  uint32_t n_user_defined;
  uint8_t user_first_byte[32];  // bitset of their first bytes
  // For finding them in one pass: the ranks (indices in |user_defined|)
  // of those of two bytes or more, ordered by their first two bytes and
  // then rank; and the best rank of each one-byte text (-1: none).
  uint32_t *user_by_prefix;
  uint32_t n_user_by_prefix;
  int32_t user_single[256];
};

static inline const char *tok_text(const accel_tokenizer_t *t, int32_t id,
                                   size_t *len) {
  *len = (size_t)(t->offset[id + 1] - t->offset[id]);
  return t->text + t->offset[id];
}

// The id of the token whose text is the |len| bytes at |s|, or -1.
int32_t tok_find(const accel_tokenizer_t *t, const char *s, size_t len);

// The merge of (left, right), or NULL.
const merge_slot_t *tok_find_merge(const accel_tokenizer_t *t, int32_t left,
                                   int32_t right);

// GPT-2's byte-level alphabet: the UTF-8 of the character byte |b| stands
// for (1 or 2 bytes), and the byte a character stands for (-1 if none).
size_t tok_byte_char(uint8_t b, char out[2]);
int tok_char_byte(uint32_t cp);

// Decodes one code point of |s| (|n| > 0 bytes left) as llama.cpp's
// unicode_cpt_from_utf8 does; an invalid lead or sequence yields U+FFFD
// and consumes one byte. Returns the bytes consumed.
size_t tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *out_cp);
size_t tok_utf8_encode(uint32_t cp, char out[4]);

// Splits |n| code points |cps| into words by the pre-tokenizer |kind|:
// writes the length (in code points) of each word to |out_lens| (room for
// |n|) and returns their number.
size_t tok_pretokenize(pretok_kind_t kind, const uint32_t *cps, size_t n,
                       uint32_t *out_lens);

// The first two bytes of user-defined token |rank| as one number.
static inline uint32_t tok_user_prefix(const accel_tokenizer_t *t,
                                       uint32_t rank) {
  const uint8_t *p =
      (const uint8_t *)t->text + t->offset[t->user_defined[rank]];
  return (uint32_t)p[0] << 8 | p[1];
}

// The piece of |id| (accel_tokenizer_token_piece without the checks):
// writes up to |capacity| bytes and returns the piece's full size.
size_t tok_piece(const accel_tokenizer_t *t, int32_t id, uint32_t flags,
                 char *buf, size_t capacity);

#endif  // ACCEL_MODEL_TOKENIZER_IMPL_H_
