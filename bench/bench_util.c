#include "bench.h"

#include <pthread.h>
#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/accel.h"

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

bench_result_t *bench_add(bench_report_t *report, const char *name,
                          double value, const char *unit,
                          const char *baseline_name, double baseline,
                          const char *target, int runs) {
  if (report->count >= (int)(sizeof(report->results) /
                             sizeof(report->results[0]))) {
    return &report->results[report->count - 1];
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
  return r;
}

bool bench_target_met(const char *target, double x) {
  double bound = 0;
  if (sscanf(target, "<= %lf", &bound) == 1) {
    return x <= bound;
  }
  if (sscanf(target, ">= %lf", &bound) == 1) {
    return x >= bound;
  }
  if (sscanf(target, "< %lf", &bound) == 1) {
    return x < bound;
  }
  if (sscanf(target, "> %lf", &bound) == 1) {
    return x > bound;
  }
  return true;  // no target
}

static double ratio_of(const bench_result_t *r) {
  if (r->paired_ratio > 0) {
    return r->paired_ratio;
  }
  return r->baseline_name[0] && r->baseline != 0 ? r->value / r->baseline
                                                 : 0.0;
}

bench_result_t *bench_add_paired(bench_report_t *report, const char *name,
                                 const double *values, const char *unit,
                                 const char *baseline_name,
                                 const double *baselines, int n,
                                 const char *target) {
  double ratios[64];
  int m = 0;
  for (int i = 0; i < n && m < 64; ++i) {
    if (baselines[i] > 0) {
      ratios[m++] = values[i] / baselines[i];
    }
  }
  bench_result_t *r =
      bench_add(report, name, bench_median(values, n), unit, baseline_name,
                bench_median(baselines, n), target, n);
  r->paired_ratio = m > 0 ? bench_median(ratios, m) : 0.0;
  return r;
}

static void print_json_result(const bench_result_t *r, bool first) {
  bool has_base = r->baseline_name[0] != '\0';
  double ratio = ratio_of(r);
  double judged = has_base ? ratio : r->value;
  printf("%s\n  {\"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", ",
         first ? "" : ",", r->name, r->value, r->unit);
  if (has_base) {
    // ratio_method: "paired" (median of per-run ratios) or "medians"
    // (median value / median baseline).
    printf("\"baseline_name\": \"%s\", \"baseline\": %.6g, "
           "\"ratio\": %.4g, \"ratio_method\": \"%s\", ",
           r->baseline_name, r->baseline, ratio,
           r->paired_ratio > 0 ? "paired" : "medians");
  } else {
    printf("\"baseline_name\": null, \"baseline\": null, "
           "\"ratio\": null, ");
  }
  if (r->target[0]) {
    printf("\"target\": \"%s\", \"met\": %s, ", r->target,
           bench_target_met(r->target, judged) ? "true" : "false");
  } else {
    printf("\"target\": null, \"met\": null, ");
  }
  printf("\"runs\": %d}", r->runs);
}

// One table row. A paired ratio (the median of per-run ratios) is not
// value / baseline of the two medians printed beside it, so it carries a
// "p" mark that the note under the table explains.
static void print_table_row(const bench_result_t *r) {
  bool has_base = r->baseline_name[0] != '\0';
  double judged = has_base ? ratio_of(r) : r->value;
  printf("%-36s %12.4g %-6s %-28s ", r->name, r->value, r->unit,
         has_base ? r->baseline_name : "-");
  if (has_base) {
    printf("%12.4g %8.3f%s ", r->baseline, ratio_of(r),
           r->paired_ratio > 0 ? "p" : " ");
  } else {
    printf("%12s %8s  ", "-", "-");
  }
  const char *met = "-";
  if (r->target[0]) {
    met = bench_target_met(r->target, judged) ? "yes" : "NO";
  }
  printf("%-9s %s   (median of %d runs)\n", r->target[0] ? r->target : "-",
         met, r->runs);
}

int bench_print(const bench_report_t *report, bool json) {
  if (json) {
    printf("{\"bench\": \"%s\", \"device\": \"%s\", \"results\": [",
           report->bench, report->device);
    for (int i = 0; i < report->count; ++i) {
      print_json_result(&report->results[i], i == 0);
    }
    printf("]}\n");
    return 0;
  }
  bool any_paired = false;
  printf("accel-bench %s on %s\n", report->bench, report->device);
  printf("%-36s %12s %-6s %-28s %12s %9s %-9s %s\n", "figure", "value",
         "unit", "baseline", "baseline", "ratio", "target", "met");
  for (int i = 0; i < report->count; ++i) {
    print_table_row(&report->results[i]);
    any_paired = any_paired || report->results[i].paired_ratio > 0;
  }
  if (any_paired) {
    printf("p: paired ratio, the median of the per-run ratios value / "
           "baseline of samples\n   taken side by side, not the value "
           "column over the baseline column\n");
  }
  return 0;
}

// ---- figures described as data ------------------------------------------

static double slot_median(const bench_group_t *g, int slot,
                          double samples[][BENCH_MAX_SLOTS]) {
  double column[BENCH_MAX_RUNS];
  for (int r = 0; r < g->runs; ++r) {
    column[r] = samples[r][slot];
  }
  return bench_median(column, g->runs);
}

// |f| with its baseline resolved: for baseline_lowest, the other slot with
// the lowest median.
static bench_figure_t resolve_baseline(const bench_group_t *g,
                                       const bench_figure_t *f,
                                       double samples[][BENCH_MAX_SLOTS]) {
  bench_figure_t out = *f;
  if (!f->baseline_lowest || g->slot_names == NULL) {
    return out;
  }
  int best = -1;
  double best_median = 0;
  for (int i = 0; i < g->slots; ++i) {
    double m = slot_median(g, i, samples);
    if (i != f->value_slot && (best < 0 || m < best_median)) {
      best = i;
      best_median = m;
    }
  }
  if (best >= 0) {
    out.baseline_slot = best;
    out.baseline_name = g->slot_names[best];
  }
  return out;
}

static void group_add_figure(bench_report_t *report, const bench_group_t *g,
                             const bench_figure_t *figure,
                             double samples[][BENCH_MAX_SLOTS]) {
  const bench_figure_t resolved = resolve_baseline(g, figure, samples);
  const bench_figure_t *f = &resolved;
  double values[BENCH_MAX_RUNS], baselines[BENCH_MAX_RUNS];
  for (int r = 0; r < g->runs; ++r) {
    values[r] = samples[r][f->value_slot];
    baselines[r] = f->baseline_name != NULL ? samples[r][f->baseline_slot] : 0;
  }
  if (f->baseline_name != NULL && f->pairing == BENCH_PAIRED) {
    bench_add_paired(report, f->name, values, f->unit, f->baseline_name,
                     baselines, g->runs, f->target);
    return;
  }
  bench_add(report, f->name, bench_median(values, g->runs), f->unit,
            f->baseline_name,
            f->baseline_name != NULL ? bench_median(baselines, g->runs) : 0,
            f->target, g->runs);
}

int bench_group_run(bench_report_t *report, const bench_group_t *group,
                    void *ctx) {
  if (group->runs < 1 || group->runs > BENCH_MAX_RUNS || group->slots < 1 ||
      group->slots > BENCH_MAX_SLOTS) {
    fprintf(stderr, "accel-bench: a group of %d runs of %d samples\n",
            group->runs, group->slots);
    return 1;
  }
  if (group->setup != NULL && group->setup(ctx) != 0) {
    return 1;
  }
  static _Thread_local double samples[BENCH_MAX_RUNS][BENCH_MAX_SLOTS];
  int failed = 0;
  for (int r = -1; r < group->runs && !failed; ++r) {  // r = -1: warm-up
    double scratch[BENCH_MAX_SLOTS] = {0};
    failed = group->measure(ctx, r, r >= 0 ? samples[r] : scratch);
  }
  if (group->teardown != NULL) {
    group->teardown(ctx);
  }
  for (int i = 0; i < group->figure_count && !failed; ++i) {
    if (group->keep_figure == NULL || group->keep_figure(ctx, i)) {
      group_add_figure(report, group, &group->figures[i], samples);
    }
  }
  return failed;
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
