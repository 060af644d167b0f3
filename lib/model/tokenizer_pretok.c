// The BPE pre-tokenizers: the regular expression of llama-3 (and of qwen2,
// which differs in taking one digit at a time instead of up to three),
//
//   (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
//   |[^\r\n\p{L}\p{N}]?\p{L}+ |\p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n]*
//   |\s*[\r\n]+ |\s+(?!\S) |\s+
//
// matched leftmost-first without a regex engine, branch by branch in the
// order of llama.cpp's unicode_regex_split_custom_llama3. Unicode
// categories (\p{L}, \p{N}) and White_Space (\s) come from ICU.
#include <unicode/uchar.h>

#include "model/tokenizer_impl.h"

enum {
  CP_IN = 1,  // a position inside the text (llama.cpp: flags != 0)
  CP_LETTER = 2,
  CP_NUMBER = 4,
  CP_SPACE = 8,
};

static uint8_t cp_flags(uint32_t cp) {
  uint8_t f = CP_IN;
  int8_t cat = u_charType((UChar32)cp);
  if (cat >= U_UPPERCASE_LETTER && cat <= U_OTHER_LETTER) {
    f |= CP_LETTER;
  } else if (cat >= U_DECIMAL_DIGIT_NUMBER && cat <= U_OTHER_NUMBER) {
    f |= CP_NUMBER;
  }
  if (u_isUWhiteSpace((UChar32)cp)) {
    f |= CP_SPACE;
  }
  return f;
}

typedef struct splitter {
  const uint32_t *cps;
  size_t n;
  size_t prev_end;
  uint32_t *lens;
  size_t count;
} splitter_t;

// Outside the text: no code point (llama.cpp's OUT_OF_RANGE) and no flags.
static inline uint32_t cpt(const splitter_t *s, size_t pos) {
  return pos < s->n ? s->cps[pos] : 0xffffffffu;
}

static inline uint8_t flags(const splitter_t *s, size_t pos) {
  return pos < s->n ? cp_flags(s->cps[pos]) : 0;
}

static size_t emit(splitter_t *s, size_t end) {
  size_t len = end - s->prev_end;
  if (len > 0) {
    s->lens[s->count++] = (uint32_t)len;
  }
  s->prev_end = end;
  return len;
}

static inline bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

static uint32_t lower(uint32_t c) { return (uint32_t)u_tolower((UChar32)c); }

size_t tok_pretokenize(pretok_kind_t kind, const uint32_t *cps, size_t n,
                       uint32_t *out_lens) {
  splitter_t s = {cps, n, 0, out_lens, 0};
  const size_t max_digits = kind == PRETOK_QWEN2 ? 1 : 3;
  for (size_t pos = 0; pos < n;) {
    const uint32_t c = cpt(&s, pos);
    const uint8_t f = flags(&s, pos);

    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (c == '\'' && pos + 1 < n) {
      uint32_t c1 = lower(cpt(&s, pos + 1));
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        pos += emit(&s, pos + 2);
        continue;
      }
      if (pos + 2 < n) {
        uint32_t c2 = lower(cpt(&s, pos + 2));
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') ||
            (c1 == 'l' && c2 == 'l')) {
          pos += emit(&s, pos + 3);
          continue;
        }
      }
    }

    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!(is_crlf(c) || (f & CP_NUMBER))) {
      if ((f & CP_LETTER) || (flags(&s, pos + 1) & CP_LETTER)) {
        ++pos;
        while (flags(&s, pos) & CP_LETTER) {
          ++pos;
        }
        emit(&s, pos);
        continue;
      }
    }

    // \p{N}{1,3} (qwen2: \p{N})
    if (f & CP_NUMBER) {
      size_t ini = pos;
      while (flags(&s, pos) & CP_NUMBER) {
        if (++pos - ini >= max_digits) {
          emit(&s, pos);
          ini = pos;
        }
      }
      emit(&s, pos);
      continue;
    }

    // <space>?[^\s\p{L}\p{N}]+[\r\n]*
    uint8_t f2 = c == ' ' ? flags(&s, pos + 1) : f;
    if (!(f2 & (CP_SPACE | CP_LETTER | CP_NUMBER)) && f2 != 0) {
      pos += c == ' ';
      while (!(f2 & (CP_SPACE | CP_LETTER | CP_NUMBER)) && f2 != 0) {
        f2 = flags(&s, ++pos);
      }
      while (is_crlf(cpt(&s, pos))) {
        ++pos;
      }
      emit(&s, pos);
      continue;
    }

    size_t spaces = 0;
    size_t last_crlf_end = 0;
    while (flags(&s, pos + spaces) & CP_SPACE) {
      if (is_crlf(cpt(&s, pos + spaces))) {
        last_crlf_end = pos + spaces + 1;
      }
      ++spaces;
    }
    // \s*[\r\n]+
    if (last_crlf_end > 0) {
      pos = last_crlf_end;
      emit(&s, pos);
      continue;
    }
    // \s+(?!\S): all but the last space when more text follows
    if (spaces > 1 && pos + spaces < n) {
      pos += spaces - 1;
      emit(&s, pos);
      continue;
    }
    // \s+
    if (spaces > 0) {
      pos += spaces;
      emit(&s, pos);
      continue;
    }
    // no branch matches: the character alone
    emit(&s, ++pos);
  }
  return s.count;
}
