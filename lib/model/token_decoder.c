// Detokenization: token pieces (llama.cpp's token_to_piece), and the
// streaming decoder that joins them and lets out only complete,
// valid UTF-8. Bytes that may still start a character wait for the next
// token; bytes that cannot become one are replaced by U+FFFD, one per
// maximal invalid subsequence (Unicode's "substitution of maximal
// subparts"), so that the output is the same however the bytes were split
// over tokens.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/tokenizer_impl.h"

// ---- pieces -----------------------------------------------------------------

static size_t put(char *buf, size_t capacity, size_t at, const void *src,
                  size_t n) {
  if (at < capacity) {
    memcpy(buf + at, src, n <= capacity - at ? n : capacity - at);
  }
  return at + n;
}

static int hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                : -1;
}

size_t tok_piece(const accel_tokenizer_t *t, int32_t id, uint32_t flags,
                 char *buf, size_t capacity) {
  size_t len;
  const char *s = tok_text(t, id, &len);
  switch (t->type[id]) {
    case TOKEN_TYPE_CONTROL:
    case TOKEN_TYPE_UNKNOWN:
      return (flags & ACCEL_TOKENIZER_PIECE_SPECIAL)
                 ? put(buf, capacity, 0, s, len)
                 : 0;
    case TOKEN_TYPE_USER_DEFINED:
      return put(buf, capacity, 0, s, len);
    case TOKEN_TYPE_NORMAL:
      break;
    case TOKEN_TYPE_BYTE:
      if (t->kind == ACCEL_TOKENIZER_KIND_SPM && len == 6 &&
          memcmp(s, "<0x", 3) == 0 && hex_digit(s[3]) >= 0 &&
          hex_digit(s[4]) >= 0 && s[5] == '>') {
        char byte = (char)(hex_digit(s[3]) * 16 + hex_digit(s[4]));
        return put(buf, capacity, 0, &byte, 1);
      }
      return 0;
    default:  // UNDEFINED, UNUSED: nothing, as llama.cpp
      return 0;
  }
  size_t at = 0;
  if (t->kind == ACCEL_TOKENIZER_KIND_SPM) {
    size_t run = 0;  // bytes copied up to each U+2581 (E2 96 81)
    for (size_t i = 0; i < len;) {
      if (i + 3 <= len && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
        at = put(buf, capacity, at, s + run, i - run);
        at = put(buf, capacity, at, " ", 1);
        i += 3;
        run = i;
      } else {
        ++i;
      }
    }
    return put(buf, capacity, at, s + run, len - run);
  }
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    size_t n = tok_utf8_decode((const uint8_t *)s + i, len - i, &cp);
    int b = tok_char_byte(cp);
    if (b >= 0) {
      char c = (char)b;
      at = put(buf, capacity, at, &c, 1);
    } else {
      // llama.cpp's llama_decode_text spells a character outside the
      // byte-level alphabet this way.
      char tmp[64];
      int m = snprintf(tmp, sizeof(tmp), "[UNK_BYTE_0x");
      char enc[4];
      size_t el = tok_utf8_encode(cp, enc);
      for (size_t k = 0; k < el; ++k) {
        m +=
            snprintf(tmp + m, sizeof(tmp) - (size_t)m, "%02x", (uint8_t)enc[k]);
      }
      at = put(buf, capacity, at, tmp, (size_t)m);
      at = put(buf, capacity, at, s, len);
      at = put(buf, capacity, at, "]", 1);
    }
    i += n;
  }
  return at;
}

accel_status_t accel_tokenizer_token_piece(const accel_tokenizer_t *tokenizer,
                                           int32_t id,
                                           accel_tokenizer_piece_flags_t flags,
                                           char *buffer, size_t capacity,
                                           size_t *out_size) {
  if (tokenizer == NULL || out_size == NULL ||
      (buffer == NULL && capacity != 0)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_tokenizer_token_piece: %s is NULL",
                       tokenizer == NULL  ? "tokenizer"
                       : out_size == NULL ? "out_size"
                                          : "buffer (with a capacity)");
  }
  if (flags & ~(uint32_t)ACCEL_TOKENIZER_PIECE_SPECIAL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_tokenizer_token_piece: unknown flags 0x%x",
                       flags & ~(uint32_t)ACCEL_TOKENIZER_PIECE_SPECIAL);
  }
  if (id < 0 || (uint32_t)id >= tokenizer->n_tokens) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_tokenizer_token_piece: token %d is not in the "
                       "vocabulary of %u",
                       id, tokenizer->n_tokens);
  }
  size_t size = tok_piece(tokenizer, id, flags, NULL, 0);
  if (capacity != 0 && capacity < size) {
    *out_size = size;
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "accel_tokenizer_token_piece: token %d needs %zu bytes, "
                       "capacity is %zu",
                       id, size, capacity);
  }
  if (capacity != 0) {
    tok_piece(tokenizer, id, flags, buffer, capacity);
  }
  *out_size = size;
  return ACCEL_OK;
}

// ---- the streaming decoder --------------------------------------------------

struct accel_token_decoder {
  const accel_tokenizer_t *tokenizer;
  uint32_t flags;
  bool started;  // a token has rendered bytes (leading-space rule)
  uint8_t held[4];
  size_t n_held;
  char *out;  // the text handed out by the last call
  size_t cap_out;
};

static const char kReplacement[3] = {'\xef', '\xbf', '\xbd'};

accel_status_t accel_token_decoder_create(const accel_tokenizer_t *tokenizer,
                                          accel_tokenizer_piece_flags_t flags,
                                          accel_token_decoder_t **out) {
  if (tokenizer == NULL || out == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_token_decoder_create: %s is NULL",
                       tokenizer == NULL ? "tokenizer" : "out");
  }
  const uint32_t known =
      ACCEL_TOKENIZER_PIECE_SPECIAL | ACCEL_TOKENIZER_PIECE_KEEP_SPACE_PREFIX;
  if (flags & ~known) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_token_decoder_create: unknown flags 0x%x",
                       flags & ~known);
  }
  accel_token_decoder_t *d = calloc(1, sizeof(*d));
  if (d == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "accel_token_decoder_create: no memory");
  }
  d->tokenizer = tokenizer;
  d->flags = flags;
  *out = d;
  return ACCEL_OK;
}

void accel_token_decoder_destroy(accel_token_decoder_t *decoder) {
  if (decoder != NULL) {
    free(decoder->out);
    free(decoder);
  }
}

// The length of the UTF-8 sequence that lead byte |c| starts (0: none), and
// the range its second byte must lie in (excluding overlong forms,
// surrogates and code points above U+10FFFF).
static size_t utf8_expect(uint8_t c, uint8_t *lo, uint8_t *hi) {
  *lo = 0x80;
  *hi = 0xbf;
  if (c < 0x80) {
    return 1;
  }
  if (c >= 0xc2 && c <= 0xdf) {
    return 2;
  }
  if (c >= 0xe0 && c <= 0xef) {
    *lo = c == 0xe0 ? 0xa0 : 0x80;
    *hi = c == 0xed ? 0x9f : 0xbf;
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    *lo = c == 0xf0 ? 0x90 : 0x80;
    *hi = c == 0xf4 ? 0x8f : 0xbf;
    return 4;
  }
  return 0;
}

// Moves the complete part of |in| (|n| bytes) to |out| (room for 3 * n),
// replacing invalid subsequences; returns the bytes written and leaves in
// |*held| the length of an incomplete tail (at most 3 bytes, which stay at
// the end of |in|).
static size_t utf8_scrub(const uint8_t *in, size_t n, char *out, size_t *held) {
  size_t o = 0;
  size_t i = 0;
  while (i < n) {
    uint8_t lo, hi;
    size_t len = utf8_expect(in[i], &lo, &hi);
    if (len == 0) {
      memcpy(out + o, kReplacement, 3);
      o += 3;
      ++i;
      continue;
    }
    size_t k = 1;
    while (k < len && i + k < n) {
      uint8_t b = in[i + k];
      bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xbf);
      if (!ok) {
        break;
      }
      ++k;
    }
    if (k == len) {
      memcpy(out + o, in + i, len);
      o += len;
      i += len;
    } else if (i + k == n) {
      break;  // a valid start cut short: wait for more bytes
    } else {
      memcpy(out + o, kReplacement, 3);
      o += 3;
      i += k;
    }
  }
  *held = n - i;
  return o;
}

accel_status_t accel_token_decoder_push(accel_token_decoder_t *decoder,
                                        int32_t id, const char **out_text,
                                        size_t *out_size) {
  if (decoder == NULL || out_text == NULL || out_size == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_token_decoder_push: %s is NULL",
                       decoder == NULL    ? "decoder"
                       : out_text == NULL ? "out_text"
                                          : "out_size");
  }
  const accel_tokenizer_t *t = decoder->tokenizer;
  if (id < 0 || (uint32_t)id >= t->n_tokens) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_token_decoder_push: token %d is not in the "
                       "vocabulary of %u",
                       id, t->n_tokens);
  }
  uint32_t piece_flags = decoder->flags & ACCEL_TOKENIZER_PIECE_SPECIAL;
  size_t piece = tok_piece(t, id, piece_flags, NULL, 0);
  // held bytes + piece in; at most 3 output bytes per input byte
  size_t in_size = decoder->n_held + piece;
  size_t need = in_size + 3 * in_size + 1;
  if (need > decoder->cap_out) {
    char *grown = realloc(decoder->out, need);
    if (grown == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "accel_token_decoder_push: no memory for %zu bytes",
                         need);
    }
    decoder->out = grown;
    decoder->cap_out = need;
  }
  // Input goes to the back of the buffer, output to the front.
  uint8_t *in = (uint8_t *)decoder->out + 3 * in_size + 1;
  memcpy(in, decoder->held, decoder->n_held);
  tok_piece(t, id, piece_flags, (char *)in + decoder->n_held, piece);
  size_t skip = 0;
  if (piece != 0 && !decoder->started) {
    decoder->started = true;
    if (t->type[id] == TOKEN_TYPE_NORMAL &&
        t->kind == ACCEL_TOKENIZER_KIND_SPM && t->add_space_prefix &&
        !(decoder->flags & ACCEL_TOKENIZER_PIECE_KEEP_SPACE_PREFIX) &&
        in[decoder->n_held] == ' ') {
      // The space the encoder put in front (SentencePiece's decoder drops
      // it the same way).
      memmove(in + decoder->n_held, in + decoder->n_held + 1, piece - 1);
      skip = 1;
    }
  }
  size_t held;
  size_t o = utf8_scrub(in, in_size - skip, decoder->out, &held);
  memcpy(decoder->held, in + in_size - skip - held, held);
  decoder->n_held = held;
  *out_text = decoder->out;
  *out_size = o;
  return ACCEL_OK;
}

accel_status_t accel_token_decoder_flush(accel_token_decoder_t *decoder,
                                         const char **out_text,
                                         size_t *out_size) {
  if (decoder == NULL || out_text == NULL || out_size == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_token_decoder_flush: %s is NULL",
                       decoder == NULL    ? "decoder"
                       : out_text == NULL ? "out_text"
                                          : "out_size");
  }
  size_t o = 0;
  if (decoder->n_held != 0) {
    if (decoder->cap_out < 3) {
      char *grown = realloc(decoder->out, 16);
      if (grown == NULL) {
        return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                           "accel_token_decoder_flush: no memory");
      }
      decoder->out = grown;
      decoder->cap_out = 16;
    }
    memcpy(decoder->out, kReplacement, 3);
    o = 3;
  }
  decoder->n_held = 0;
  decoder->started = false;
  *out_text = decoder->out != NULL ? decoder->out : "";
  *out_size = o;
  return ACCEL_OK;
}
