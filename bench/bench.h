// Shared benchmark machinery for accel-bench subcommands. Every figure is the
// median of repeated runs after a warm-up, reported with a baseline measured
// in the same run and the ratio value / baseline (see DESIGN.md).
#ifndef ACCEL_BENCH_BENCH_H_
#define ACCEL_BENCH_BENCH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bench_args {
  int argc;  // arguments after the subcommand name (--json removed)
  char **argv;
  bool json;
  bool quick;  // --quick: fewer repetitions (used by tests)
} bench_args_t;

typedef struct bench_result {
  char name[64];
  double value;
  char unit[16];
  char baseline_name[64];  // "" when there is no baseline
  double baseline;         // ignored without baseline_name
  // Target: "<= 1.5" on the ratio (or on the value when there is no baseline).
  char target[32];
  int runs;  // repetitions the medians came from
  // When > 0: the ratio reported and judged, the median of the per-run
  // ratios of samples taken side by side (bench_add_paired), instead of
  // value / baseline.
  double paired_ratio;
} bench_result_t;

typedef struct bench_report {
  const char *bench;   // "launch"
  char device[32];     // "host:0"
  bench_result_t results[64];
  int count;
} bench_report_t;

typedef struct accel_device accel_device_t;

// Starts |report| for subcommand |bench| ("launch") measured on |device|
// (its id names the report's device).
void bench_report_init(bench_report_t *report, const char *bench,
                       accel_device_t *device);

// Monotonic ns.
uint64_t bench_now_ns(void);

// Median of |n| doubles (sorts a copy).
double bench_median(const double *values, int n);

// Appends a result; returns it for the caller to fill the rest.
bench_result_t *bench_add(bench_report_t *report, const char *name,
                          double value, const char *unit,
                          const char *baseline_name, double baseline,
                          const char *target, int runs);

// Appends a result from |n| paired samples: values[i] and baselines[i] were
// measured side by side in run i. Reports the median of each, and as the
// ratio the median of values[i] / baselines[i]: on a shared machine whose
// speed drifts between runs, each pair sees the same conditions, so the
// per-run ratios scatter less than the ratio of two medians.
bench_result_t *bench_add_paired(bench_report_t *report, const char *name,
                                 const double *values, const char *unit,
                                 const char *baseline_name,
                                 const double *baselines, int n,
                                 const char *target);

// Prints the report as a table or as one JSON object (DESIGN.md format).
// Returns 0.
int bench_print(const bench_report_t *report, bool json);

// The floor of any handoff, the baseline of the launch and DMA latency
// figures: one thread hands a function pointer to another that spins on a
// shared cache line, and spins for the answer. Starts a fresh thread (so
// that no spinning thread is left to compete with the figure measured next),
// warms up, and returns the mean ns per round trip over |iters|; 0 if the
// thread cannot be started.
double bench_spin_handoff_ns(int iters);

// Evaluates a target string like "<= 1.5" or ">= 0.95" against |x|.
bool bench_target_met(const char *target, double x);

// Subcommands. Each returns a process exit code.
int accel_bench_launch(const bench_args_t *args);
int accel_bench_alloc(const bench_args_t *args);
int accel_bench_dma(const bench_args_t *args);
int accel_bench_topo(const bench_args_t *args);
int accel_bench_load(const bench_args_t *args);
int accel_bench_trace(const bench_args_t *args);

#endif  // ACCEL_BENCH_BENCH_H_
