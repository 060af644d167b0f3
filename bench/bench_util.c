#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
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
  return r->baseline_name[0] && r->baseline != 0 ? r->value / r->baseline
                                                 : 0.0;
}

int bench_print(const bench_report_t *report, bool json) {
  if (json) {
    printf("{\"bench\": \"%s\", \"device\": \"%s\", \"results\": [",
           report->bench, report->device);
    for (int i = 0; i < report->count; ++i) {
      const bench_result_t *r = &report->results[i];
      bool has_base = r->baseline_name[0] != '\0';
      double ratio = ratio_of(r);
      double judged = has_base ? ratio : r->value;
      printf("%s\n  {\"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", ",
             i ? "," : "", r->name, r->value, r->unit);
      if (has_base) {
        printf("\"baseline_name\": \"%s\", \"baseline\": %.6g, "
               "\"ratio\": %.4g, ",
               r->baseline_name, r->baseline, ratio);
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
    printf("]}\n");
    return 0;
  }
  printf("accel-bench %s on %s\n", report->bench, report->device);
  printf("%-36s %12s %-6s %-28s %12s %8s %-9s %s\n", "figure", "value", "unit",
         "baseline", "baseline", "ratio", "target", "met");
  for (int i = 0; i < report->count; ++i) {
    const bench_result_t *r = &report->results[i];
    bool has_base = r->baseline_name[0] != '\0';
    double judged = has_base ? ratio_of(r) : r->value;
    printf("%-36s %12.4g %-6s %-28s ", r->name, r->value, r->unit,
           has_base ? r->baseline_name : "-");
    if (has_base) {
      printf("%12.4g %8.3f ", r->baseline, ratio_of(r));
    } else {
      printf("%12s %8s ", "-", "-");
    }
    printf("%-9s %s   (median of %d runs)\n", r->target[0] ? r->target : "-",
           r->target[0] ? (bench_target_met(r->target, judged) ? "yes" : "NO")
                        : "-",
           r->runs);
  }
  return 0;
}
