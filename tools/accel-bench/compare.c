#include "compare.h"

#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_stats.h"
#include "history.h"

// A figure is tested on its samples when both runs kept at least this many.
#define COMPARE_MIN_SAMPLES 3

static bool tested_on_samples(const bench_fig_t *a, const bench_fig_t *b) {
  return a->sample_count >= COMPARE_MIN_SAMPLES &&
         b->sample_count >= COMPARE_MIN_SAMPLES;
}

static double median_of(const bench_fig_t *f) {
  if (f->sample_count < 1) {
    return bench_fig_judged(f);
  }
  double *scratch = malloc((size_t)f->sample_count * sizeof(*scratch));
  if (scratch == NULL) {
    return bench_fig_judged(f);
  }
  double m = bench_stats_median(f->samples, f->sample_count, scratch);
  free(scratch);
  return m;
}

typedef struct verdict_row {
  bench_change_t change;
  double base, next, rel, p;  // p: NAN when not tested on samples
} verdict_row_t;

static verdict_row_t judge_pair(const bench_fig_t *a, const bench_fig_t *b,
                                double alpha_each, double threshold) {
  verdict_row_t v = {.base = median_of(a), .next = median_of(b), .p = NAN};
  v.rel = v.base != 0 ? v.next / v.base - 1.0 : (v.next != 0 ? INFINITY : 0);
  bool beyond_noise = true;
  if (tested_on_samples(a, b)) {
    double u;
    beyond_noise = bench_stats_mann_whitney(a->samples, a->sample_count,
                                            b->samples, b->sample_count, &u,
                                            &v.p) &&
                   v.p < alpha_each;
  } else if (a->sample_count >= COMPARE_MIN_SAMPLES ||
             b->sample_count >= COMPARE_MIN_SAMPLES) {
    // One side without samples (an older file): the other side's interval
    // is the noise; the number without samples must lie outside it.
    const bench_fig_t *sampled =
        a->sample_count >= COMPARE_MIN_SAMPLES ? a : b;
    double other = sampled == a ? v.next : v.base;
    beyond_noise = isfinite(sampled->ci_low) && isfinite(sampled->ci_high) &&
                   (other < sampled->ci_low || other > sampled->ci_high);
  }
  if (beyond_noise && isfinite(v.rel) && fabs(v.rel) >= threshold) {
    bool worse = bench_fig_higher_is_better(b) ? v.rel < 0 : v.rel > 0;
    v.change = worse ? BENCH_CHANGE_REGRESSION : BENCH_CHANGE_IMPROVEMENT;
  }
  return v;
}

static const char *const k_change_names[] = {"", "REGRESSION", "improvement",
                                             "new", "gone"};

// "median [low, high]", or the median alone without an interval.
static void format_side(char *buf, size_t size, const bench_fig_t *f,
                        double median) {
  if (f == NULL) {
    snprintf(buf, size, "-");
  } else if (isfinite(f->ci_low) && isfinite(f->ci_high)) {
    snprintf(buf, size, "%.4g [%.4g, %.4g]", median, f->ci_low, f->ci_high);
  } else {
    snprintf(buf, size, "%.4g", median);
  }
}

static void print_row(FILE *out, const bench_fig_t *f, const verdict_row_t *v,
                      const bench_fig_t *a, const bench_fig_t *b) {
  char where[96], base[48] = "-", next[48] = "-", p[16] = "-", rel[16] = "-";
  snprintf(where, sizeof(where), "%s/%s", f->bench, f->name);
  format_side(base, sizeof(base), a, v->base);
  format_side(next, sizeof(next), b, v->next);
  if (a != NULL && b != NULL) {
    snprintf(rel, sizeof(rel), "%+.1f%%", 100.0 * v->rel);
    // p, or how the change was judged without a test on both sides.
    snprintf(p, sizeof(p), "%s",
             isfinite(v->p) ? ""
             : a->sample_count >= COMPARE_MIN_SAMPLES ||
                     b->sample_count >= COMPARE_MIN_SAMPLES
                 ? "interval"
                 : "exact");
    if (isfinite(v->p)) {
      snprintf(p, sizeof(p), "%.2g", v->p);
    }
  }
  fprintf(out, "%-48s %-28s %-28s %9s %8s %s\n", where, base, next, rel, p,
          k_change_names[v->change]);
}

// The highest one-minute load average of |run| (before and after it) and
// its core count, from its metadata; false when they are not recorded.
static bool run_load(const bench_run_t *run, double *out_load,
                     int *out_cores) {
  json_object *meta = run->meta_json != NULL
                          ? json_tokener_parse(run->meta_json)
                          : NULL;
  json_object *cores = NULL, *load = NULL;
  bool found = false;
  double highest = 0;
  if (meta != NULL && json_object_object_get_ex(meta, "cores", &cores) &&
      json_object_is_type(cores, json_type_int)) {
    const char *keys[] = {"load_before", "load_after"};
    for (int k = 0; k < 2; ++k) {
      if (json_object_object_get_ex(meta, keys[k], &load) &&
          json_object_is_type(load, json_type_array) &&
          json_object_array_length(load) >= 1) {
        double one = json_object_get_double(json_object_array_get_idx(load, 0));
        highest = one > highest ? one : highest;
        found = true;
      }
    }
    *out_cores = json_object_get_int(cores);
  }
  json_object_put(meta);
  *out_load = highest;
  return found && *out_cores > 0;
}

// Warns when a run's machine had more runnable threads than cores: its
// threads then waited for time slices, the run-to-run state of the machine
// differs by more than the pairs can cancel, and changes found are as
// likely the machine's as the code's.
static void warn_if_loaded(FILE *out, const char *which,
                           const bench_run_t *run) {
  double load;
  int cores;
  if (run_load(run, &load, &cores) && load > cores) {
    fprintf(out, "warning: the %s run saw a load average of %.1f on %d "
            "cores: its figures are as much the machine's as the code's\n",
            which, load, cores);
  }
}

int bench_compare_runs(const bench_run_t *base, const bench_run_t *next,
                       const bench_compare_options_t *options, FILE *out) {
  int tested = 0;
  for (int i = 0; i < next->count; ++i) {
    const bench_fig_t *a =
        bench_run_find(base, next->figs[i].bench, next->figs[i].name);
    tested += a != NULL && tested_on_samples(a, &next->figs[i]);
  }
  double alpha_each = options->alpha / (tested > 0 ? tested : 1);
  fprintf(out, "base: commit %s, %s, %s\nnew:  commit %s, %s, %s\n",
          base->commit, base->time, base->build_type, next->commit,
          next->time, next->build_type);
  fprintf(out, "%-48s %-28s %-28s %9s %8s %s\n", "figure",
          "base median [95%]", "new median [95%]", "change", "p", "");
  int counts[5] = {0};
  for (int i = 0; i < next->count; ++i) {
    const bench_fig_t *b = &next->figs[i];
    const bench_fig_t *a = bench_run_find(base, b->bench, b->name);
    verdict_row_t v = {.change = BENCH_CHANGE_NEW, .next = median_of(b)};
    if (a != NULL) {
      v = judge_pair(a, b, alpha_each, options->threshold);
    }
    counts[v.change]++;
    if (options->all || v.change != BENCH_CHANGE_NONE) {
      print_row(out, b, &v, a, b);
    }
  }
  for (int i = 0; i < base->count; ++i) {
    const bench_fig_t *a = &base->figs[i];
    if (bench_run_find(next, a->bench, a->name) == NULL) {
      verdict_row_t v = {.change = BENCH_CHANGE_GONE, .base = median_of(a)};
      counts[v.change]++;
      print_row(out, a, &v, a, NULL);
    }
  }
  warn_if_loaded(out, "base", base);
  warn_if_loaded(out, "new", next);
  fprintf(out,
          "%d regressions, %d improvements, %d within noise, %d new, %d gone "
          "(Mann-Whitney on the per-pair ratios of %d figures at alpha "
          "%.3g / %d, changes under %.0f%% ignored)\n",
          counts[BENCH_CHANGE_REGRESSION], counts[BENCH_CHANGE_IMPROVEMENT],
          counts[BENCH_CHANGE_NONE], counts[BENCH_CHANGE_NEW],
          counts[BENCH_CHANGE_GONE], tested, options->alpha,
          tested > 0 ? tested : 1, 100.0 * options->threshold);
  return counts[BENCH_CHANGE_REGRESSION];
}

static int usage(void) {
  fprintf(stderr,
          "usage: accel-bench compare [--db DB] [--alpha A] [--threshold T] "
          "[--all] BASE NEW\n"
          "  BASE, NEW: results files (accel-bench run --out, or NAME "
          "--json), or\n"
          "  commits (a prefix of 4 or more) of runs saved in DB\n"
          "  exit: 0 no regression, 1 a regression, 2 an error\n");
  return 2;
}

// A run from |arg|: a file when one exists at that path, else a commit in
// |db|.
static int load_side(const char *arg, const char *db, bench_run_t *out) {
  if (access(arg, F_OK) == 0 || db == NULL) {
    return bench_run_load(arg, out);
  }
  return bench_history_load_commit(db, arg, out);
}

static bool parse_fraction(const char *text, double *out) {
  char *end = NULL;
  double x = text != NULL ? strtod(text, &end) : 0;
  if (text == NULL || end == text || *end != '\0' || !(x > 0 && x < 1)) {
    fprintf(stderr, "accel-bench compare: \"%s\" is not a number in (0, 1)\n",
            text != NULL ? text : "");
    return false;
  }
  *out = x;
  return true;
}

int accel_bench_compare_main(int argc, char **argv) {
  bench_compare_options_t options = {.alpha = 0.01, .threshold = 0.10};
  const char *db = NULL, *sides[2] = {NULL, NULL};
  int nsides = 0;
  for (int i = 0; i < argc; ++i) {
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--db") == 0 && next != NULL) {
      db = argv[++i];
    } else if (strcmp(argv[i], "--alpha") == 0) {
      if (!parse_fraction(next, &options.alpha)) {
        return 2;
      }
      i++;
    } else if (strcmp(argv[i], "--threshold") == 0) {
      if (!parse_fraction(next, &options.threshold)) {
        return 2;
      }
      i++;
    } else if (strcmp(argv[i], "--all") == 0) {
      options.all = true;
    } else if (argv[i][0] == '-' || nsides == 2) {
      fprintf(stderr, "accel-bench compare: unexpected \"%s\"\n", argv[i]);
      return usage();
    } else {
      sides[nsides++] = argv[i];
    }
  }
  if (nsides != 2) {
    return usage();
  }
  bench_run_t base, next;
  if (load_side(sides[0], db, &base)) {
    return 2;
  }
  if (load_side(sides[1], db, &next)) {
    bench_run_free(&base);
    return 2;
  }
  int regressions = bench_compare_runs(&base, &next, &options, stdout);
  bench_run_free(&base);
  bench_run_free(&next);
  return regressions > 0 ? 1 : 0;
}
