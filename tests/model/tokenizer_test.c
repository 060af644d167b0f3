// The GGUF tokenizers: ids equal to the reference tokenizers' on the test
// texts of the three real vocabularies llama.cpp ships (fetched at test
// setup by fetch-vocab.sh; skipped with the reason when they cannot be
// had), round trips and streaming UTF-8 over multilingual text, random
// vocabularies checked against naive merge loops written here, the
// decoder's replacement rules, malformed vocabularies and misuse.
#include "accel/tokenizer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "accel/gguf.h"
#include "gguf_out.h"
#include "test_support.h"

#define SP "\xe2\x96\x81"  // U+2581, SentencePiece's space

// ---- a GGUF writer for vocabularies -----------------------------------------

// Metadata entries being written, and their number.
typedef struct kvs {
  out_t o;
  uint64_t count;
} kvs_t;

static out_t *kv_head(kvs_t *k, const char *key, uint32_t type) {
  put_cstr(&k->o, key);
  put_u32(&k->o, type);
  k->count++;
  return &k->o;
}
static void kv_string(kvs_t *k, const char *key, const char *value) {
  put_cstr(kv_head(k, key, ACCEL_GGUF_VALUE_STRING), value);
}
static void kv_u32(kvs_t *k, const char *key, uint32_t value) {
  put_u32(kv_head(k, key, ACCEL_GGUF_VALUE_UINT32), value);
}
static void kv_bool(kvs_t *k, const char *key, bool value) {
  uint8_t b = value;
  put(kv_head(k, key, ACCEL_GGUF_VALUE_BOOL), &b, 1);
}
static void kv_strings(kvs_t *k, const char *key, char **values, size_t n) {
  out_t *o = kv_head(k, key, ACCEL_GGUF_VALUE_ARRAY);
  put_u32(o, ACCEL_GGUF_VALUE_STRING);
  put_u64(o, n);
  for (size_t i = 0; i < n; ++i) {
    put_cstr(o, values[i]);
  }
}
static void kv_numbers(kvs_t *k, const char *key, uint32_t type,
                       const void *values, size_t n) {
  out_t *o = kv_head(k, key, ACCEL_GGUF_VALUE_ARRAY);
  put_u32(o, type);
  put_u64(o, n);
  put(o, values, 4 * n);
}

// The file: header, then the entries written so far.
static uint8_t *finish(kvs_t *k, size_t *size) {
  out_t f = {0};
  put(&f, "GGUF", 4);
  put_u32(&f, 3);
  put_u64(&f, 0);
  put_u64(&f, k->count);
  put(&f, k->o.p, k->o.n);
  free(k->o.p);
  *size = f.n;
  return f.p;
}

// A vocabulary description for the writer; NULL or negative fields are
// left out of the file.
typedef struct vocab {
  const char *model;
  const char *pre;
  char **tokens;
  size_t n_tokens;
  float *scores;
  size_t n_scores;
  int32_t *types;
  char **merges;
  size_t n_merges;
  int64_t bos, eos, unk;
  int add_bos, add_space_prefix;  // -1: absent
} vocab_t;

static accel_status_t open_vocab(const vocab_t *v, accel_gguf_t **g,
                                 uint8_t **image, accel_tokenizer_t **t) {
  kvs_t o = {0};
  if (v->model != NULL) {
    kv_string(&o, "tokenizer.ggml.model", v->model);
  }
  if (v->pre != NULL) {
    kv_string(&o, "tokenizer.ggml.pre", v->pre);
  }
  if (v->tokens != NULL) {
    kv_strings(&o, "tokenizer.ggml.tokens", v->tokens, v->n_tokens);
  }
  if (v->scores != NULL) {
    kv_numbers(&o, "tokenizer.ggml.scores", ACCEL_GGUF_VALUE_FLOAT32, v->scores,
               v->n_scores);
  }
  if (v->types != NULL) {
    kv_numbers(&o, "tokenizer.ggml.token_type", ACCEL_GGUF_VALUE_INT32,
               v->types, v->n_tokens);
  }
  if (v->merges != NULL) {
    kv_strings(&o, "tokenizer.ggml.merges", v->merges, v->n_merges);
  }
  if (v->bos >= 0) {
    kv_u32(&o, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos);
  }
  if (v->eos >= 0) {
    kv_u32(&o, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos);
  }
  if (v->unk >= 0) {
    kv_u32(&o, "tokenizer.ggml.unknown_token_id", (uint32_t)v->unk);
  }
  if (v->add_bos >= 0) {
    kv_bool(&o, "tokenizer.ggml.add_bos_token", v->add_bos);
  }
  if (v->add_space_prefix >= 0) {
    kv_bool(&o, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
  }
  size_t size;
  *image = finish(&o, &size);
  assert_int_equal(accel_gguf_open_memory(*image, size, g), ACCEL_OK);
  *t = NULL;
  return accel_tokenizer_create_from_gguf(*g, t);
}

static void close_vocab(accel_gguf_t *g, uint8_t *image, accel_tokenizer_t *t) {
  accel_tokenizer_destroy(t);
  accel_gguf_close(g);
  free(image);
}

// ---- helpers ----------------------------------------------------------------

static int32_t *encode(const accel_tokenizer_t *t, const char *s, size_t n,
                       uint32_t flags, size_t *count) {
  assert_int_equal(accel_tokenizer_encode(t, s, n, flags, NULL, 0, count),
                   ACCEL_OK);
  int32_t *ids = malloc((*count + 1) * sizeof(int32_t));
  assert_non_null(ids);
  size_t again = 0;
  if (*count != 0) {
    assert_int_equal(
        accel_tokenizer_encode(t, s, n, flags, ids, *count, &again), ACCEL_OK);
    assert_int_equal(again, *count);
  }
  return ids;
}

// An independent UTF-8 check (RFC 3629 table).
static bool valid_utf8(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint8_t c = s[i];
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c == 0xe0) {
      len = 3, lo = 0xa0;
    } else if (c == 0xed) {
      len = 3, hi = 0x9f;
    } else if (c >= 0xe1 && c <= 0xef) {
      len = 3;
    } else if (c == 0xf0) {
      len = 4, lo = 0x90;
    } else if (c == 0xf4) {
      len = 4, hi = 0x8f;
    } else if (c >= 0xf1 && c <= 0xf3) {
      len = 4;
    } else {
      return false;
    }
    if (i + len > n || (len > 1 && (s[i + 1] < lo || s[i + 1] > hi))) {
      return false;
    }
    for (size_t k = 2; k < len; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xbf) {
        return false;
      }
    }
    i += len;
  }
  return true;
}

// Decodes |ids| through a streaming decoder, checking that every chunk is
// valid UTF-8; returns the joined text (NUL-terminated).
static char *decode_stream(const accel_tokenizer_t *t, const int32_t *ids,
                           size_t n, uint32_t flags, size_t *size) {
  accel_token_decoder_t *d;
  assert_int_equal(accel_token_decoder_create(t, flags, &d), ACCEL_OK);
  out_t o = {0};
  for (size_t i = 0; i <= n; ++i) {
    const char *text;
    size_t len;
    if (i < n) {
      assert_int_equal(accel_token_decoder_push(d, ids[i], &text, &len),
                       ACCEL_OK);
    } else {
      assert_int_equal(accel_token_decoder_flush(d, &text, &len), ACCEL_OK);
    }
    assert_true(valid_utf8((const uint8_t *)text, len));
    put(&o, text, len);
  }
  put(&o, "", 1);
  accel_token_decoder_destroy(d);
  *size = o.n - 1;
  return (char *)o.p;
}

static char *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    return NULL;
  }
  out_t o = {0};
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
    put(&o, buf, n);
  }
  fclose(f);
  put(&o, "", 1);
  *size = o.n - 1;
  return (char *)o.p;
}

// ---- the real vocabularies
// ----------------------------------------------------

static char g_vocab_dir[4096];
static char g_vocab_skip[512];

// Group setup: fetches the vocabularies once (fetch-vocab.sh), or notes why
// they cannot be had.
static int fetch_vocabularies(void **state) {
  (void)state;
  const char *dir = getenv("ACCEL_VOCAB_DIR");
  const char *fetch = getenv("ACCEL_VOCAB_FETCH");
  if (dir == NULL || fetch == NULL) {
    snprintf(g_vocab_skip, sizeof(g_vocab_skip),
             "ACCEL_VOCAB_DIR / ACCEL_VOCAB_FETCH not set (run through meson "
             "test)");
    return 0;
  }
  snprintf(g_vocab_dir, sizeof(g_vocab_dir), "%s", dir);
  char cmd[8400];
  snprintf(cmd, sizeof(cmd), "'%s' '%s'", fetch, dir);
  int rc = system(cmd);
  rc = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  if (rc != 0) {
    snprintf(g_vocab_skip, sizeof(g_vocab_skip),
             "the real vocabularies could not be fetched (%s exited %d; "
             "offline?)",
             fetch, rc);
  }
  return 0;
}

typedef struct real {
  accel_gguf_t *gguf;
  accel_tokenizer_t *tok;
  char *inp, *outp;
  size_t n_texts;
  char *texts[256];
  size_t lens[256];
  char *expected[256];
} real_t;

static bool open_real(const char *name, real_t *r) {
  if (g_vocab_skip[0] != '\0') {
    print_message("skipping %s: %s\n", name, g_vocab_skip);
    return false;
  }
  memset(r, 0, sizeof(*r));
  char path[4400];
  snprintf(path, sizeof(path), "%s/ggml-vocab-%s.gguf", g_vocab_dir, name);
  assert_int_equal(accel_gguf_open_file(path, &r->gguf), ACCEL_OK);
  uint64_t t0 = test_now_ns();
  assert_int_equal(accel_tokenizer_create_from_gguf(r->gguf, &r->tok),
                   ACCEL_OK);
  print_message("%s: %u tokens, tokenizer built in %.2f ms\n", name,
                accel_tokenizer_vocab_size(r->tok),
                (double)(test_now_ns() - t0) / 1e6);
  size_t size;
  snprintf(path, sizeof(path), "%s/ggml-vocab-%s.gguf.inp", g_vocab_dir, name);
  r->inp = read_all(path, &size);
  assert_non_null(r->inp);
  // Texts end with "\n__ggml_vocab_test__\n" (llama.cpp's
  // convert_hf_to_gguf_update.py writes them so).
  static const char kSep[] = "\n__ggml_vocab_test__\n";
  char *p = r->inp;
  char *sep;
  while ((sep = strstr(p, kSep)) != NULL && r->n_texts < 256) {
    *sep = '\0';
    r->texts[r->n_texts] = p;
    r->lens[r->n_texts] = (size_t)(sep - p);
    r->n_texts++;
    p = sep + strlen(kSep);
  }
  snprintf(path, sizeof(path), "%s/ggml-vocab-%s.gguf.out", g_vocab_dir, name);
  r->outp = read_all(path, &size);
  assert_non_null(r->outp);
  p = r->outp;
  for (size_t i = 0; i < r->n_texts; ++i) {
    char *nl = strchr(p, '\n');
    assert_non_null(nl);
    *nl = '\0';
    r->expected[i] = p;
    p = nl + 1;
  }
  assert_true(r->n_texts > 20);
  return true;
}

static void close_real(real_t *r) {
  accel_tokenizer_destroy(r->tok);
  accel_gguf_close(r->gguf);
  free(r->inp);
  free(r->outp);
}

static void check_reference_ids(const char *name) {
  real_t r;
  if (!open_real(name, &r)) {
    skip();
  }
  size_t failures = 0;
  for (size_t i = 0; i < r.n_texts; ++i) {
    size_t n;
    int32_t *ids = encode(r.tok, r.texts[i], r.lens[i], 0, &n);
    char got[8192];
    size_t at = 0;
    got[0] = '\0';
    for (size_t k = 0; k < n && at + 16 < sizeof(got); ++k) {
      at += (size_t)snprintf(got + at, sizeof(got) - at, " %d", ids[k]);
    }
    if (strcmp(got, r.expected[i]) != 0) {
      print_message("%s text %zu \"%s\":\n  want%s\n  got %s\n", name, i,
                    r.texts[i], r.expected[i], got);
      ++failures;
    }
    free(ids);
  }
  print_message("%s: %zu texts, %zu differ from the reference\n", name,
                r.n_texts, failures);
  close_real(&r);
  assert_int_equal(failures, 0);
}

// The ids equal the reference tokenizer's for every text of llama.cpp's
// test file (state: the vocabulary's name).
static void test_ids_match_reference(void **state) {
  check_reference_ids(*state);
}

// Pieces of multilingual text, code, emoji, whitespace runs and special-token
// strings that random texts are made of.
static const char *const kPieces[] = {"Hello",
                                      " world",
                                      "  ",
                                      "   ",
                                      "\n",
                                      "\n\n",
                                      "\t",
                                      "\r\n",
                                      " ",
                                      "日本語のテキスト",
                                      "Привет, мир",
                                      "مرحبا بالعالم",
                                      "שלום",
                                      "नमस्ते",
                                      "😀",
                                      "👨‍👩‍👧‍👦",
                                      "🇺🇸",
                                      "e\xcc\x81",
                                      "ß",
                                      "ǅ",
                                      "123456789",
                                      "3.14",
                                      "'s",
                                      "'LL",
                                      "'Re",
                                      "don't",
                                      "    ",
                                      "for (int i = 0; i < n; ++i) {",
                                      "    return x->y;",
                                      "}",
                                      "<s>",
                                      "</s>",
                                      "<|im_start|>",
                                      "<|endoftext|>",
                                      "[PAD151650]",
                                      "<|begin_of_text|>",
                                      "!!!",
                                      "...",
                                      "ＡＢＣ",
                                      "①②",
                                      "\xe2\x80\x8b",
                                      "\xc2\xa0",
                                      "\xe3\x80\x80",
                                      "ℕ",
                                      "ﬁ",
                                      "Ⅻ"};

static size_t random_text(test_rng_t *rng, char *buf, size_t cap) {
  size_t n = 0;
  size_t parts = test_rng_range(rng, 1, 16);
  for (size_t p = 0; p < parts; ++p) {
    if (test_rng_range(rng, 0, 4) == 0) {
      // a random scalar value from a few planes (no surrogates)
      static const uint32_t kBase[] = {0x20,   0xa0,   0x400,   0x3040,
                                       0x4e00, 0xac00, 0x1f300, 0x20000};
      uint32_t cp = kBase[test_rng_range(rng, 0, 7)] +
                    (uint32_t)test_rng_range(rng, 0, 0x5f);
      char u[4];
      size_t l;
      if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3f));
        l = 2;
      } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        l = 3;
      } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        l = 4;
      }
      if (cp < 0x80) {
        u[0] = (char)cp;
        l = 1;
      }
      if (n + l < cap) {
        memcpy(buf + n, u, l);
        n += l;
      }
      continue;
    }
    const char *s = kPieces[test_rng_range(
        rng, 0, sizeof(kPieces) / sizeof(kPieces[0]) - 1)];
    size_t l = strlen(s);
    if (n + l < cap) {
      memcpy(buf + n, s, l);
      n += l;
    }
  }
  buf[n] = '\0';
  return n;
}

static void check_round_trips(const char *name) {
  real_t r;
  if (!open_real(name, &r)) {
    skip();
  }
  test_rng_t rng;
  test_rng_init(&rng, name);
  bool spm = accel_tokenizer_kind(r.tok) == ACCEL_TOKENIZER_KIND_SPM;
  size_t tried = 0;
  for (size_t i = 0; i < r.n_texts + 400; ++i) {
    char buf[1024];
    const char *text = buf;
    size_t len;
    if (i < r.n_texts) {
      text = r.texts[i];
      len = r.lens[i];
    } else {
      len = random_text(&rng, buf, sizeof(buf));
    }
    // SentencePiece spells spaces as U+2581, so text holding U+2581 does not
    // come back; every other valid UTF-8 text does.
    if (!valid_utf8((const uint8_t *)text, len) ||
        (spm && strstr(text, "\xe2\x96\x81") != NULL)) {
      continue;
    }
    for (uint32_t flags = 0; flags <= ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL;
         ++flags) {
      size_t n, back_len;
      int32_t *ids = encode(r.tok, text, len, flags, &n);
      char *back = decode_stream(r.tok, ids, n, 0, &back_len);
      if (back_len != len || memcmp(back, text, len) != 0) {
        print_message("%s: \"%s\" came back as \"%s\"\n", name, text, back);
        fail();
      }
      free(back);
      free(ids);
    }
    ++tried;
  }
  print_message("%s: %zu texts came back exactly\n", name, tried);
  close_real(&r);
}

// decode(encode(x)) == x through the streaming decoder, every chunk valid
// UTF-8, for the test texts and random multilingual texts (state: the
// vocabulary's name).
static void test_round_trips(void **state) { check_round_trips(*state); }

// BOS and EOS follow the files' flags: llama-spm adds BOS, llama-bpe adds
// BOS by llama.cpp's default for its pre-tokenizer, qwen2 adds neither;
// special-token text is encoded as text, and special tokens render only
// with the SPECIAL flag.
static void test_special_tokens_follow_the_file(void **state) {
  (void)state;
  static const struct {
    const char *name;
    int32_t bos, eos;
    bool adds_bos;
    const char *special_text;
  } kCases[] = {{"llama-spm", 1, 2, true, "<s>"},
                {"llama-bpe", 128000, 128001, true, "<|begin_of_text|>"},
                {"qwen2", 151643, 151643, false, "<|endoftext|>"}};
  for (size_t c = 0; c < 3; ++c) {
    real_t r;
    if (!open_real(kCases[c].name, &r)) {
      skip();
    }
    assert_int_equal(accel_tokenizer_bos(r.tok), kCases[c].bos);
    assert_int_equal(accel_tokenizer_eos(r.tok), kCases[c].eos);
    size_t n, m;
    int32_t *plain = encode(r.tok, "Hi there", 8, 0, &n);
    int32_t *with =
        encode(r.tok, "Hi there", 8, ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL, &m);
    assert_int_equal(m, n + (kCases[c].adds_bos ? 1 : 0));
    if (kCases[c].adds_bos) {
      assert_int_equal(with[0], kCases[c].bos);
      assert_memory_equal(with + 1, plain, n * sizeof(int32_t));
    }
    free(plain);
    free(with);
    // "<s>" in the text is text: never the special id.
    const char *st = kCases[c].special_text;
    int32_t *ids = encode(r.tok, st, strlen(st), 0, &n);
    assert_true(n > 1);
    for (size_t k = 0; k < n; ++k) {
      assert_int_not_equal(ids[k], kCases[c].bos);
    }
    free(ids);
    char piece[64];
    size_t len;
    assert_int_equal(accel_tokenizer_token_piece(r.tok, kCases[c].bos, 0, piece,
                                                 sizeof(piece), &len),
                     ACCEL_OK);
    assert_int_equal(len, 0);
    assert_int_equal(accel_tokenizer_token_piece(r.tok, kCases[c].bos,
                                                 ACCEL_TOKENIZER_PIECE_SPECIAL,
                                                 piece, sizeof(piece), &len),
                     ACCEL_OK);
    assert_true(len == strlen(st) && memcmp(piece, st, len) == 0);
    close_real(&r);
  }
}

// Random bytes (invalid UTF-8 included) encode to ids in range; with
// SentencePiece the pieces joined are the bytes with the space prefix.
static void test_random_bytes_encode_in_range(void **state) {
  (void)state;
  static const char *const kNames[] = {"llama-spm", "llama-bpe", "qwen2"};
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (size_t c = 0; c < 3; ++c) {
    real_t r;
    if (!open_real(kNames[c], &r)) {
      skip();
    }
    for (int iter = 0; iter < 200; ++iter) {
      char buf[256];
      size_t len = test_rng_range(&rng, 0, sizeof(buf));
      for (size_t i = 0; i < len; ++i) {
        buf[i] = (char)test_rng_next(&rng);
        if (buf[i] == '\xe2') {
          buf[i] = ' ';  // no U+2581 by chance
        }
      }
      size_t n;
      int32_t *ids = encode(r.tok, buf, len, 0, &n);
      out_t joined = {0};
      for (size_t k = 0; k < n; ++k) {
        assert_true(ids[k] >= 0 &&
                    (uint32_t)ids[k] < accel_tokenizer_vocab_size(r.tok));
        char piece[512];
        size_t pl;
        assert_int_equal(accel_tokenizer_token_piece(r.tok, ids[k], 0, piece,
                                                     sizeof(piece), &pl),
                         ACCEL_OK);
        put(&joined, piece, pl);
      }
      if (c == 0 && len != 0) {
        // A character's lead byte may swallow part of a U+2581 that stands
        // for a space (llama.cpp splits the same way), whose bytes then come
        // back by byte fallback: U+2581 read as a space gives the input.
        size_t m = 0;
        for (size_t k = 0; k < joined.n; ++k) {
          if (k + 3 <= joined.n && memcmp(joined.p + k, SP, 3) == 0) {
            joined.p[m++] = ' ';
            k += 2;
          } else {
            joined.p[m++] = joined.p[k];
          }
        }
        assert_int_equal(m, len + 1);
        assert_int_equal(joined.p[0], ' ');
        assert_memory_equal(joined.p + 1, buf, len);
      }
      free(joined.p);
      size_t dl;
      free(decode_stream(r.tok, ids, n, 0, &dl));
      free(ids);
    }
    close_real(&r);
  }
}

// ---- random vocabularies against naive merge loops
// ----------------------------

static char *xstrdup(const char *s) {
  char *d = strdup(s);
  assert_non_null(d);
  return d;
}

static void free_strings(char **s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    free(s[i]);
  }
  free(s);
}

static int find_text(char **tokens, size_t n, const char *s, size_t len) {
  for (size_t i = 0; i < n; ++i) {
    if (strlen(tokens[i]) == len && memcmp(tokens[i], s, len) == 0) {
      return (int)i;
    }
  }
  return -1;
}

// SentencePiece on random vocabularies over {a, b, c, d, U+2581} equals a
// naive loop: merge the adjacent pair whose concatenation is the
// highest-scoring token (leftmost on ties) until none is; unknown
// characters fall back to <0xXX>.
static void test_spm_matches_naive_merges(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  static const char *const kAlpha[] = {"a", "b", "c", "d", SP};
  for (int round = 0; round < 20; ++round) {
    size_t cap = 600, n = 0;
    char **tokens = calloc(cap, sizeof(char *));
    float *scores = calloc(cap, sizeof(float));
    int32_t *types = calloc(cap, sizeof(int32_t));
    assert_true(tokens && scores && types);
    tokens[n] = xstrdup("<unk>"), types[n++] = 2;
    tokens[n] = xstrdup("<s>"), types[n++] = 3;
    tokens[n] = xstrdup("</s>"), types[n++] = 3;
    for (int b = 0; b < 256; ++b) {
      char t[8];
      snprintf(t, sizeof(t), "<0x%02X>", b);
      tokens[n] = xstrdup(t), types[n++] = 6;
    }
    for (int a = 0; a < 5; ++a) {
      tokens[n] = xstrdup(kAlpha[a]), types[n] = 1;
      scores[n++] = -100.0f - (float)a;
    }
    while (n < 400) {
      char t[64] = "";
      size_t l = test_rng_range(&rng, 2, 5);
      for (size_t k = 0; k < l; ++k) {
        strcat(t, kAlpha[test_rng_range(&rng, 0, 4)]);
      }
      if (find_text(tokens, n, t, strlen(t)) >= 0) {
        continue;
      }
      tokens[n] = xstrdup(t), types[n] = 1;
      // few distinct scores, so that ties happen
      scores[n++] = -(float)test_rng_range(&rng, 0, 30);
    }
    vocab_t v = {.model = "llama",
                 .tokens = tokens,
                 .n_tokens = n,
                 .scores = scores,
                 .n_scores = n,
                 .types = types,
                 .bos = 1,
                 .eos = 2,
                 .unk = 0,
                 .add_bos = -1,
                 .add_space_prefix = -1};
    accel_gguf_t *g;
    uint8_t *image;
    accel_tokenizer_t *t;
    assert_int_equal(open_vocab(&v, &g, &image, &t), ACCEL_OK);
    for (int iter = 0; iter < 30; ++iter) {
      char text[128];
      size_t len = test_rng_range(&rng, 0, 60);
      for (size_t k = 0; k < len; ++k) {
        text[k] = "abcd  abcdz"[test_rng_range(&rng, 0, 10)];
      }
      text[len] = '\0';
      // The reference: symbols are characters of " " + text with spaces
      // as U+2581 ('z' has no token).
      char esc[512];
      size_t el = 0;
      if (len != 0) {
        memcpy(esc, SP, 3), el = 3;
      }
      for (size_t k = 0; k < len; ++k) {
        if (text[k] == ' ') {
          memcpy(esc + el, SP, 3), el += 3;
        } else {
          esc[el++] = text[k];
        }
      }
      size_t start[512], size[512], count = 0;
      for (size_t k = 0; k < el;) {
        size_t cl = (uint8_t)esc[k] == 0xe2 ? 3 : 1;
        start[count] = k, size[count++] = cl;
        k += cl;
      }
      for (;;) {
        int best = -1;
        float best_score = 0;
        for (size_t k = 0; k + 1 < count; ++k) {
          int id = find_text(tokens, n, esc + start[k], size[k] + size[k + 1]);
          if (id >= 0 && (best < 0 || scores[id] > best_score)) {
            best = (int)k, best_score = scores[id];
          }
        }
        if (best < 0) {
          break;
        }
        size[best] += size[best + 1];
        memmove(&start[best + 1], &start[best + 2],
                (count - best - 2) * sizeof(size_t));
        memmove(&size[best + 1], &size[best + 2],
                (count - best - 2) * sizeof(size_t));
        --count;
      }
      int32_t want[512];
      size_t nw = 0;
      for (size_t k = 0; k < count; ++k) {
        int id = find_text(tokens, n, esc + start[k], size[k]);
        if (id >= 0) {
          want[nw++] = id;
        } else {
          for (size_t b = 0; b < size[k]; ++b) {
            want[nw++] = 3 + (uint8_t)esc[start[k] + b];
          }
        }
      }
      size_t got_n;
      int32_t *got = encode(t, text, len, 0, &got_n);
      if (got_n != nw || memcmp(got, want, nw * sizeof(int32_t)) != 0) {
        print_message("text \"%s\": %zu ids, want %zu\n", text, got_n, nw);
        fail();
      }
      size_t back_len;
      char *back = decode_stream(t, got, got_n, 0, &back_len);
      assert_int_equal(back_len, len);
      assert_memory_equal(back, text, len);
      free(back);
      free(got);
    }
    close_vocab(g, image, t);
    free_strings(tokens, n);
    free(scores);
    free(types);
  }
}

// The byte-level alphabet, written independently: printable Latin-1 bytes
// stand for themselves, the others for U+0100 onwards in byte order.
static void byte_level(uint8_t b, char *out) {
  static int order[256];
  int next = 0;
  for (int c = 0; c < 256; ++c) {
    bool printable =
        (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || c >= 0xae;
    order[c] = printable ? c : 256 + next++;
  }
  int cp = order[b];
  if (cp < 0x80) {
    out[0] = (char)cp, out[1] = '\0';
  } else {
    out[0] = (char)(0xc0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3f));
    out[2] = '\0';
  }
}

// BPE on random merge lists over {a, b, c, d, e} equals a naive loop: merge
// the adjacent pair of lowest rank (leftmost on ties) until none is left.
static void test_bpe_matches_naive_merges(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 20; ++round) {
    size_t cap = 1024, n = 0, nm = 0;
    char **tokens = calloc(cap, sizeof(char *));
    char **merges = calloc(cap, sizeof(char *));
    char **left = calloc(cap, sizeof(char *));
    char **right = calloc(cap, sizeof(char *));
    assert_true(tokens && merges && left && right);
    for (int b = 0; b < 256; ++b) {
      char s[4];
      byte_level((uint8_t)b, s);
      tokens[n++] = xstrdup(s);
    }
    while (nm < 300) {
      // a merge of two tokens made of a-e letters
      const char *x = tokens[(size_t)'a' + test_rng_range(&rng, 0, 4)];
      const char *y = tokens[(size_t)'a' + test_rng_range(&rng, 0, 4)];
      if (n > 256 && test_rng_range(&rng, 0, 1)) {
        x = tokens[256 + test_rng_range(&rng, 0, n - 257)];
      }
      if (n > 256 && test_rng_range(&rng, 0, 1)) {
        y = tokens[256 + test_rng_range(&rng, 0, n - 257)];
      }
      char m[256];
      snprintf(m, sizeof(m), "%s %s", x, y);
      if (strlen(x) + strlen(y) > 12 ||
          find_text(merges, nm, m, strlen(m)) >= 0) {
        continue;
      }
      left[nm] = xstrdup(x), right[nm] = xstrdup(y);
      merges[nm++] = xstrdup(m);
      snprintf(m, sizeof(m), "%s%s", x, y);
      if (find_text(tokens, n, m, strlen(m)) < 0) {
        tokens[n++] = xstrdup(m);
      }
    }
    vocab_t v = {.model = "gpt2",
                 .pre = "qwen2",
                 .tokens = tokens,
                 .n_tokens = n,
                 .merges = merges,
                 .n_merges = nm,
                 .bos = -1,
                 .eos = -1,
                 .unk = -1,
                 .add_bos = -1,
                 .add_space_prefix = -1};
    accel_gguf_t *g;
    uint8_t *image;
    accel_tokenizer_t *t;
    assert_int_equal(open_vocab(&v, &g, &image, &t), ACCEL_OK);
    for (int iter = 0; iter < 30; ++iter) {
      char text[128];
      size_t len = test_rng_range(&rng, 1, 80);
      for (size_t k = 0; k < len; ++k) {
        text[k] = (char)('a' + test_rng_range(&rng, 0, 4));
      }
      text[len] = '\0';
      // letters only: one pre-token
      char sym[128][64];
      size_t count = len;
      for (size_t k = 0; k < len; ++k) {
        sym[k][0] = text[k], sym[k][1] = '\0';
      }
      for (;;) {
        size_t best = 0, best_rank = SIZE_MAX;
        for (size_t k = 0; k + 1 < count; ++k) {
          for (size_t r = 0; r < nm && r < best_rank; ++r) {
            if (strcmp(left[r], sym[k]) == 0 &&
                strcmp(right[r], sym[k + 1]) == 0) {
              best = k, best_rank = r;
            }
          }
        }
        if (best_rank == SIZE_MAX) {
          break;
        }
        size_t bl = strlen(sym[best]), rl = strlen(sym[best + 1]);
        memcpy(sym[best] + bl, sym[best + 1], rl + 1);
        memmove(&sym[best + 1], &sym[best + 2],
                (count - best - 2) * sizeof(sym[0]));
        --count;
      }
      size_t got_n;
      int32_t *got = encode(t, text, len, 0, &got_n);
      bool same = got_n == count;
      for (size_t k = 0; same && k < count; ++k) {
        same = got[k] == find_text(tokens, n, sym[k], strlen(sym[k]));
      }
      if (!same) {
        print_message("text \"%s\": %zu ids, want %zu\n", text, got_n, count);
        fail();
      }
      free(got);
    }
    close_vocab(g, image, t);
    free_strings(tokens, n);
    free_strings(merges, nm);
    free_strings(left, nm);
    free_strings(right, nm);
  }
}

// User-defined tokens are split out of the text as llama.cpp does: token
// by token, longest first (then lower id), each at its leftmost
// non-overlapping occurrences in what is still raw text; checked against
// that sequential loop written here, on random overlapping tokens over
// {a, b, c}, with the raw pieces encoded on their own.
static void test_user_defined_tokens_split_as_llama_cpp(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 30; ++round) {
    size_t n = 0;
    char *tokens[256 + 16];
    int32_t types[256 + 16];
    for (int b = 0; b < 256; ++b) {
      char c[4];
      byte_level((uint8_t)b, c);
      tokens[n] = xstrdup(c), types[n++] = 1;
    }
    size_t n_user = test_rng_range(&rng, 1, 12);
    while (n < 256 + n_user) {
      char u[8] = "";
      size_t l = test_rng_range(&rng, 1, 4);
      for (size_t k = 0; k < l; ++k) {
        u[k] = "abc"[test_rng_range(&rng, 0, 2)];
      }
      if (l == 1 || find_text(tokens + 256, n - 256, u, l) >= 0) {
        continue;  // one-byte texts are the alphabet's; no duplicates
      }
      tokens[n] = xstrdup(u), types[n++] = 4;
    }
    char *merges[] = {"a b"};
    vocab_t v = {.model = "gpt2",
                 .pre = "qwen2",
                 .tokens = tokens,
                 .n_tokens = n,
                 .types = types,
                 .merges = merges,
                 .n_merges = 1,
                 .bos = -1,
                 .eos = -1,
                 .unk = -1,
                 .add_bos = -1,
                 .add_space_prefix = -1};
    accel_gguf_t *g;
    uint8_t *image;
    accel_tokenizer_t *t;
    assert_int_equal(open_vocab(&v, &g, &image, &t), ACCEL_OK);
    // user-defined ids by priority: longer text first, then lower id
    size_t order[16], n_order = 0;
    for (size_t len = 4; len >= 2; --len) {
      for (size_t i = 256; i < n; ++i) {
        if (strlen(tokens[i]) == len) {
          order[n_order++] = i;
        }
      }
    }
    for (int iter = 0; iter < 20; ++iter) {
      char text[64];
      size_t len = test_rng_range(&rng, 0, 40);
      for (size_t k = 0; k < len; ++k) {
        text[k] = "abcd"[test_rng_range(&rng, 0, 3)];
      }
      text[len] = '\0';
      // fragments: start, length, id (-1 raw)
      size_t fs[128], fl[128];
      int fid[128];
      size_t nf = 1;
      fs[0] = 0, fl[0] = len, fid[0] = -1;
      for (size_t o = 0; o < n_order; ++o) {
        const char *u = tokens[order[o]];
        size_t ul = strlen(u);
        for (size_t i = 0; i < nf; ++i) {
          if (fid[i] >= 0) {
            continue;
          }
          for (size_t p = fs[i]; p + ul <= fs[i] + fl[i]; ++p) {
            if (memcmp(text + p, u, ul) == 0) {
              // [fs[i], p) token [p + ul, end)
              memmove(&fs[i + 3], &fs[i + 1], (nf - i - 1) * sizeof(size_t));
              memmove(&fl[i + 3], &fl[i + 1], (nf - i - 1) * sizeof(size_t));
              memmove(&fid[i + 3], &fid[i + 1], (nf - i - 1) * sizeof(int));
              size_t end = fs[i] + fl[i];
              fl[i] = p - fs[i];
              fs[i + 1] = p, fl[i + 1] = ul, fid[i + 1] = (int)order[o];
              fs[i + 2] = p + ul, fl[i + 2] = end - p - ul, fid[i + 2] = -1;
              nf += 2;
              i += 1;  // continue in the remainder (i + 2 next)
              break;
            }
          }
        }
      }
      int32_t want[128];
      size_t nw = 0;
      for (size_t i = 0; i < nf; ++i) {
        if (fid[i] >= 0) {
          want[nw++] = fid[i];
        } else if (fl[i] != 0) {
          size_t m;
          int32_t *ids = encode(t, text + fs[i], fl[i], 0, &m);
          memcpy(want + nw, ids, m * sizeof(int32_t));
          nw += m;
          free(ids);
        }
      }
      size_t got_n;
      int32_t *got = encode(t, text, len, 0, &got_n);
      if (got_n != nw || memcmp(got, want, nw * sizeof(int32_t)) != 0) {
        print_message("text \"%s\": %zu ids, want %zu\n", text, got_n, nw);
        fail();
      }
      free(got);
    }
    close_vocab(g, image, t);
    for (size_t i = 0; i < n; ++i) {
      free(tokens[i]);
    }
  }
}

// ---- the decoder
// --------------------------------------------------------------

// A SentencePiece vocabulary of byte tokens (id 6 + byte) and the words
// "hi" (5), U+2581 "hi" (3) and "x" (4).
static accel_status_t open_byte_vocab(accel_gguf_t **g, uint8_t **image,
                                      accel_tokenizer_t **t) {
  static char *tokens[256 + 6];
  static float scores[256 + 6];
  static int32_t types[256 + 6];
  static char names[256][8];
  tokens[0] = "<unk>", types[0] = 2;
  tokens[1] = "<s>", types[1] = 3;
  tokens[2] = "</s>", types[2] = 3;
  tokens[3] = SP "hi", types[3] = 1;
  tokens[4] = "x", types[4] = 1;
  tokens[5] = "hi", types[5] = 1;
  for (int b = 0; b < 256; ++b) {
    snprintf(names[b], sizeof(names[b]), "<0x%02X>", b);
    tokens[6 + b] = names[b], types[6 + b] = 6;
  }
  vocab_t v = {.model = "llama",
               .tokens = tokens,
               .n_tokens = 262,
               .scores = scores,
               .n_scores = 262,
               .types = types,
               .bos = 1,
               .eos = 2,
               .unk = 0,
               .add_bos = -1,
               .add_space_prefix = -1};
  return open_vocab(&v, g, image, t);
}

// Feeds |bytes| one byte token each and returns what came out in total
// (after a flush), checking each chunk's validity.
static char *push_bytes(const accel_tokenizer_t *t, const char *bytes, size_t n,
                        size_t *size) {
  int32_t ids[64];
  for (size_t i = 0; i < n; ++i) {
    ids[i] = 6 + (uint8_t)bytes[i];
  }
  return decode_stream(t, ids, n, 0, size);
}

// A character split over byte tokens comes out whole, once complete; bytes
// that cannot form one come out as U+FFFD per maximal invalid subsequence
// (the same output as Python's bytes.decode(errors="replace")).
static void test_decoder_holds_split_characters(void **state) {
  (void)state;
  accel_gguf_t *g;
  uint8_t *image;
  accel_tokenizer_t *t;
  assert_int_equal(open_byte_vocab(&g, &image, &t), ACCEL_OK);
  accel_token_decoder_t *d;
  assert_int_equal(accel_token_decoder_create(t, 0, &d), ACCEL_OK);
  const char *text;
  size_t len;
  static const uint8_t kEmoji[4] = {0xf0, 0x9f, 0x98, 0x80};
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(accel_token_decoder_push(d, 6 + kEmoji[i], &text, &len),
                     ACCEL_OK);
    assert_int_equal(len, i < 3 ? 0 : 4);
  }
  assert_memory_equal(text, kEmoji, 4);
  accel_token_decoder_destroy(d);

  static const struct {
    const char *in, *want;
  } kCases[] = {
      {"\xff", "\xef\xbf\xbd"},
      {"\xe2\x82"
       "A",
       "\xef\xbf\xbd"
       "A"},
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xf0\x9f", "\xef\xbf\xbd"},
      {"a\xf4\x90\x80\x80"
       "b",
       "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
       "\xef\xbf\xbd"
       "b"},
      {"\xe6\x97\xa5\xe6\x9c", "\xe6\x97\xa5\xef\xbf\xbd"},
  };
  for (size_t c = 0; c < sizeof(kCases) / sizeof(kCases[0]); ++c) {
    size_t n;
    char *out = push_bytes(t, kCases[c].in, strlen(kCases[c].in), &n);
    assert_int_equal(n, strlen(kCases[c].want));
    assert_memory_equal(out, kCases[c].want, n);
    free(out);
  }
  close_vocab(g, image, t);
}

// The space prefix of the first word is dropped once per stream (again
// after a flush), kept with KEEP_SPACE_PREFIX, and control tokens render
// only with SPECIAL.
static void test_decoder_space_prefix_and_specials(void **state) {
  (void)state;
  accel_gguf_t *g;
  uint8_t *image;
  accel_tokenizer_t *t;
  assert_int_equal(open_byte_vocab(&g, &image, &t), ACCEL_OK);
  int32_t ids[] = {1, 3, 3, 2};
  size_t n;
  char *s = decode_stream(t, ids, 4, 0, &n);
  assert_string_equal(s, "hi hi");
  free(s);
  s = decode_stream(t, ids, 4, ACCEL_TOKENIZER_PIECE_KEEP_SPACE_PREFIX, &n);
  assert_string_equal(s, " hi hi");
  free(s);
  s = decode_stream(t, ids, 4, ACCEL_TOKENIZER_PIECE_SPECIAL, &n);
  assert_string_equal(s, "<s> hi hi</s>");  // as HF and llama.cpp
  free(s);
  accel_token_decoder_t *d;
  assert_int_equal(accel_token_decoder_create(t, 0, &d), ACCEL_OK);
  const char *text;
  size_t len;
  for (int round = 0; round < 2; ++round) {
    assert_int_equal(accel_token_decoder_push(d, 3, &text, &len), ACCEL_OK);
    assert_int_equal(len, 2);
    assert_memory_equal(text, "hi", 2);
    assert_int_equal(accel_token_decoder_push(d, 6 + 0xe6, &text, &len),
                     ACCEL_OK);
    assert_int_equal(len, 0);
    assert_int_equal(accel_token_decoder_flush(d, &text, &len), ACCEL_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(text, "\xef\xbf\xbd", 3);
  }
  accel_token_decoder_destroy(d);
  close_vocab(g, image, t);
}

// ---- threads ------------------------------------------------------------------

typedef struct shared_run {
  const accel_tokenizer_t *tok;
  const char *const *texts;
  size_t n_texts;
  int32_t *want[8];
  size_t want_n[8];
  int mismatches;
} shared_run_t;

static void *encode_all_texts(void *arg) {
  shared_run_t *r = arg;
  for (int round = 0; round < 50; ++round) {
    for (size_t i = 0; i < r->n_texts; ++i) {
      int32_t ids[128];
      size_t n = 0;
      accel_status_t st = accel_tokenizer_encode(
          r->tok, r->texts[i], strlen(r->texts[i]),
          ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL, ids, 128, &n);
      accel_token_decoder_t *d;
      const char *text;
      size_t len;
      if (st != ACCEL_OK || n != r->want_n[i] ||
          memcmp(ids, r->want[i], n * sizeof(int32_t)) != 0 ||
          accel_token_decoder_create(r->tok, 0, &d) != ACCEL_OK) {
        __atomic_add_fetch(&r->mismatches, 1, __ATOMIC_RELAXED);
        continue;
      }
      for (size_t k = 0; k < n; ++k) {
        if (accel_token_decoder_push(d, ids[k], &text, &len) != ACCEL_OK) {
          __atomic_add_fetch(&r->mismatches, 1, __ATOMIC_RELAXED);
        }
      }
      accel_token_decoder_destroy(d);
    }
  }
  return NULL;
}

// One tokenizer encodes from four threads at once (each with its own
// decoder) and gives every thread the ids it gives one thread alone.
static void test_tokenizer_is_shared_by_threads(void **state) {
  (void)state;
  accel_gguf_t *g;
  uint8_t *image;
  accel_tokenizer_t *t;
  assert_int_equal(open_byte_vocab(&g, &image, &t), ACCEL_OK);
  static const char *const kTexts[] = {"hi hi x", "xx hi", " hi\xe6\x97\xa5",
                                       "", "hihihi  x"};
  shared_run_t run = {.tok = t, .texts = kTexts, .n_texts = 5};
  for (size_t i = 0; i < 5; ++i) {
    run.want[i] = encode(t, kTexts[i], strlen(kTexts[i]),
                         ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL, &run.want_n[i]);
  }
  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(pthread_create(&threads[i], NULL, encode_all_texts, &run),
                     0);
  }
  for (int i = 0; i < 4; ++i) {
    pthread_join(threads[i], NULL);
  }
  assert_int_equal(run.mismatches, 0);
  for (size_t i = 0; i < 5; ++i) {
    free(run.want[i]);
  }
  close_vocab(g, image, t);
}

// ---- malformed vocabularies and misuse
// ------------------------------------------

static void expect_refused(const vocab_t *v, accel_status_t want,
                           const char *needle) {
  accel_gguf_t *g;
  uint8_t *image;
  accel_tokenizer_t *t;
  accel_status_t st = open_vocab(v, &g, &image, &t);
  print_message("  %s: %s\n", accel_status_name(st), accel_last_error());
  assert_int_equal(st, want);
  assert_null(t);
  assert_non_null(strstr(accel_last_error(), needle));
  close_vocab(g, image, NULL);
}

// Each broken rule of a vocabulary is refused with a message naming it.
static void test_malformed_vocabularies_are_refused(void **state) {
  (void)state;
  char *tokens[] = {"a", "b", "ab", "<s>"};
  char *merges[] = {"a b"};
  char *bad_merges[] = {"a b", "a zz"};
  char *spaceless[] = {"ab"};
  float scores[4] = {0};
  vocab_t base = {.model = "gpt2",
                  .pre = "qwen2",
                  .tokens = tokens,
                  .n_tokens = 4,
                  .merges = merges,
                  .n_merges = 1,
                  .bos = -1,
                  .eos = -1,
                  .unk = -1,
                  .add_bos = -1,
                  .add_space_prefix = -1};
  vocab_t v = base;
  v.merges = NULL;
  expect_refused(&v, ACCEL_ERROR_FORMAT, "tokenizer.ggml.merges");
  v = base;
  v.merges = bad_merges, v.n_merges = 2;
  expect_refused(&v, ACCEL_ERROR_FORMAT, "merges[1] names \"zz\"");
  v = base;
  v.merges = spaceless;
  expect_refused(&v, ACCEL_ERROR_FORMAT, "merges[0] \"ab\"");
  v = base;
  v.pre = "falcon";
  expect_refused(&v, ACCEL_ERROR_UNSUPPORTED, "\"falcon\"");
  v = base;
  v.pre = NULL;
  expect_refused(&v, ACCEL_ERROR_UNSUPPORTED, "\"default\"");
  v = base;
  v.model = "bert";
  expect_refused(&v, ACCEL_ERROR_UNSUPPORTED, "model \"bert\"");
  v = base;
  v.model = NULL;
  expect_refused(&v, ACCEL_ERROR_NOT_FOUND, "tokenizer.ggml.model");
  v = base;
  v.tokens = NULL;
  expect_refused(&v, ACCEL_ERROR_NOT_FOUND, "tokenizer.ggml.tokens");
  v = base;
  v.bos = 9;
  expect_refused(&v, ACCEL_ERROR_FORMAT, "bos_token_id is 9");
  v = base;
  v.model = "llama", v.pre = NULL, v.merges = NULL;
  expect_refused(&v, ACCEL_ERROR_FORMAT, "tokenizer.ggml.scores");
  v.scores = scores, v.n_scores = 3;
  expect_refused(&v, ACCEL_ERROR_FORMAT, "scores has 3 entries for 4");
  int32_t types[4] = {1, 1, 1, 9};
  v.n_scores = 4, v.types = types;
  expect_refused(&v, ACCEL_ERROR_FORMAT, "token_type[3] is 9");
}

// NULL arguments, unknown flags, short capacities and ids out of range are
// refused with messages, outputs untouched; a size query works.
static void test_misuse_is_refused(void **state) {
  (void)state;
  accel_gguf_t *g;
  uint8_t *image;
  accel_tokenizer_t *t;
  assert_int_equal(open_byte_vocab(&g, &image, &t), ACCEL_OK);
  accel_tokenizer_t *none = (accel_tokenizer_t *)1;
  assert_int_equal(accel_tokenizer_create_from_gguf(NULL, &none),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_ptr_equal(none, (accel_tokenizer_t *)1);
  assert_int_equal(accel_tokenizer_create_from_gguf(g, NULL),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  size_t count = 77;
  int32_t ids[4] = {-5, -5, -5, -5};
  assert_int_equal(accel_tokenizer_encode(NULL, "x", 1, 0, ids, 4, &count),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_int_equal(accel_tokenizer_encode(t, NULL, 1, 0, ids, 4, &count),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_int_equal(accel_tokenizer_encode(t, "x", 1, 0, NULL, 4, &count),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_int_equal(accel_tokenizer_encode(t, "x", 1, 0, ids, 4, NULL),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_int_equal(accel_tokenizer_encode(t, "x", 1, 0x10, ids, 4, &count),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "flags"));
  assert_int_equal(count, 77);
  // " hi hi x" -> ▁hi ▁hi ▁ x: "▁" alone has no token, so <0xE2> <0x96>
  // <0x81>; with BOS 7 ids.
  assert_int_equal(
      accel_tokenizer_encode(
          t, "hi hi x", 7, ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL, NULL, 0, &count),
      ACCEL_OK);
  assert_int_equal(count, 7);
  assert_int_equal(
      accel_tokenizer_encode(
          t, "hi hi x", 7, ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL, ids, 4, &count),
      ACCEL_ERROR_OUT_OF_MEMORY);
  assert_int_equal(count, 7);
  assert_int_equal(ids[0], -5);
  assert_non_null(strstr(accel_last_error(), "needs 7 ids"));
  int32_t all[7];
  assert_int_equal(
      accel_tokenizer_encode(
          t, "hi hi x", 7, ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL, all, 7, &count),
      ACCEL_OK);
  const int32_t want[7] = {1, 3, 3, 6 + 0xe2, 6 + 0x96, 6 + 0x81, 4};
  assert_memory_equal(all, want, sizeof(want));

  char buf[8];
  size_t size = 99;
  assert_int_equal(accel_tokenizer_token_piece(t, 262, 0, buf, 8, &size),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_int_equal(accel_tokenizer_token_piece(t, -1, 0, buf, 8, &size),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "token -1"));
  assert_int_equal(size, 99);
  assert_int_equal(accel_tokenizer_token_piece(t, 3, 0, buf, 2, &size),
                   ACCEL_ERROR_OUT_OF_MEMORY);
  assert_int_equal(size, 3);
  assert_int_equal(accel_tokenizer_token_piece(t, 3, 0, NULL, 0, &size),
                   ACCEL_OK);
  assert_int_equal(size, 3);
  assert_int_equal(
      accel_tokenizer_token_piece(t, 3, ACCEL_TOKENIZER_PIECE_KEEP_SPACE_PREFIX,
                                  buf, 8, &size),
      ACCEL_ERROR_INVALID_ARGUMENT);

  accel_token_decoder_t *d = NULL;
  assert_int_equal(accel_token_decoder_create(t, 0x80, &d),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(d);
  assert_int_equal(accel_token_decoder_create(t, 0, &d), ACCEL_OK);
  const char *text = "untouched";
  size_t len = 5;
  assert_int_equal(accel_token_decoder_push(d, 262, &text, &len),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_string_equal(text, "untouched");
  assert_int_equal(accel_token_decoder_push(NULL, 3, &text, &len),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_int_equal(accel_token_decoder_flush(d, NULL, &len),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  accel_token_decoder_destroy(d);
  accel_token_decoder_destroy(NULL);
  accel_tokenizer_destroy(NULL);
  assert_int_equal(accel_tokenizer_kind(NULL), 0);
  assert_int_equal(accel_tokenizer_vocab_size(NULL), 0);
  assert_int_equal(accel_tokenizer_bos(NULL), -1);
  assert_int_equal(accel_tokenizer_eos(NULL), -1);
  assert_int_equal(accel_tokenizer_kind(t), ACCEL_TOKENIZER_KIND_SPM);
  assert_int_equal(accel_tokenizer_vocab_size(t), 262);
  close_vocab(g, image, t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_prestate(test_ids_match_reference, "llama-spm"),
      cmocka_unit_test_prestate(test_ids_match_reference, "llama-bpe"),
      cmocka_unit_test_prestate(test_ids_match_reference, "qwen2"),
      cmocka_unit_test_prestate(test_round_trips, "llama-spm"),
      cmocka_unit_test_prestate(test_round_trips, "llama-bpe"),
      cmocka_unit_test_prestate(test_round_trips, "qwen2"),
      cmocka_unit_test(test_special_tokens_follow_the_file),
      cmocka_unit_test(test_random_bytes_encode_in_range),
      cmocka_unit_test(test_spm_matches_naive_merges),
      cmocka_unit_test(test_bpe_matches_naive_merges),
      cmocka_unit_test(test_user_defined_tokens_split_as_llama_cpp),
      cmocka_unit_test(test_decoder_holds_split_characters),
      cmocka_unit_test(test_decoder_space_prefix_and_specials),
      cmocka_unit_test(test_tokenizer_is_shared_by_threads),
      cmocka_unit_test(test_malformed_vocabularies_are_refused),
      cmocka_unit_test(test_misuse_is_refused),
  };
  return cmocka_run_group_tests(tests, fetch_vocabularies, NULL);
}
