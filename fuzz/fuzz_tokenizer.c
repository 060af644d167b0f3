// libFuzzer target for the tokenizers: encodes the input with the real
// vocabulary named by ACCEL_FUZZ_VOCAB (a GGUF file; scripts/fuzz-tokenizer.sh
// runs it once per vocabulary). The first input byte picks the encode flags
// and the decoder flags; the rest is the text. Every input must encode to
// ids of the vocabulary, a size query must agree with the encoding, the
// streaming decoder must emit valid UTF-8 only, and a byte-level BPE
// vocabulary must give back any valid UTF-8 text exactly. Anything else (a
// crash, a sanitizer report, a mismatch) is a bug.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/gguf.h"
#include "accel/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static accel_gguf_t *g_gguf;
static accel_tokenizer_t *g_tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *path = getenv("ACCEL_FUZZ_VOCAB");
  if (path == NULL || accel_gguf_open_file(path, &g_gguf) != ACCEL_OK ||
      accel_tokenizer_create_from_gguf(g_gguf, &g_tok) != ACCEL_OK) {
    fprintf(stderr,
            "fuzz_tokenizer: set ACCEL_FUZZ_VOCAB to a vocabulary "
            "(%s)\n",
            path != NULL ? accel_last_error() : "unset");
    abort();
  }
  return 0;
}

// RFC 3629, written apart from the decoder's own check.
static bool valid_utf8(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint8_t c = s[i];
    size_t len = c < 0x80                 ? 1
                 : c >= 0xc2 && c <= 0xdf ? 2
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4
                                          : 0;
    if (len == 0 || i + len > n) {
      return false;
    }
    uint8_t lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    uint8_t hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    if (len > 1 && (s[i + 1] < lo || s[i + 1] > hi)) {
      return false;
    }
    for (size_t k = 2; k < len; ++k) {
      if ((s[i + k] & 0xc0) != 0x80) {
        return false;
      }
    }
    i += len;
  }
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) {
    return 0;
  }
  uint32_t encode_flags = data[0] & 1;
  uint32_t decode_flags = (data[0] >> 1) & 3;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  size_t count = 0;
  if (accel_tokenizer_encode(g_tok, text, len, encode_flags, NULL, 0, &count) !=
      ACCEL_OK) {
    abort();
  }
  int32_t *ids = malloc((count + 1) * sizeof(int32_t));
  size_t again = 0;
  if (ids == NULL ||
      (count != 0 && (accel_tokenizer_encode(g_tok, text, len, encode_flags,
                                             ids, count, &again) != ACCEL_OK ||
                      again != count))) {
    abort();
  }
  accel_token_decoder_t *d;
  if (accel_token_decoder_create(g_tok, decode_flags, &d) != ACCEL_OK) {
    abort();
  }
  uint8_t *joined = malloc(4 * len + 64 * count + 16);
  size_t at = 0;
  for (size_t i = 0; i <= count; ++i) {
    const char *out;
    size_t n;
    accel_status_t st = i < count
                            ? accel_token_decoder_push(d, ids[i], &out, &n)
                            : accel_token_decoder_flush(d, &out, &n);
    if (st != ACCEL_OK ||
        (i < count && (ids[i] < 0 || (uint32_t)ids[i] >=
                                         accel_tokenizer_vocab_size(g_tok))) ||
        !valid_utf8((const uint8_t *)out, n)) {
      abort();
    }
    if (joined != NULL) {
      memcpy(joined + at, out, n);
      at += n;
    }
  }
  accel_token_decoder_destroy(d);
  if (joined != NULL &&
      accel_tokenizer_kind(g_tok) == ACCEL_TOKENIZER_KIND_BPE &&
      decode_flags == 0 && valid_utf8(data + 1, len) &&
      (at != len || memcmp(joined, text, len) != 0)) {
    abort();  // byte-level BPE is lossless on valid UTF-8
  }
  free(joined);
  free(ids);
  return 0;
}
