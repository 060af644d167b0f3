// Parsing and checking of POST /v1/completions bodies (completion_request.h).
#include "completion_request.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t size, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t size, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, size, fmt, ap);
  va_end(ap);
  return status;
}

// A JSON integer in [lo, hi] (json-c keeps integers as int64; a double with
// a fraction or out of range is refused).
static int get_int(json_object *v, const char *name, int64_t lo, int64_t hi,
                   int64_t *out, char *err, size_t size) {
  if (!json_object_is_type(v, json_type_int)) {
    return fail(err, size, 400, "\"%s\" must be an integer", name);
  }
  errno = 0;
  int64_t x = json_object_get_int64(v);
  if (errno != 0 || x < lo || x > hi) {
    return fail(err, size, 400, "\"%s\" is %lld, outside [%lld, %lld]", name,
                (long long)x, (long long)lo, (long long)hi);
  }
  *out = x;
  return 0;
}

static int get_number(json_object *v, const char *name, double *out,
                      char *err, size_t size) {
  if (!json_object_is_type(v, json_type_int) &&
      !json_object_is_type(v, json_type_double)) {
    return fail(err, size, 400, "\"%s\" must be a number", name);
  }
  double x = json_object_get_double(v);
  if (!isfinite(x)) {
    return fail(err, size, 400, "\"%s\" must be finite", name);
  }
  *out = x;
  return 0;
}

static int get_prompt(json_object *v, const completion_limits_t *lim,
                      completion_request_t *r, char *err, size_t size) {
  if (json_object_is_type(v, json_type_string)) {
    if (!lim->byte_prompts) {
      return fail(err, size, 400,
                  "\"prompt\" as text needs a tokenizer; this model (vocab "
                  "%u) takes token ids",
                  lim->vocab);
    }
    size_t n = (size_t)json_object_get_string_len(v);
    const unsigned char *s = (const unsigned char *)json_object_get_string(v);
    if (n == 0 || n > lim->max_context) {
      return fail(err, size, 400, "\"prompt\" has %zu bytes, not 1 to %u", n,
                  lim->max_context);
    }
    r->prompt = malloc(sizeof(int32_t) * n);
    if (r->prompt == NULL) {
      return fail(err, size, 500, "out of memory");
    }
    for (size_t i = 0; i < n; ++i) {
      r->prompt[i] = s[i];
    }
    r->prompt_tokens = (uint32_t)n;
    return 0;
  }
  if (!json_object_is_type(v, json_type_array)) {
    return fail(err, size, 400,
                "\"prompt\" must be an array of token ids or a string");
  }
  size_t n = json_object_array_length(v);
  if (n == 0 || n > lim->max_context) {
    return fail(err, size, 400, "\"prompt\" has %zu tokens, not 1 to %u", n,
                lim->max_context);
  }
  int32_t *p = malloc(sizeof(int32_t) * n);
  if (p == NULL) {
    return fail(err, size, 500, "out of memory");
  }
  for (size_t i = 0; i < n; ++i) {
    json_object *t = json_object_array_get_idx(v, i);
    char name[32];
    snprintf(name, sizeof(name), "prompt[%zu]", i);
    int64_t x = 0;
    int st = get_int(t, name, 0, (int64_t)lim->vocab - 1, &x, err, size);
    if (st != 0) {
      free(p);
      return st;
    }
    p[i] = (int32_t)x;
  }
  r->prompt = p;
  r->prompt_tokens = (uint32_t)n;
  return 0;
}

// One field of the body; 0 or the status.
static int set_field(const char *key, json_object *v,
                     const completion_limits_t *lim, completion_request_t *r,
                     char *err, size_t size) {
  int64_t i = 0;
  double d = 0;
  int st = 0;
  if (strcmp(key, "prompt") == 0) {
    return get_prompt(v, lim, r, err, size);
  } else if (strcmp(key, "model") == 0) {
    if (!json_object_is_type(v, json_type_string)) {
      return fail(err, size, 400, "\"model\" must be a string");
    }
    if (strcmp(json_object_get_string(v), lim->model) != 0) {
      return fail(err, size, 404, "model \"%.64s\" is not served (\"%s\" is)",
                  json_object_get_string(v), lim->model);
    }
  } else if (strcmp(key, "max_tokens") == 0) {
    st = get_int(v, "max_tokens", 1, lim->max_context, &i, err, size);
    r->max_tokens = (uint32_t)i;
  } else if (strcmp(key, "temperature") == 0) {
    st = get_number(v, "temperature", &d, err, size);
    if (st == 0 && (d < 0 || d > 100)) {
      st = fail(err, size, 400, "\"temperature\" is %g, outside [0, 100]", d);
    }
    r->temperature = (float)d;
  } else if (strcmp(key, "top_p") == 0) {
    st = get_number(v, "top_p", &d, err, size);
    if (st == 0 && !(d > 0 && d <= 1)) {
      st = fail(err, size, 400, "\"top_p\" is %g, outside (0, 1]", d);
    }
    r->top_p = (float)d;
  } else if (strcmp(key, "top_k") == 0) {
    st = get_int(v, "top_k", 0, lim->vocab, &i, err, size);
    r->top_k = (uint32_t)i;
  } else if (strcmp(key, "seed") == 0) {
    st = get_int(v, "seed", 0, INT64_MAX, &i, err, size);
    r->seed = (uint64_t)i;
  } else if (strcmp(key, "stream") == 0) {
    if (!json_object_is_type(v, json_type_boolean)) {
      return fail(err, size, 400, "\"stream\" must be true or false");
    }
    r->stream = json_object_get_boolean(v);
  } else {
    return fail(err, size, 400, "unknown field \"%.64s\"", key);
  }
  return st;
}

int completion_request_parse(const char *body, size_t size,
                             const completion_limits_t *limits,
                             completion_request_t *out, char *err,
                             size_t err_size) {
  if (size > COMPLETION_MAX_BODY) {
    return fail(err, err_size, 413, "the body has %zu bytes, above %u", size,
                COMPLETION_MAX_BODY);
  }
  json_tokener *tok = json_tokener_new();
  if (tok == NULL) {
    return fail(err, err_size, 500, "out of memory");
  }
  json_object *root = json_tokener_parse_ex(tok, body, (int)size);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t used = json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  if (root == NULL || jerr != json_tokener_success || used != size) {
    if (root != NULL) json_object_put(root);
    return fail(err, err_size, 400, "malformed JSON at byte %zu: %s", used,
                root == NULL && jerr == json_tokener_continue
                    ? "unexpected end"
                    : jerr != json_tokener_success
                          ? json_tokener_error_desc(jerr)
                          : "trailing data");
  }
  completion_request_t r = {.max_tokens = 16, .temperature = 1.0f,
                            .top_p = 1.0f};
  int st = 0;
  if (!json_object_is_type(root, json_type_object)) {
    st = fail(err, err_size, 400, "the body must be a JSON object");
  }
  if (st == 0) {
    json_object_object_foreach(root, key, v) {
      st = set_field(key, v, limits, &r, err, err_size);
      if (st != 0) break;
    }
  }
  if (st == 0 && r.prompt == NULL) {
    st = fail(err, err_size, 400, "\"prompt\" is required");
  }
  if (st == 0 && (uint64_t)r.prompt_tokens + r.max_tokens > limits->max_context) {
    st = fail(err, err_size, 400,
              "prompt (%u tokens) + max_tokens (%u) is above the context "
              "limit %u",
              r.prompt_tokens, r.max_tokens, limits->max_context);
  }
  json_object_put(root);
  if (st != 0) {
    free(r.prompt);
    return st;
  }
  *out = r;
  return 0;
}

void completion_request_free(completion_request_t *r) {
  free(r->prompt);
  r->prompt = NULL;
}

size_t completion_token_text(int32_t t, char *out, size_t size) {
  int n = (t >= 32 && t < 127) ? snprintf(out, size, "%c", (char)t)
                               : snprintf(out, size, "<%d>", t);
  return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
}
