// Statistics of benchmark samples: medians, bootstrap confidence intervals
// of a median, verdicts against a target, and the Mann-Whitney rank test that
// `accel-bench compare` judges changes with. docs/benchmarks.md states the
// methods; tests/bench/bench_stats_test.c checks them on samples with known
// answers. Pure functions of their inputs (no global state): thread-safe.
#ifndef ACCEL_BENCH_BENCH_STATS_H_
#define ACCEL_BENCH_BENCH_STATS_H_

#include <stdbool.h>
#include <stdint.h>

// The verdict of a figure against its target, from its confidence interval.
typedef enum bench_verdict {
  BENCH_VERDICT_NONE = 0,  // no target: reported only
  BENCH_VERDICT_MET,       // the whole interval satisfies the target
  BENCH_VERDICT_MISSED,    // no point of the interval satisfies the target
  BENCH_VERDICT_INCONCLUSIVE,  // the interval straddles the target
} bench_verdict_t;

// A parsed target: "<= 1.5", "< 100", ">= 0.95", "> 2".
typedef struct bench_target {
  bool upper;      // true: "<=" or "<" (lower is better)
  bool strict;     // "<" or ">"
  double bound;
} bench_target_t;

// Parses |text| ("<= 1.5"); returns false (|out| untouched) when |text| is
// NULL, empty or not "<op> <number>".
bool bench_target_parse(const char *text, bench_target_t *out);

// Whether |x| satisfies |t|.
bool bench_target_holds(const bench_target_t *t, double x);

// The verdict of the interval [|lo|, |hi|] against |target| (NULL or "":
// BENCH_VERDICT_NONE): MET when both ends satisfy it, MISSED when neither
// does, else INCONCLUSIVE.
bench_verdict_t bench_verdict_of(const char *target, double lo, double hi);

// "met", "missed", "inconclusive", or NULL for BENCH_VERDICT_NONE.
const char *bench_verdict_name(bench_verdict_t v);

// The verdict named |name| (as bench_verdict_name writes it); NONE when
// |name| is NULL or unknown.
bench_verdict_t bench_verdict_parse(const char *name);

// Median of |n| doubles (n >= 1); |scratch| holds n doubles and is
// overwritten (values itself is not). Linear time (quickselect).
double bench_stats_median(const double *values, int n, double *scratch);

// splitmix64: the next value of the generator whose state is |*state|.
uint64_t bench_stats_rng(uint64_t *state);

// The percentile bootstrap interval of the median of |values| (n >= 1) at
// confidence |level| (0.95): |resamples| resamples with replacement drawn
// from a generator seeded with |seed| (the same inputs give the same
// interval). Writes the bounds to |out_lo| and |out_hi|. Returns false (and
// writes nothing) when n < 1, resamples < 1, level is outside (0, 1) or
// memory ran out.
bool bench_stats_bootstrap_median(const double *values, int n, int resamples,
                                  double level, uint64_t seed, double *out_lo,
                                  double *out_hi);

// The Mann-Whitney U test of samples |a| (na) and |b| (nb), two-sided, with
// the normal approximation (tie-corrected variance, continuity correction).
// Writes U of |a| (the number of pairs with a > b, ties counting one half)
// to |out_u| and the p-value to |out_p|. Returns false when either sample is
// empty or memory ran out. With all values tied, p is 1.
bool bench_stats_mann_whitney(const double *a, int na, const double *b,
                              int nb, double *out_u, double *out_p);

// FNV-1a of |text|: a stable seed per figure name.
uint64_t bench_stats_seed(const char *text);

#endif  // ACCEL_BENCH_BENCH_STATS_H_
