#include "bench_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool bench_target_parse(const char *text, bench_target_t *out) {
  if (text == NULL || text[0] == '\0') {
    return false;
  }
  static const struct {
    const char *op;
    bool upper, strict;
  } k_ops[] = {{"<=", true, false}, {">=", false, false},
               {"<", true, true},   {">", false, true}};
  for (size_t i = 0; i < sizeof(k_ops) / sizeof(k_ops[0]); ++i) {
    size_t len = strlen(k_ops[i].op);
    if (strncmp(text, k_ops[i].op, len) != 0) {
      continue;
    }
    char *end = NULL;
    double bound = strtod(text + len, &end);
    if (end == text + len || *end != '\0' || !isfinite(bound)) {
      return false;
    }
    *out = (bench_target_t){k_ops[i].upper, k_ops[i].strict, bound};
    return true;
  }
  return false;
}

bool bench_target_holds(const bench_target_t *t, double x) {
  if (t->upper) {
    return t->strict ? x < t->bound : x <= t->bound;
  }
  return t->strict ? x > t->bound : x >= t->bound;
}

bench_verdict_t bench_verdict_of(const char *target, double lo, double hi) {
  bench_target_t t;
  if (!bench_target_parse(target, &t)) {
    return BENCH_VERDICT_NONE;
  }
  bool lo_ok = bench_target_holds(&t, lo), hi_ok = bench_target_holds(&t, hi);
  if (lo_ok && hi_ok) {
    return BENCH_VERDICT_MET;
  }
  return !lo_ok && !hi_ok ? BENCH_VERDICT_MISSED : BENCH_VERDICT_INCONCLUSIVE;
}

static const char *const k_verdict_names[] = {NULL, "met", "missed",
                                              "inconclusive"};

const char *bench_verdict_name(bench_verdict_t v) {
  return (unsigned)v < 4 ? k_verdict_names[v] : NULL;
}

bench_verdict_t bench_verdict_parse(const char *name) {
  for (int v = 1; v < 4 && name != NULL; ++v) {
    if (strcmp(name, k_verdict_names[v]) == 0) {
      return (bench_verdict_t)v;
    }
  }
  return BENCH_VERDICT_NONE;
}

// The |k|-th smallest of x[0..n) (x reordered), Hoare's selection.
static double select_kth(double *x, int n, int k) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    double pivot = x[lo + (hi - lo) / 2];
    int i = lo, j = hi;
    while (i <= j) {
      while (x[i] < pivot) {
        i++;
      }
      while (x[j] > pivot) {
        j--;
      }
      if (i <= j) {
        double t = x[i];
        x[i++] = x[j];
        x[j--] = t;
      }
    }
    if (k <= j) {
      hi = j;
    } else if (k >= i) {
      lo = i;
    } else {
      return x[k];
    }
  }
  return x[k];
}

// Median of x[0..n), reordering x.
static double median_inplace(double *x, int n) {
  double upper = select_kth(x, n, n / 2);
  if (n % 2) {
    return upper;
  }
  // The lower middle is the largest of the elements left of n / 2.
  double lower = x[0];
  for (int i = 1; i < n / 2; ++i) {
    lower = x[i] > lower ? x[i] : lower;
  }
  return 0.5 * (lower + upper);
}

double bench_stats_median(const double *values, int n, double *scratch) {
  memcpy(scratch, values, (size_t)n * sizeof(*scratch));
  return median_inplace(scratch, n);
}

uint64_t bench_stats_rng(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

bool bench_stats_bootstrap_median(const double *values, int n, int resamples,
                                  double level, uint64_t seed, double *out_lo,
                                  double *out_hi) {
  if (n < 1 || resamples < 1 || !(level > 0 && level < 1)) {
    return false;
  }
  double *draw = malloc((size_t)n * sizeof(*draw));
  double *medians = malloc((size_t)resamples * sizeof(*medians));
  if (draw == NULL || medians == NULL) {
    free(draw);
    free(medians);
    return false;
  }
  uint64_t state = seed;
  for (int b = 0; b < resamples; ++b) {
    for (int i = 0; i < n; ++i) {
      // Multiply-shift maps 32 random bits onto [0, n) without the modulo's
      // bias toward small indices.
      uint64_t r = bench_stats_rng(&state) >> 32;
      draw[i] = values[(r * (uint64_t)n) >> 32];
    }
    medians[b] = median_inplace(draw, n);
  }
  qsort(medians, (size_t)resamples, sizeof(*medians), cmp_double);
  double tail = (1.0 - level) / 2.0;
  int lo = (int)floor(tail * (resamples - 1) + 0.5);
  int hi = (int)floor((1.0 - tail) * (resamples - 1) + 0.5);
  *out_lo = medians[lo];
  *out_hi = medians[hi];
  free(draw);
  free(medians);
  return true;
}

typedef struct ranked {
  double x;
  int group;  // 0: a, 1: b
} ranked_t;

static int cmp_ranked(const void *a, const void *b) {
  return cmp_double(&((const ranked_t *)a)->x, &((const ranked_t *)b)->x);
}

bool bench_stats_mann_whitney(const double *a, int na, const double *b,
                              int nb, double *out_u, double *out_p) {
  if (na < 1 || nb < 1) {
    return false;
  }
  int n = na + nb;
  ranked_t *all = malloc((size_t)n * sizeof(*all));
  if (all == NULL) {
    return false;
  }
  for (int i = 0; i < na; ++i) {
    all[i] = (ranked_t){a[i], 0};
  }
  for (int i = 0; i < nb; ++i) {
    all[na + i] = (ranked_t){b[i], 1};
  }
  qsort(all, (size_t)n, sizeof(*all), cmp_ranked);
  // Ranks from 1, ties sharing their mean rank; sum over a, and the tie
  // term sum(t^3 - t) of the variance correction.
  double rank_sum_a = 0, ties = 0;
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && all[j].x == all[i].x) {
      j++;
    }
    double mean_rank = 0.5 * ((double)i + 1 + (double)j);
    for (int k = i; k < j; ++k) {
      rank_sum_a += all[k].group == 0 ? mean_rank : 0;
    }
    double t = j - i;
    ties += t * t * t - t;
    i = j;
  }
  free(all);
  double u = rank_sum_a - (double)na * (na + 1) / 2.0;
  double mean = (double)na * nb / 2.0;
  double var = (double)na * nb / 12.0 *
               ((n + 1) - ties / ((double)n * (n - 1 > 0 ? n - 1 : 1)));
  double p = 1.0;
  if (var > 0) {
    double d = fabs(u - mean) - 0.5;  // continuity correction
    double z = d > 0 ? d / sqrt(var) : 0.0;
    p = erfc(z / sqrt(2.0));
    p = p > 1.0 ? 1.0 : p;
  }
  *out_u = u;
  *out_p = p;
  return true;
}

uint64_t bench_stats_seed(const char *text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char *c = text; c != NULL && *c; ++c) {
    h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
  }
  return h;
}
