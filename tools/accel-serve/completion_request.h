// The body of POST /v1/completions (accel-serve, docs/serving.md "The HTTP
// server"): parsed and checked before anything reaches the engine. Kept
// apart from the server so that fuzz/completion_request_fuzz.c drives it
// directly.
#ifndef ACCEL_TOOLS_SERVE_COMPLETION_REQUEST_H_
#define ACCEL_TOOLS_SERVE_COMPLETION_REQUEST_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// What the served model allows.
typedef struct completion_limits {
  const char *model;     // the served model's name ("model" must match)
  uint32_t vocab;        // token ids are in [0, vocab)
  uint32_t max_context;  // prompt + max_tokens at most this
  bool byte_prompts;     // text prompts are byte-level tokenized (vocab >= 256)
} completion_limits_t;

typedef struct completion_request {
  int32_t *prompt;  // malloc'd token ids
  uint32_t prompt_tokens;
  uint32_t max_tokens;  // default 16
  float temperature;    // default 1
  float top_p;          // default 1
  uint32_t top_k;       // default 0 (all)
  uint64_t seed;        // default 0
  bool stream;          // default false
} completion_request_t;

// Largest request body accepted (bytes).
#define COMPLETION_MAX_BODY (1u << 20)

// Parses the JSON |body| of |size| bytes (need not be NUL-terminated) into
// |*out| against |limits|. Returns 0, or the HTTP status to answer (400
// malformed JSON, wrong type, unknown field, value out of range; 404 unknown
// model; 413 body too large) with a message in |err| (lower case, naming
// the field). |*out| is untouched on failure; free it with
// completion_request_free.
int completion_request_parse(const char *body, size_t size,
                             const completion_limits_t *limits,
                             completion_request_t *out, char *err,
                             size_t err_size);

void completion_request_free(completion_request_t *r);

// Renders token |t| as text the byte-level way: a printable ASCII byte as
// itself, anything else as "<t>". Writes at most |size| bytes with a NUL;
// returns the length.
size_t completion_token_text(int32_t t, char *out, size_t size);

#endif  // ACCEL_TOOLS_SERVE_COMPLETION_REQUEST_H_
