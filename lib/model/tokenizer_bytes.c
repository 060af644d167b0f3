// The byte-level alphabet of GPT-2-style BPE vocabularies and the UTF-8
// decoding and encoding the tokenizers share (docs/tokenizers.md).
#include <string.h>

#include "model/tokenizer_impl.h"

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
// the other 68 bytes for U+0100 + n in byte order.
static uint32_t byte_cp(uint8_t b) {
  if (b <= 0x20) {
    return 0x100 + b;  // n = 0..32
  }
  if (b >= 0x7f && b <= 0xa0) {
    return 0x100 + 33 + (b - 0x7f);  // n = 33..66
  }
  return b == 0xad ? 0x100 + 67 : b;
}

size_t tok_byte_char(uint8_t b, char out[2]) {
  char tmp[4];
  size_t n = tok_utf8_encode(byte_cp(b), tmp);
  memcpy(out, tmp, n);
  return n;
}

int tok_char_byte(uint32_t cp) {
  if (cp < 0x100) {
    return byte_cp((uint8_t)cp) == cp ? (int)cp : -1;
  }
  if (cp <= 0x100 + 32) {
    return (int)(cp - 0x100);
  }
  if (cp <= 0x100 + 66) {
    return (int)(cp - 0x100 - 33 + 0x7f);
  }
  return cp == 0x100 + 67 ? 0xad : -1;
}

size_t tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *out_cp) {
  uint8_t c = s[0];
  if (c < 0x80) {
    *out_cp = c;
    return 1;
  }
  // llama.cpp checks the lead's bit pattern and that the continuation
  // bytes are 10xxxxxx; it accepts overlong forms and surrogates.
  size_t len = (c & 0xe0) == 0xc0   ? 2
               : (c & 0xf0) == 0xe0 ? 3
               : (c & 0xf8) == 0xf0 ? 4
                                    : 0;
  if (len == 0 || len > n) {
    *out_cp = 0xfffd;
    return 1;
  }
  uint32_t cp = c & (0x7f >> len);
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xc0) != 0x80) {
      *out_cp = 0xfffd;
      return 1;
    }
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  // Above U+10FFFF llama.cpp cannot re-encode the code point and throws;
  // it is replaced like any other invalid sequence here.
  *out_cp = cp <= 0x10ffff ? cp : 0xfffd;
  return cp <= 0x10ffff ? len : 1;
}

size_t tok_utf8_encode(uint32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}
