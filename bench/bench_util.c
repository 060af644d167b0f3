#include "bench.h"

#include <fnmatch.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/accel.h"

// The run-length settings (bench_configure); set once before any group runs.
static struct {
  double budget_s;
  double precision;
  const char *filter;
  int min_pairs;
  bool quick;
} g_config = {.budget_s = 10.0, .precision = 0.05};

// Bootstrap resamples for a reported interval, and for the cheaper checks of
// whether a group's intervals are narrow enough yet.
#define BENCH_RESAMPLES 2000
#define BENCH_CHECK_RESAMPLES 500

void bench_configure(const bench_args_t *args) {
  g_config.budget_s = args->budget_s > 0 ? args->budget_s : 10.0;
  g_config.precision = args->precision > 0 ? args->precision : 0.05;
  g_config.filter = args->filter;
  g_config.quick = args->quick;
  g_config.min_pairs = args->min_pairs < BENCH_MAX_RUNS ? args->min_pairs
                                                        : BENCH_MAX_RUNS;
}

uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void bench_report_init(bench_report_t *report, const char *bench,
                       accel_device_t *device) {
  memset(report, 0, sizeof(*report));
  report->bench = bench;
  accel_device_info_t info = {.struct_size = sizeof(info)};
  if (accel_device_info(device, &info) == ACCEL_OK) {
    snprintf(report->device, sizeof(report->device), "%s", info.id);
  }
}

double bench_median(const double *values, int n) {
  if (n <= 0) {
    return 0.0;
  }
  double *copy = malloc((size_t)n * sizeof(*copy));
  if (copy == NULL) {
    return values[0];
  }
  memcpy(copy, values, (size_t)n * sizeof(*copy));
  qsort(copy, (size_t)n, sizeof(*copy), cmp_double);
  double m = n % 2 ? copy[n / 2] : 0.5 * (copy[n / 2 - 1] + copy[n / 2]);
  free(copy);
  return m;
}

// The judged samples of every result of the process's report (one report per
// process): static, so that results point into it without an owner to free.
static double g_sample_pool[64 * BENCH_MAX_RUNS];
static size_t g_sample_used;

static const double *keep_samples(const double *x, int n) {
  if (n <= 0 || g_sample_used + (size_t)n >
                    sizeof(g_sample_pool) / sizeof(g_sample_pool[0])) {
    return NULL;
  }
  double *kept = &g_sample_pool[g_sample_used];
  memcpy(kept, x, (size_t)n * sizeof(*x));
  g_sample_used += (size_t)n;
  return kept;
}

static bench_result_t *add_result(bench_report_t *report, const char *name,
                                  double value, const char *unit,
                                  const char *baseline_name, double baseline,
                                  const char *target, int runs) {
  if (report->count >= (int)(sizeof(report->results) /
                             sizeof(report->results[0]))) {
    fprintf(stderr, "accel-bench: more than %d figures; \"%s\" dropped\n",
            report->count, name);
    static bench_result_t overflow;
    return &overflow;
  }
  bench_result_t *r = &report->results[report->count++];
  memset(r, 0, sizeof(*r));
  snprintf(r->name, sizeof(r->name), "%s", name);
  r->value = value;
  snprintf(r->unit, sizeof(r->unit), "%s", unit);
  snprintf(r->baseline_name, sizeof(r->baseline_name), "%s",
           baseline_name != NULL ? baseline_name : "");
  r->baseline = baseline;
  snprintf(r->target, sizeof(r->target), "%s", target != NULL ? target : "");
  r->runs = runs;
  r->pairs = runs;
  return r;
}

bench_result_t *bench_add(bench_report_t *report, const char *name,
                          double value, const char *unit,
                          const char *baseline_name, double baseline,
                          const char *target, int runs) {
  bench_result_t *r = add_result(report, name, value, unit, baseline_name,
                                 baseline, target, runs);
  r->method = BENCH_METHOD_EXACT;
  double judged = value;
  if (r->baseline_name[0] != '\0') {
    r->paired_ratio = baseline != 0 ? value / baseline : 0.0;
    judged = r->paired_ratio;
  }
  r->ci_low = r->ci_high = judged;
  r->verdict = bench_verdict_of(r->target, judged, judged);
  return r;
}

// Fills |r|'s judged number, interval, verdict and samples from the |n|
// judged samples |x|.
static void judge(bench_result_t *r, const double *x, int n) {
  r->pairs = r->runs = n;
  if (n <= 0) {  // nothing measured: no interval, so nothing can be said
    bench_target_t t;
    r->verdict = bench_target_parse(r->target, &t) ? BENCH_VERDICT_INCONCLUSIVE
                                                   : BENCH_VERDICT_NONE;
    r->ci_low = r->ci_high = NAN;
    return;
  }
  double *scratch = malloc((size_t)n * sizeof(*scratch));
  double median = scratch != NULL ? bench_stats_median(x, n, scratch) : x[0];
  free(scratch);
  double lo = median, hi = median;
  bench_stats_bootstrap_median(x, n, BENCH_RESAMPLES, 0.95,
                               bench_stats_seed(r->name), &lo, &hi);
  if (r->method == BENCH_METHOD_PAIRED) {
    r->paired_ratio = median;
  }
  r->ci_low = lo;
  r->ci_high = hi;
  r->verdict = bench_verdict_of(r->target, lo, hi);
  r->samples = keep_samples(x, n);
}

// The per-pair ratios of |n| pairs into |out| (pairs with a baseline that is
// not positive left out); returns their count.
static int pair_ratios(const double *values, const double *baselines, int n,
                       double *out) {
  int m = 0;
  for (int i = 0; i < n; ++i) {
    if (baselines[i] > 0) {
      out[m++] = values[i] / baselines[i];
    }
  }
  return m;
}

bench_result_t *bench_add_paired(bench_report_t *report, const char *name,
                                 const double *values, const char *unit,
                                 const char *baseline_name,
                                 const double *baselines, int n,
                                 const char *target) {
  double *ratios = malloc((size_t)(n > 0 ? n : 1) * sizeof(*ratios));
  bench_result_t *r =
      add_result(report, name, bench_median(values, n), unit, baseline_name,
                 bench_median(baselines, n), target, n);
  r->method = BENCH_METHOD_PAIRED;
  judge(r, ratios, ratios != NULL ? pair_ratios(values, baselines, n, ratios)
                                  : 0);
  free(ratios);
  return r;
}

bench_result_t *bench_add_samples(bench_report_t *report, const char *name,
                                  const double *values, int n,
                                  const char *unit, const char *target) {
  bench_result_t *r = add_result(report, name, bench_median(values, n), unit,
                                 NULL, 0, target, n);
  r->method = BENCH_METHOD_SAMPLED;
  judge(r, values, n);
  return r;
}

bool bench_target_met(const char *target, double x) {
  bench_target_t t;
  return !bench_target_parse(target, &t) || bench_target_holds(&t, x);
}

static const char *const k_method_names[] = {"paired", "sampled", "exact"};

static void print_json_number(const char *key, double x) {
  if (isfinite(x)) {
    printf("\"%s\": %.6g, ", key, x);
  } else {
    printf("\"%s\": null, ", key);
  }
}

static void print_json_result(const bench_result_t *r, bool first) {
  bool has_base = r->baseline_name[0] != '\0';
  printf("%s\n  {\"name\": \"%s\", ", first ? "" : ",", r->name);
  print_json_number("value", r->value);
  printf("\"unit\": \"%s\", ", r->unit);
  if (has_base) {
    printf("\"baseline_name\": \"%s\", ", r->baseline_name);
    print_json_number("baseline", r->baseline);
    print_json_number("ratio", r->paired_ratio);
  } else {
    printf("\"baseline_name\": null, \"baseline\": null, \"ratio\": null, ");
  }
  print_json_number("ci_low", r->ci_low);
  print_json_number("ci_high", r->ci_high);
  printf("\"pairs\": %d, \"method\": \"%s\", ", r->pairs,
         k_method_names[r->method]);
  const char *verdict = bench_verdict_name(r->verdict);
  if (r->target[0]) {
    printf("\"target\": \"%s\", \"verdict\": \"%s\", \"met\": %s, ",
           r->target, verdict != NULL ? verdict : "inconclusive",
           r->verdict == BENCH_VERDICT_MET ? "true" : "false");
  } else {
    printf("\"target\": null, \"verdict\": null, \"met\": null, ");
  }
  printf("\"runs\": %d, \"samples\": [", r->runs);
  for (int i = 0; r->samples != NULL && i < r->pairs; ++i) {
    printf(i ? ", %.6g" : "%.6g", r->samples[i]);
  }
  printf("]}");
}

// One table row: the judged number (ratio, or value without a baseline)
// with its interval, the pairs and the verdict.
static void print_table_row(const bench_result_t *r) {
  bool has_base = r->baseline_name[0] != '\0';
  printf("%-36s %11.4g %-6s %-26s ", r->name, r->value, r->unit,
         has_base ? r->baseline_name : "-");
  if (has_base) {
    printf("%11.4g %8.3f ", r->baseline, r->paired_ratio);
  } else {
    printf("%11s %8s ", "-", "-");
  }
  char ci[48] = "exact";
  if (r->method != BENCH_METHOD_EXACT) {
    snprintf(ci, sizeof(ci), "[%.4g, %.4g]", r->ci_low, r->ci_high);
  }
  const char *verdict = bench_verdict_name(r->verdict);
  printf("%-22s %5d %-9s %s\n", ci, r->pairs, r->target[0] ? r->target : "-",
         verdict != NULL ? verdict : "-");
}

int bench_print(const bench_report_t *report, bool json) {
  if (json) {
    printf("{\"bench\": \"%s\", \"device\": \"%s\", \"run\": {",
           report->bench, report->device);
    fflush(stdout);
    bench_meta_write_json(stdout);
    printf("}, \"results\": [");
    for (int i = 0; i < report->count; ++i) {
      print_json_result(&report->results[i], i == 0);
    }
    printf("]}\n");
    return 0;
  }
  printf("accel-bench %s on %s\n", report->bench, report->device);
  printf("%-36s %11s %-6s %-26s %11s %8s %-22s %5s %-9s %s\n", "figure",
         "value", "unit", "baseline", "baseline", "ratio", "95% interval",
         "pairs", "target", "verdict");
  for (int i = 0; i < report->count; ++i) {
    print_table_row(&report->results[i]);
  }
  printf("ratio: the median of the per-pair ratios value / baseline, not "
         "the value column\nover the baseline column; the 95%% interval "
         "brackets the ratio (the value\nwithout a baseline); a verdict is "
         "met or missed only when the whole interval\nis on one side of the "
         "target, else inconclusive\n");
  return 0;
}

// ---- figures described as data ------------------------------------------

static double slot_median(int runs, int slot,
                          double samples[][BENCH_MAX_SLOTS]) {
  double column[BENCH_MAX_RUNS];
  for (int r = 0; r < runs; ++r) {
    column[r] = samples[r][slot];
  }
  return bench_median(column, runs);
}

// |f| with its baseline resolved: for baseline_lowest, the other slot with
// the lowest median.
static bench_figure_t resolve_baseline(const bench_group_t *g,
                                       const bench_figure_t *f, int runs,
                                       double samples[][BENCH_MAX_SLOTS]) {
  bench_figure_t out = *f;
  if (!f->baseline_lowest || g->slot_names == NULL) {
    return out;
  }
  int best = -1;
  double best_median = 0;
  for (int i = 0; i < g->slots; ++i) {
    double m = slot_median(runs, i, samples);
    if (i != f->value_slot && (best < 0 || m < best_median)) {
      best = i;
      best_median = m;
    }
  }
  if (best >= 0) {
    out.baseline_slot = best;
    out.baseline_name = g->slot_names[best];
  } else {
    out.baseline_name = NULL;
  }
  return out;
}

// The judged samples of figure |f| (resolved) over |runs| runs into |out|;
// returns their count.
static int figure_samples(const bench_figure_t *f, int runs,
                          double samples[][BENCH_MAX_SLOTS], double *out) {
  double values[BENCH_MAX_RUNS], baselines[BENCH_MAX_RUNS];
  for (int r = 0; r < runs; ++r) {
    values[r] = samples[r][f->value_slot];
    baselines[r] = f->baseline_name != NULL ? samples[r][f->baseline_slot] : 0;
  }
  if (f->baseline_name != NULL) {
    return pair_ratios(values, baselines, runs, out);
  }
  memcpy(out, values, (size_t)runs * sizeof(*out));
  return runs;
}

static void group_add_figure(bench_report_t *report, const bench_group_t *g,
                             const bench_figure_t *figure, int runs,
                             double samples[][BENCH_MAX_SLOTS]) {
  const bench_figure_t f = resolve_baseline(g, figure, runs, samples);
  double values[BENCH_MAX_RUNS], baselines[BENCH_MAX_RUNS];
  for (int r = 0; r < runs; ++r) {
    values[r] = samples[r][f.value_slot];
    baselines[r] = f.baseline_name != NULL ? samples[r][f.baseline_slot] : 0;
  }
  if (f.baseline_name != NULL) {
    bench_add_paired(report, f.name, values, f.unit, f.baseline_name,
                     baselines, runs, f.target);
  } else {
    bench_add_samples(report, f.name, values, runs, f.unit, f.target);
  }
}

// Whether figure |f|'s interval over |runs| runs is narrow enough: at most
// the precision times its median (or, for a median near zero, times the
// target's bound), or without any usable sample.
static bool figure_settled(const bench_group_t *g, const bench_figure_t *f,
                           int runs, double samples[][BENCH_MAX_SLOTS]) {
  const bench_figure_t resolved = resolve_baseline(g, f, runs, samples);
  static _Thread_local double x[BENCH_MAX_RUNS], scratch[BENCH_MAX_RUNS];
  int n = figure_samples(&resolved, runs, samples, x);
  if (n < 2) {
    return true;
  }
  double median = bench_stats_median(x, n, scratch);
  double lo, hi;
  if (!bench_stats_bootstrap_median(x, n, BENCH_CHECK_RESAMPLES, 0.95,
                                    bench_stats_seed(f->name), &lo, &hi)) {
    return true;
  }
  double scale = fabs(median);
  bench_target_t t;
  if (bench_target_parse(f->target, &t) && fabs(t.bound) > scale) {
    scale = fabs(t.bound);
  }
  return hi - lo <= g_config.precision * (scale > 0 ? scale : 1.0);
}

static bool group_settled(const bench_group_t *g, int runs,
                          double samples[][BENCH_MAX_SLOTS]) {
  for (int i = 0; i < g->figure_count; ++i) {
    if (!figure_settled(g, &g->figures[i], runs, samples)) {
      return false;
    }
  }
  return true;
}

static bool group_selected(const bench_group_t *g) {
  for (int i = 0; g_config.filter != NULL && i < g->figure_count; ++i) {
    if (fnmatch(g_config.filter, g->figures[i].name, 0) == 0) {
      return true;
    }
  }
  return g_config.filter == NULL;
}

// Runs the group's measurements: the warm-up, the minimum runs, then more
// (checking the intervals after every quarter more) until they are narrow
// enough, the budget is spent or the most runs are taken. Returns the runs
// taken, or -1 when a measurement failed.
static int group_measure(const bench_group_t *g, void *ctx,
                         double samples[][BENCH_MAX_SLOTS]) {
  int min_runs = g->runs > g_config.min_pairs ? g->runs : g_config.min_pairs;
  int max_runs = g->max_runs > 0 && g->max_runs < BENCH_MAX_RUNS
                     ? g->max_runs
                     : BENCH_MAX_RUNS;
  if (g_config.quick || max_runs < min_runs) {
    max_runs = min_runs;
  }
  double scratch[BENCH_MAX_SLOTS] = {0};
  if (g->measure(ctx, -1, scratch) != 0) {
    return -1;
  }
  uint64_t deadline = bench_now_ns() + (uint64_t)(g_config.budget_s * 1e9);
  int next_check = min_runs;
  for (int run = 0; run < max_runs; ++run) {
    if (g->measure(ctx, run, samples[run]) != 0) {
      return -1;
    }
    if (run + 1 < next_check) {
      continue;
    }
    if (group_settled(g, run + 1, samples) || bench_now_ns() >= deadline) {
      return run + 1;
    }
    next_check = run + 1 + (run + 1) / 4 + 1;
  }
  return max_runs;
}

int bench_group_run(bench_report_t *report, const bench_group_t *group,
                    void *ctx) {
  if (group->runs < 1 || group->runs > BENCH_MAX_RUNS || group->slots < 1 ||
      group->slots > BENCH_MAX_SLOTS) {
    fprintf(stderr, "accel-bench: a group of %d runs of %d samples\n",
            group->runs, group->slots);
    return 1;
  }
  if (!group_selected(group)) {
    return 0;
  }
  if (group->setup != NULL && group->setup(ctx) != 0) {
    return 1;
  }
  static _Thread_local double samples[BENCH_MAX_RUNS][BENCH_MAX_SLOTS];
  int runs = group_measure(group, ctx, samples);
  if (group->teardown != NULL) {
    group->teardown(ctx);
  }
  for (int i = 0; i < group->figure_count && runs > 0; ++i) {
    if (group->keep_figure == NULL || group->keep_figure(ctx, i)) {
      group_add_figure(report, group, &group->figures[i], runs, samples);
    }
  }
  return runs < 0;
}

// ---- the bare spinning handoff baseline -------------------------------------

typedef void (*bench_work_fn_t)(void);
static void bench_empty_work(void) {}

typedef struct spin_handoff {
  _Alignas(64) _Atomic uint64_t request;  // sequence number of the request
  bench_work_fn_t fn;
  _Alignas(64) _Atomic uint64_t done;
  _Atomic int stop;
} spin_handoff_t;

static inline void bench_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void *spin_handoff_worker(void *arg) {
  spin_handoff_t *h = arg;
  uint64_t seen = 0;
  for (;;) {
    while (atomic_load_explicit(&h->request, memory_order_acquire) == seen &&
           !atomic_load_explicit(&h->stop, memory_order_relaxed)) {
      bench_cpu_relax();
    }
    if (atomic_load(&h->stop)) {
      return NULL;
    }
    seen++;
    h->fn();
    atomic_store_explicit(&h->done, seen, memory_order_release);
  }
}

static double spin_handoff_sample(spin_handoff_t *h, int iters,
                                  uint64_t *seq) {
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; ++i) {
    uint64_t s = ++*seq;
    h->fn = bench_empty_work;
    atomic_store_explicit(&h->request, s, memory_order_release);
    while (atomic_load_explicit(&h->done, memory_order_acquire) != s) {
      bench_cpu_relax();
    }
  }
  return (double)(bench_now_ns() - t0) / iters;
}

double bench_spin_handoff_ns(int iters) {
  spin_handoff_t *h = aligned_alloc(64, sizeof(*h));
  if (h == NULL) {
    return 0.0;
  }
  memset(h, 0, sizeof(*h));
  pthread_t t;
  if (pthread_create(&t, NULL, spin_handoff_worker, h) != 0) {
    free(h);
    return 0.0;
  }
  uint64_t seq = 0;
  spin_handoff_sample(h, iters / 10 + 1, &seq);  // warm-up
  double ns = spin_handoff_sample(h, iters, &seq);
  atomic_store(&h->stop, 1);
  pthread_join(t, NULL);
  free(h);
  return ns;
}
