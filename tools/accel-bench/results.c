#include "results.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The most samples a figure may carry (the benchmarks' BENCH_MAX_RUNS), and
// the most figures a run: a larger file is refused, not trusted.
#define RESULTS_MAX_SAMPLES 1024
#define RESULTS_MAX_FIGURES 4096

double bench_fig_judged(const bench_fig_t *f) {
  return f->baseline_name != NULL ? f->ratio : f->value;
}

bool bench_fig_higher_is_better(const bench_fig_t *f) {
  if (f->target != NULL && f->target[0] != '\0') {
    return f->target[0] == '>';
  }
  size_t n = f->unit != NULL ? strlen(f->unit) : 0;
  return n >= 2 && strcmp(f->unit + n - 2, "/s") == 0;
}

static char *dup_or_null(const char *s) { return s != NULL ? strdup(s) : NULL; }

bench_fig_t *bench_run_add(bench_run_t *run, const bench_fig_t *fig) {
  if (run->count == run->capacity) {
    int cap = run->capacity ? 2 * run->capacity : 16;
    bench_fig_t *figs = realloc(run->figs, (size_t)cap * sizeof(*figs));
    if (figs == NULL) {
      return NULL;
    }
    run->figs = figs;
    run->capacity = cap;
  }
  bench_fig_t *f = &run->figs[run->count];
  *f = *fig;
  f->bench = dup_or_null(fig->bench);
  f->name = dup_or_null(fig->name);
  f->unit = dup_or_null(fig->unit);
  f->baseline_name = dup_or_null(fig->baseline_name);
  f->target = dup_or_null(fig->target);
  f->method = dup_or_null(fig->method);
  f->verdict = dup_or_null(fig->verdict);
  f->samples = NULL;
  if (fig->sample_count > 0) {
    f->samples = malloc((size_t)fig->sample_count * sizeof(double));
    if (f->samples != NULL) {
      memcpy(f->samples, fig->samples,
             (size_t)fig->sample_count * sizeof(double));
    }
  }
  if (f->bench == NULL || f->name == NULL ||
      (fig->sample_count > 0 && f->samples == NULL)) {
    run->count++;  // freed with the run
    return NULL;
  }
  run->count++;
  return f;
}

const bench_fig_t *bench_run_find(const bench_run_t *run, const char *bench,
                                  const char *name) {
  for (int i = 0; i < run->count; ++i) {
    if (strcmp(run->figs[i].bench, bench) == 0 &&
        strcmp(run->figs[i].name, name) == 0) {
      return &run->figs[i];
    }
  }
  return NULL;
}

void bench_run_free(bench_run_t *run) {
  for (int i = 0; i < run->count; ++i) {
    bench_fig_t *f = &run->figs[i];
    free(f->bench);
    free(f->name);
    free(f->unit);
    free(f->baseline_name);
    free(f->target);
    free(f->method);
    free(f->verdict);
    free(f->samples);
  }
  free(run->figs);
  free(run->commit);
  free(run->time);
  free(run->build_type);
  free(run->host);
  free(run->meta_json);
  memset(run, 0, sizeof(*run));
}

char *bench_read_file(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "accel-bench: cannot open %s: %m\n", path);
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf != NULL) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n < cap - 1) {
      break;
    }
    char *bigger = realloc(buf, cap * 2);
    if (bigger == NULL) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = bigger;
    cap *= 2;
  }
  bool failed = ferror(f) != 0;
  fclose(f);
  if (buf == NULL || failed) {
    fprintf(stderr, "accel-bench: cannot read %s\n", path);
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  if (out_size != NULL) {
    *out_size = n;
  }
  return buf;
}

// ---- parsing -----------------------------------------------------------------

// Member |key| of |obj| as a string: NULL when absent or null; |*bad| set
// when present with another type.
static const char *get_string(json_object *obj, const char *key, bool *bad) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(obj, key, &v) || v == NULL) {
    return NULL;
  }
  if (!json_object_is_type(v, json_type_string)) {
    *bad = true;
    return NULL;
  }
  return json_object_get_string(v);
}

// Member |key| as a finite number; NAN when absent or null; |*bad| set when
// present with another type or not finite.
static double get_number(json_object *obj, const char *key, bool *bad) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(obj, key, &v) || v == NULL) {
    return NAN;
  }
  if (!json_object_is_type(v, json_type_double) &&
      !json_object_is_type(v, json_type_int)) {
    *bad = true;
    return NAN;
  }
  double x = json_object_get_double(v);
  if (!isfinite(x)) {
    *bad = true;
    return NAN;
  }
  return x;
}

static int fail(const char *what, const char *fmt, const char *detail) {
  fprintf(stderr, "accel-bench: %s: ", what);
  fprintf(stderr, fmt, detail);
  fputc('\n', stderr);
  return 1;
}

// One entry of a subcommand's "results" into |run|.
static int parse_figure(json_object *r, const char *bench, const char *what,
                        bench_run_t *run) {
  if (!json_object_is_type(r, json_type_object)) {
    return fail(what, "a result of \"%s\" is not an object", bench);
  }
  bool bad = false;
  bench_fig_t f = {.bench = (char *)bench};
  f.name = (char *)get_string(r, "name", &bad);
  f.unit = (char *)get_string(r, "unit", &bad);
  f.baseline_name = (char *)get_string(r, "baseline_name", &bad);
  f.target = (char *)get_string(r, "target", &bad);
  f.method = (char *)get_string(r, "method", &bad);
  f.verdict = (char *)get_string(r, "verdict", &bad);
  f.value = get_number(r, "value", &bad);
  f.baseline = get_number(r, "baseline", &bad);
  f.ratio = get_number(r, "ratio", &bad);
  f.ci_low = get_number(r, "ci_low", &bad);
  f.ci_high = get_number(r, "ci_high", &bad);
  double pairs = get_number(r, "pairs", &bad);
  if (bad || f.name == NULL || f.name[0] == '\0') {
    return fail(what, "a result of \"%s\" has no name or a member of the "
                "wrong type", bench);
  }
  if (bench_run_find(run, bench, f.name) != NULL) {
    return fail(what, "figure \"%s\" appears twice", f.name);
  }
  f.pairs = isfinite(pairs) && pairs >= 0 && pairs <= RESULTS_MAX_SAMPLES
                ? (int)pairs
                : 0;
  json_object *samples = NULL;
  double xs[RESULTS_MAX_SAMPLES];
  if (json_object_object_get_ex(r, "samples", &samples) && samples != NULL) {
    if (!json_object_is_type(samples, json_type_array) ||
        json_object_array_length(samples) > RESULTS_MAX_SAMPLES) {
      return fail(what, "the samples of \"%s\" are not an array of at most "
                  "1024 numbers", f.name);
    }
    int n = (int)json_object_array_length(samples);
    for (int i = 0; i < n; ++i) {
      json_object *x = json_object_array_get_idx(samples, (size_t)i);
      if (x == NULL || (!json_object_is_type(x, json_type_double) &&
                        !json_object_is_type(x, json_type_int)) ||
          !isfinite(json_object_get_double(x))) {
        return fail(what, "a sample of \"%s\" is not a finite number",
                    f.name);
      }
      xs[i] = json_object_get_double(x);
    }
    f.samples = xs;
    f.sample_count = n;
  }
  if (bench_run_add(run, &f) == NULL) {
    return fail(what, "out of memory at \"%s\"", f.name);
  }
  return 0;
}

// One subcommand's object ({"bench", "device", "run", "results"}).
static int parse_bench(json_object *b, const char *what, bench_run_t *run) {
  bool bad = false;
  const char *bench = get_string(b, "bench", &bad);
  json_object *results = NULL;
  if (bad || bench == NULL || bench[0] == '\0' ||
      !json_object_object_get_ex(b, "results", &results) ||
      !json_object_is_type(results, json_type_array)) {
    return fail(what, "%s", "a benchmark without a \"bench\" name or a "
                "\"results\" array");
  }
  size_t n = json_object_array_length(results);
  if (n + (size_t)run->count > RESULTS_MAX_FIGURES) {
    return fail(what, "%s", "more than 4096 figures");
  }
  for (size_t i = 0; i < n; ++i) {
    if (parse_figure(json_object_array_get_idx(results, i), bench, what,
                     run)) {
      return 1;
    }
  }
  return 0;
}

// The run's metadata from |meta| (an object, or NULL).
static int parse_meta(json_object *meta, const char *what, bench_run_t *run) {
  if (meta == NULL || !json_object_is_type(meta, json_type_object)) {
    return fail(what, "%s", "no \"run\" object (commit, time, ...)");
  }
  bool bad = false;
  const char *commit = get_string(meta, "commit", &bad);
  const char *time = get_string(meta, "time", &bad);
  const char *build_type = get_string(meta, "build_type", &bad);
  const char *host = get_string(meta, "host", &bad);
  if (bad || commit == NULL || commit[0] == '\0' || time == NULL) {
    return fail(what, "%s", "the run has no commit or time string");
  }
  run->commit = strdup(commit);
  run->time = strdup(time);
  run->build_type = strdup(build_type != NULL ? build_type : "");
  run->host = strdup(host != NULL ? host : "");
  run->meta_json = strdup(
      json_object_to_json_string_ext(meta, JSON_C_TO_STRING_PLAIN));
  if (run->commit == NULL || run->time == NULL || run->build_type == NULL ||
      run->host == NULL || run->meta_json == NULL) {
    return fail(what, "%s", "out of memory");
  }
  return 0;
}

int bench_run_parse(const char *text, const char *what, bench_run_t *out) {
  memset(out, 0, sizeof(*out));
  json_tokener *tok = json_tokener_new_ex(64);
  if (tok == NULL) {
    return fail(what, "%s", "out of memory");
  }
  json_object *doc = json_tokener_parse_ex(tok, text, (int)strlen(text));
  enum json_tokener_error err = json_tokener_get_error(tok);
  if (doc != NULL && err == json_tokener_success &&
      tok->char_offset < (int)strlen(text) &&
      text[tok->char_offset + strspn(text + tok->char_offset, " \t\r\n")]) {
    err = json_tokener_error_parse_unexpected;  // trailing garbage
  }
  json_tokener_free(tok);
  if (doc == NULL || err != json_tokener_success) {
    json_object_put(doc);
    return fail(what, "not JSON: %s",
                err != json_tokener_success ? json_tokener_error_desc(err)
                                            : "empty");
  }
  int rc = 1;
  json_object *meta = NULL, *benches = NULL;
  if (!json_object_is_type(doc, json_type_object)) {
    fail(what, "%s", "not a JSON object");
  } else if (json_object_object_get_ex(doc, "benches", &benches)) {
    // A results file: {"format", "run", "benches": [...]}.
    json_object_object_get_ex(doc, "run", &meta);
    if (!json_object_is_type(benches, json_type_array)) {
      fail(what, "%s", "\"benches\" is not an array");
    } else if (parse_meta(meta, what, out) == 0) {
      rc = 0;
      for (size_t i = 0; i < json_object_array_length(benches) && !rc; ++i) {
        rc = parse_bench(json_object_array_get_idx(benches, i), what, out);
      }
    }
  } else {
    // One subcommand's output.
    json_object_object_get_ex(doc, "run", &meta);
    rc = parse_meta(meta, what, out) || parse_bench(doc, what, out);
  }
  json_object_put(doc);
  if (rc != 0) {
    bench_run_free(out);
  }
  return rc;
}

int bench_run_load(const char *path, bench_run_t *out) {
  char *text = bench_read_file(path, NULL);
  if (text == NULL) {
    memset(out, 0, sizeof(*out));
    return 1;
  }
  int rc = bench_run_parse(text, path, out);
  free(text);
  return rc;
}
