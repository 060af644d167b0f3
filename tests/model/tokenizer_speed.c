// A benchmark (meson test --benchmark --suite model): for each real
// vocabulary in ACCEL_VOCAB_DIR, the time to build the tokenizer, and
// encoding speed on multilingual text of 64 KiB and of 4x that, on one
// 64 KiB word of letters and 4x that, and on whitespace runs. The time per
// byte at 4x over that at 1x is printed as the ratio: about 1 for
// near-linear encoding (O(n^2) rescans would show about 4). Prints one JSON
// object per vocabulary; checks nothing (speed is not a test).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/gguf.h"
#include "accel/tokenizer.h"
#include "test_support.h"

static const char kSample[] =
    "The quick brown fox jumps over the lazy dog. 日本語のテキストと"
    "Привет, мир! مرحبا بالعالم 😀👨‍👩‍👧 for (int i = 0; i < 100; "
    "++i) "
    "{ sum += x[i] * 3.14159; }\n\n    return 42;\t// it's done, we'll see\n";

static char *make_text(size_t size, int kind) {
  char *s = malloc(size + 1);
  if (s == NULL) {
    abort();
  }
  for (size_t i = 0; i < size;) {
    if (kind == 0) {
      size_t n =
          sizeof(kSample) - 1 < size - i ? sizeof(kSample) - 1 : size - i;
      memcpy(s + i, kSample, n);
      i += n;
    } else if (kind == 1) {
      s[i] = (char)('a' + (i * 7 + i / 13) % 26);  // one long word
      ++i;
    } else {
      s[i] = (i % 97 == 96) ? 'x' : ((i % 5 == 0) ? '\n' : ' ');
      ++i;
    }
  }
  s[size] = '\0';
  return s;
}

// Median of 5 runs, in ns per input byte.
static double encode_ns_per_byte(const accel_tokenizer_t *t, const char *s,
                                 size_t size, size_t *count) {
  double best[5];
  for (int r = 0; r < 5; ++r) {
    uint64_t t0 = test_now_ns();
    if (accel_tokenizer_encode(t, s, size, 0, NULL, 0, count) != ACCEL_OK) {
      fprintf(stderr, "encode: %s\n", accel_last_error());
      exit(1);
    }
    best[r] = (double)(test_now_ns() - t0) / (double)size;
  }
  for (int i = 0; i < 5; ++i) {
    for (int j = i + 1; j < 5; ++j) {
      if (best[j] < best[i]) {
        double x = best[i];
        best[i] = best[j];
        best[j] = x;
      }
    }
  }
  return best[2];
}

int main(void) {
  const char *dir = getenv("ACCEL_VOCAB_DIR");
  static const char *const kNames[] = {"llama-spm", "llama-bpe", "qwen2"};
  static const char *const kKinds[] = {"text", "word", "spaces"};
  const size_t base = 64 * 1024;
  for (int v = 0; v < 3; ++v) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/ggml-vocab-%s.gguf", dir ? dir : ".",
             kNames[v]);
    accel_gguf_t *g;
    if (accel_gguf_open_file(path, &g) != ACCEL_OK) {
      fprintf(stderr,
              "tokenizer_speed: %s (fetch with "
              "tests/model/fetch-vocab.sh); skipping\n",
              accel_last_error());
      return 77;
    }
    double load[5];
    accel_tokenizer_t *t = NULL;
    for (int r = 0; r < 5; ++r) {
      accel_tokenizer_destroy(t);
      uint64_t t0 = test_now_ns();
      if (accel_tokenizer_create_from_gguf(g, &t) != ACCEL_OK) {
        fprintf(stderr, "%s\n", accel_last_error());
        return 1;
      }
      load[r] = (double)(test_now_ns() - t0) / 1e6;
    }
    double load_min = load[0];
    for (int r = 1; r < 5; ++r) {
      load_min = load[r] < load_min ? load[r] : load_min;
    }
    printf("{\"vocab\": \"%s\", \"tokens\": %u, \"load_ms_min_of_5\": %.2f",
           kNames[v], accel_tokenizer_vocab_size(t), load_min);
    for (int k = 0; k < 3; ++k) {
      char *small = make_text(base, k), *large = make_text(4 * base, k);
      size_t n1, n4;
      double a = encode_ns_per_byte(t, small, base, &n1);
      double b = encode_ns_per_byte(t, large, 4 * base, &n4);
      printf(
          ", \"%s_mb_s\": %.1f, \"%s_ids_per_kib\": %.0f, "
          "\"%s_4x_over_1x\": %.2f",
          kKinds[k], 1e3 / a, kKinds[k], (double)n1 * 1024 / (double)base,
          kKinds[k], b / a);
      free(small);
      free(large);
    }
    printf("}\n");
    accel_tokenizer_destroy(t);
    accel_gguf_close(g);
  }
  return 0;
}
