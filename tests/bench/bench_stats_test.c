// Benchmark statistics (bench/bench_stats.c) on samples with known answers:
// medians against a sort, bootstrap intervals against their nominal coverage
// and the median's asymptotic standard error, verdicts against a table, and
// the Mann-Whitney test against a brute-force reference and a textbook case.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_stats.h"
#include "test_support.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// Reference median: sort a copy.
static double sorted_median(const double *x, int n) {
  double *c = malloc((size_t)n * sizeof(*c));
  memcpy(c, x, (size_t)n * sizeof(*c));
  qsort(c, (size_t)n, sizeof(*c), cmp_double);
  double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
  free(c);
  return m;
}

static double uniform01(test_rng_t *rng) {
  return ((double)(test_rng_next(rng) >> 11) + 0.5) / 9007199254740992.0;
}

// A normal deviate (Box-Muller).
static double normal(test_rng_t *rng, double mean, double sd) {
  double u = uniform01(rng), v = uniform01(rng);
  return mean + sd * sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

// Random arrays of every length 1..64, with many ties: the median equals the
// sorted reference, and the input is left as it was.
static void test_stats_median_matches_sorted_reference(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  double x[64], copy[64], scratch[64];
  for (int n = 1; n <= 64; ++n) {
    for (int trial = 0; trial < 20; ++trial) {
      for (int i = 0; i < n; ++i) {
        x[i] = (double)test_rng_range(&rng, 0, 9);
      }
      memcpy(copy, x, sizeof(x));
      assert_true(bench_stats_median(x, n, scratch) == sorted_median(x, n));
      assert_memory_equal(x, copy, (size_t)n * sizeof(double));
    }
  }
}

// A sample of one repeated value has the point as its interval.
static void test_stats_bootstrap_of_constant_sample_is_the_point(void **state) {
  (void)state;
  double x[17];
  for (int i = 0; i < 17; ++i) {
    x[i] = 1.25;
  }
  double lo = 0, hi = 0;
  assert_true(bench_stats_bootstrap_median(x, 17, 1000, 0.95, 7, &lo, &hi));
  assert_true(lo == 1.25 && hi == 1.25);
}

// The same inputs and seed give the same interval; the interval lies within
// the sample's range and brackets its median.
static void test_stats_bootstrap_is_deterministic_and_brackets_median(
    void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  double x[51];
  for (int i = 0; i < 51; ++i) {
    x[i] = normal(&rng, 3.0, 0.5);
  }
  double lo1, hi1, lo2, hi2;
  assert_true(bench_stats_bootstrap_median(x, 51, 2000, 0.95, 42, &lo1, &hi1));
  assert_true(bench_stats_bootstrap_median(x, 51, 2000, 0.95, 42, &lo2, &hi2));
  assert_true(lo1 == lo2 && hi1 == hi2);
  double m = sorted_median(x, 51);
  double c[51];
  memcpy(c, x, sizeof(c));
  qsort(c, 51, sizeof(double), cmp_double);
  assert_true(c[0] <= lo1 && lo1 <= m && m <= hi1 && hi1 <= c[50]);
}

// Over 200 samples of 101 normal values, the 95% interval contains the true
// median (the mean) in 88-99% of them: its nominal coverage, within the
// binomial spread of 200 trials and the percentile method's small-sample
// slack.
static void test_stats_bootstrap_covers_true_median_at_nominal_rate(
    void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { TRIALS = 200, N = 101 };
  double x[N];
  int covered = 0;
  for (int t = 0; t < TRIALS; ++t) {
    for (int i = 0; i < N; ++i) {
      x[i] = normal(&rng, 1.0, 0.1);
    }
    double lo, hi;
    assert_true(bench_stats_bootstrap_median(x, N, 1000, 0.95,
                                             test_rng_next(&rng), &lo, &hi));
    covered += lo <= 1.0 && 1.0 <= hi;
  }
  print_message("coverage %d of %d\n", covered, TRIALS);
  assert_in_range(covered, TRIALS * 88 / 100, TRIALS * 99 / 100);
}

// The interval's width matches the median's asymptotic standard error,
// sqrt(pi / 2) * sd / sqrt(n), times 2 * 1.96, within 20% (averaged over 20
// samples of 401 normal values); a 90% interval is narrower.
static void test_stats_bootstrap_width_matches_standard_error(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { TRIALS = 20, N = 401 };
  const double sd = 0.2;
  double x[N], width = 0, width90 = 0;
  for (int t = 0; t < TRIALS; ++t) {
    for (int i = 0; i < N; ++i) {
      x[i] = normal(&rng, 5.0, sd);
    }
    double lo, hi;
    assert_true(bench_stats_bootstrap_median(x, N, 1000, 0.95, 1, &lo, &hi));
    width += (hi - lo) / TRIALS;
    assert_true(bench_stats_bootstrap_median(x, N, 1000, 0.90, 1, &lo, &hi));
    width90 += (hi - lo) / TRIALS;
  }
  double expected = 2 * 1.96 * sqrt(M_PI / 2) * sd / sqrt((double)N);
  print_message("width %.5f, expected %.5f\n", width, expected);
  assert_true(fabs(width - expected) <= 0.2 * expected);
  assert_true(width90 < width);
}

// Bad arguments are refused and leave the outputs untouched.
static void test_stats_bootstrap_rejects_bad_arguments(void **state) {
  (void)state;
  double x[3] = {1, 2, 3}, lo = -7, hi = -7;
  assert_false(bench_stats_bootstrap_median(x, 0, 100, 0.95, 1, &lo, &hi));
  assert_false(bench_stats_bootstrap_median(x, 3, 0, 0.95, 1, &lo, &hi));
  assert_false(bench_stats_bootstrap_median(x, 3, 100, 1.0, 1, &lo, &hi));
  assert_false(bench_stats_bootstrap_median(x, 3, 100, 0.0, 1, &lo, &hi));
  assert_true(lo == -7 && hi == -7);
}

// Verdicts: met only when the whole interval satisfies the target, missed
// when none of it does, inconclusive when it straddles; none without one.
static void test_stats_verdict_follows_the_interval(void **state) {
  (void)state;
  static const struct {
    const char *target;
    double lo, hi;
    bench_verdict_t want;
  } k_cases[] = {
      {"<= 1.5", 1.1, 1.4, BENCH_VERDICT_MET},
      {"<= 1.5", 1.1, 1.5, BENCH_VERDICT_MET},
      {"<= 1.5", 1.4, 1.6, BENCH_VERDICT_INCONCLUSIVE},
      {"<= 1.5", 1.51, 1.9, BENCH_VERDICT_MISSED},
      {"< 100", 99, 100, BENCH_VERDICT_INCONCLUSIVE},
      {"< 100", 10, 99.9, BENCH_VERDICT_MET},
      {">= 0.95", 0.96, 1.2, BENCH_VERDICT_MET},
      {">= 0.95", 0.9, 1.0, BENCH_VERDICT_INCONCLUSIVE},
      {">= 0.95", 0.5, 0.94, BENCH_VERDICT_MISSED},
      {"> 2", 2, 3, BENCH_VERDICT_INCONCLUSIVE},
      {"> 2", 2.01, 3, BENCH_VERDICT_MET},
      {NULL, 1, 2, BENCH_VERDICT_NONE},
      {"", 1, 2, BENCH_VERDICT_NONE},
      {"about 2", 1, 2, BENCH_VERDICT_NONE},
  };
  for (size_t i = 0; i < sizeof(k_cases) / sizeof(k_cases[0]); ++i) {
    bench_verdict_t v =
        bench_verdict_of(k_cases[i].target, k_cases[i].lo, k_cases[i].hi);
    if (v != k_cases[i].want) {
      print_error("case %zu: \"%s\" [%g, %g]: got %d\n", i,
                  k_cases[i].target ? k_cases[i].target : "(null)",
                  k_cases[i].lo, k_cases[i].hi, (int)v);
    }
    assert_int_equal(v, k_cases[i].want);
  }
  assert_string_equal(bench_verdict_name(BENCH_VERDICT_INCONCLUSIVE),
                      "inconclusive");
  assert_null(bench_verdict_name(BENCH_VERDICT_NONE));
  assert_int_equal(bench_verdict_parse("missed"), BENCH_VERDICT_MISSED);
  assert_int_equal(bench_verdict_parse("nonsense"), BENCH_VERDICT_NONE);
}

// Targets parse only as "<op> <number>".
static void test_stats_target_parse_rejects_malformed(void **state) {
  (void)state;
  bench_target_t t = {.bound = -1};
  assert_true(bench_target_parse("<= 1.5", &t));
  assert_true(t.upper && !t.strict && t.bound == 1.5);
  assert_true(bench_target_parse(">2", &t));
  assert_true(!t.upper && t.strict && t.bound == 2);
  const char *bad[] = {"", "1.5", "<=", "<= x", "<= 1.5x", "== 1", "<= nan"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    t.bound = -1;
    assert_false(bench_target_parse(bad[i], &t));
    assert_true(t.bound == -1);
  }
  assert_false(bench_target_parse(NULL, &t));
}

// The reference Mann-Whitney: U by counting pairs, the tie term by counting
// equal values, the p-value by the same normal approximation.
static void reference_mann_whitney(const double *a, int na, const double *b,
                                   int nb, double *u, double *p) {
  *u = 0;
  for (int i = 0; i < na; ++i) {
    for (int j = 0; j < nb; ++j) {
      *u += a[i] > b[j] ? 1.0 : a[i] == b[j] ? 0.5 : 0.0;
    }
  }
  int n = na + nb;
  double *all = malloc((size_t)n * sizeof(*all));
  memcpy(all, a, (size_t)na * sizeof(*a));
  memcpy(all + na, b, (size_t)nb * sizeof(*b));
  double ties = 0;
  for (int i = 0; i < n; ++i) {
    int equal = 0;  // how many values equal all[i], itself included
    for (int j = 0; j < n; ++j) {
      equal += all[j] == all[i];
    }
    ties += (double)equal * equal - 1;  // sum over the group: t^3 - t
  }
  free(all);
  double var = na * nb / 12.0 * ((n + 1) - ties / ((double)n * (n - 1)));
  double d = fabs(*u - na * nb / 2.0) - 0.5;
  *p = var <= 0 ? 1.0 : d <= 0 ? 1.0 : erfc(d / sqrt(var) / sqrt(2.0));
}

// Random samples with ties: U and p agree with the reference.
static void test_stats_mann_whitney_matches_reference(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  double a[40], b[40];
  for (int trial = 0; trial < 200; ++trial) {
    int na = (int)test_rng_range(&rng, 1, 40);
    int nb = (int)test_rng_range(&rng, 1, 40);
    int levels = (int)test_rng_range(&rng, 2, 30);
    for (int i = 0; i < na; ++i) {
      a[i] = (double)test_rng_range(&rng, 0, (uint64_t)levels);
    }
    for (int i = 0; i < nb; ++i) {
      b[i] = (double)test_rng_range(&rng, 1, (uint64_t)levels + 1);
    }
    double u, p, ru, rp;
    assert_true(bench_stats_mann_whitney(a, na, b, nb, &u, &p));
    reference_mann_whitney(a, na, b, nb, &ru, &rp);
    assert_true(u == ru);
    assert_true(fabs(p - rp) <= 1e-9);
  }
}

// The textbook case x = {19, 22, 16, 29, 24}, y = {20, 11, 17, 12}: U = 17,
// two-sided p = 0.11135 (normal approximation, continuity correction); all
// values tied gives p = 1; empty samples are refused.
static void test_stats_mann_whitney_textbook_case(void **state) {
  (void)state;
  const double x[] = {19, 22, 16, 29, 24}, y[] = {20, 11, 17, 12};
  double u = 0, p = 0;
  assert_true(bench_stats_mann_whitney(x, 5, y, 4, &u, &p));
  assert_true(u == 17);
  assert_true(fabs(p - 0.1113469) < 1e-6);
  const double same[] = {3, 3, 3};
  assert_true(bench_stats_mann_whitney(same, 3, same, 2, &u, &p));
  assert_true(p == 1.0);
  assert_false(bench_stats_mann_whitney(x, 0, y, 4, &u, &p));
}

// Two samples of 30 from one distribution are called different at p < 0.01
// in at most 5% of 200 trials; a shift of 1.5 standard deviations is found
// in at least 95% (its power there is above 99%).
static void test_stats_mann_whitney_separates_shift_from_noise(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { TRIALS = 200, N = 30 };
  double a[N], b[N], c[N];
  int false_alarms = 0, found = 0;
  for (int t = 0; t < TRIALS; ++t) {
    for (int i = 0; i < N; ++i) {
      a[i] = normal(&rng, 1.0, 0.1);
      b[i] = normal(&rng, 1.0, 0.1);
      c[i] = normal(&rng, 1.15, 0.1);
    }
    double u, p;
    assert_true(bench_stats_mann_whitney(a, N, b, N, &u, &p));
    false_alarms += p < 0.01;
    assert_true(bench_stats_mann_whitney(a, N, c, N, &u, &p));
    found += p < 0.01;
  }
  print_message("false alarms %d, found %d of %d\n", false_alarms, found,
                TRIALS);
  assert_true(false_alarms <= TRIALS / 20);
  assert_true(found >= TRIALS * 95 / 100);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stats_median_matches_sorted_reference),
      cmocka_unit_test(test_stats_bootstrap_of_constant_sample_is_the_point),
      cmocka_unit_test(
          test_stats_bootstrap_is_deterministic_and_brackets_median),
      cmocka_unit_test(test_stats_bootstrap_covers_true_median_at_nominal_rate),
      cmocka_unit_test(test_stats_bootstrap_width_matches_standard_error),
      cmocka_unit_test(test_stats_bootstrap_rejects_bad_arguments),
      cmocka_unit_test(test_stats_verdict_follows_the_interval),
      cmocka_unit_test(test_stats_target_parse_rejects_malformed),
      cmocka_unit_test(test_stats_mann_whitney_matches_reference),
      cmocka_unit_test(test_stats_mann_whitney_textbook_case),
      cmocka_unit_test(test_stats_mann_whitney_separates_shift_from_noise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
