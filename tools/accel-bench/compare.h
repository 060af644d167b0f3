// accel-bench compare: which figures changed beyond noise between two runs
// (docs/benchmarks.md, "Comparing runs").
#ifndef ACCEL_BENCH_COMPARE_H_
#define ACCEL_BENCH_COMPARE_H_

#include <stdbool.h>
#include <stdio.h>

#include "results.h"

typedef struct bench_compare_options {
  // Family-wise false-alarm rate: each of the m figures tested on samples
  // is judged at alpha / m (Bonferroni). Default 0.01.
  double alpha;
  // The smallest relative change of the median reported (0.10: 10%), so
  // that a real but negligible shift is not called a regression. Default
  // 0.10.
  double threshold;
  bool all;  // list every figure, not only the changed, new and gone ones
} bench_compare_options_t;

// How one figure moved.
typedef enum bench_change {
  BENCH_CHANGE_NONE = 0,  // within noise (or below the threshold)
  BENCH_CHANGE_REGRESSION,
  BENCH_CHANGE_IMPROVEMENT,
  BENCH_CHANGE_NEW,   // only in the new run
  BENCH_CHANGE_GONE,  // only in the base run
} bench_change_t;

// Compares |next| with |base| figure by figure, prints a table to |out|
// and returns the number of regressions.
int bench_compare_runs(const bench_run_t *base, const bench_run_t *next,
                       const bench_compare_options_t *options, FILE *out);

// The command: accel-bench compare [--db DB] [--alpha A] [--threshold T]
// [--all] BASE NEW. Exit code: 0 without a regression, 1 with one, 2 on a
// usage or input error.
int accel_bench_compare_main(int argc, char **argv);

#endif  // ACCEL_BENCH_COMPARE_H_
