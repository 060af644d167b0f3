// Shared benchmark machinery for accel-bench subcommands. A figure is
// measured as interleaved pairs (baseline, subject, baseline, subject, ...)
// after a warm-up and reported as the median of the per-pair ratios with a
// 95% bootstrap interval, the pair count and a verdict (met, missed,
// inconclusive) against its target; the run extends until the interval is
// narrow enough or a time budget ends. docs/benchmarks.md has the details.
#ifndef ACCEL_BENCH_BENCH_H_
#define ACCEL_BENCH_BENCH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench_stats.h"

typedef struct bench_args {
  int argc;  // arguments after the subcommand name (options removed)
  char **argv;
  bool json;
  bool quick;  // --quick: the minimum pairs only, no adaptive extension
  // --budget SECONDS: time each group may spend beyond its minimum pairs
  // while its intervals are still too wide; 0: the default (10 s).
  double budget_s;
  // --precision X: an interval is narrow enough when its width is at most
  // X times the median it brackets; 0: the default (0.05).
  double precision;
  // --filter GLOB: only groups with a figure whose name matches run; NULL:
  // all.
  const char *filter;
  // --min-pairs N: every group takes at least N runs (pairs); 0: each
  // group's own minimum.
  int min_pairs;
} bench_args_t;

// Applies |args|' run-length settings (budget, precision, filter, quick) to
// every group run after it. Called by accel-bench's main before a
// subcommand; a subcommand need not call it. Not thread-safe.
void bench_configure(const bench_args_t *args);

// How a figure's judged number and its interval were obtained.
typedef enum bench_method {
  BENCH_METHOD_PAIRED = 0,   // median of per-pair ratios value / baseline
  BENCH_METHOD_SAMPLED = 1,  // no baseline: median of the value's samples
  BENCH_METHOD_EXACT = 2,    // one deterministic number (a count): no noise
} bench_method_t;

typedef struct bench_result {
  char name[64];
  double value;  // median of the value's samples
  char unit[16];
  char baseline_name[64];  // "" when there is no baseline
  double baseline;         // median of the baseline's samples
  // Target: "<= 1.5" on the ratio (or on the value when there is no baseline).
  char target[32];
  int runs;  // pairs (or samples) the figure came from; as |pairs|
  // The ratio reported and judged, the median of the per-pair ratios
  // value / baseline (0 without a baseline).
  double paired_ratio;
  bench_method_t method;
  // The 95% bootstrap interval of the judged number (the ratio, or the value
  // without a baseline); both equal it for BENCH_METHOD_EXACT.
  double ci_low, ci_high;
  int pairs;
  bench_verdict_t verdict;
  // The judged samples (per-pair ratios, or values), |pairs| of them, for
  // `accel-bench compare`; NULL when not kept. Owned by bench_util.c.
  const double *samples;
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

// Appends an exact figure: one deterministic number (a count, a size, a
// ratio of counts) that has no noise, so its interval is the number itself
// and its verdict that of the number. Not for timings: those are samples
// (bench_add_paired, bench_add_samples, or a bench_group_t). Returns the
// result for the caller to fill the rest.
bench_result_t *bench_add(bench_report_t *report, const char *name,
                          double value, const char *unit,
                          const char *baseline_name, double baseline,
                          const char *target, int runs);

// Appends a result from |n| pairs: values[i] and baselines[i] were measured
// side by side in pair i. Reports the median of each and, as the ratio, the
// median of values[i] / baselines[i] with its bootstrap interval and the
// verdict against |target|: on a shared machine whose speed drifts, each
// pair sees the same conditions, so the per-pair ratios scatter less than
// the ratio of two medians. Pairs whose baseline is not positive are left
// out. The run length is the caller's: prefer a bench_group_t, which adapts it.
bench_result_t *bench_add_paired(bench_report_t *report, const char *name,
                                 const double *values, const char *unit,
                                 const char *baseline_name,
                                 const double *baselines, int n,
                                 const char *target);

// Appends a figure without a baseline from |n| samples of its value: the
// median with its bootstrap interval, judged against |target| on the value.
bench_result_t *bench_add_samples(bench_report_t *report, const char *name,
                                  const double *values, int n,
                                  const char *unit, const char *target);

// ---- figures described as data ------------------------------------------
// A benchmark subcommand describes its figures instead of measuring them in
// one long function: a group names its setup, one measurement run (which
// takes every sample of the group side by side, in the order the subcommand
// chooses: interleaving is the measure's job), its teardown and the figures
// read from those samples. bench_group_run runs the warm-up (run -1, its
// samples dropped) and at least |runs| runs, then more while any figure's
// interval is wider than the precision asks and the time budget lasts (see
// bench_configure), then adds each figure to the report: the median of the
// per-run ratios value / baseline with its interval (or, without a
// baseline, the median of the value's samples with its interval).

// Kept for source compatibility: every ratio is now the median of per-pair
// ratios, whichever is named.
typedef enum bench_pairing {
  BENCH_PAIRED = 0,
  BENCH_MEDIANS = 1,  // same as BENCH_PAIRED
} bench_pairing_t;

// One figure read from a group's samples.
typedef struct bench_figure {
  const char *name;           // "copy_1_engine_4KiB"; borrowed for the run
  const char *unit;           // "GB/s", "us", "ns"
  int value_slot;             // index of the value in each run's samples
  const char *baseline_name;  // NULL: no baseline (ratio and baseline null)
  int baseline_slot;          // index of the baseline sample (if any)
  const char *target;         // "<= 1.5" or NULL: reported, no target
  bench_pairing_t pairing;    // ignored (see bench_pairing_t)
  // When true: the baseline is, of the group's other slots, the one with the
  // lowest median (named by the group's slot_names), and baseline_name and
  // baseline_slot are ignored ("the fastest of the general allocators").
  bool baseline_lowest;
} bench_figure_t;

// The most runs (pairs) a group takes, and samples per run.
#define BENCH_MAX_RUNS 1024
#define BENCH_MAX_SLOTS 8

// A group of figures measured together.
typedef struct bench_group {
  int runs;   // the minimum measured runs after the warm-up, 1..BENCH_MAX_RUNS
  int slots;  // samples per run, 1..BENCH_MAX_SLOTS
  // Optional: prepares |ctx| before the warm-up; nonzero fails the group.
  int (*setup)(void *ctx);
  // Takes one run's |slots| samples into |out_samples|; |run| is -1 for the
  // warm-up, else 0, 1, ... Returns nonzero on failure (after printing why).
  int (*measure)(void *ctx, int run, double *out_samples);
  // Optional: releases what setup acquired; called whenever setup succeeded.
  void (*teardown)(void *ctx);
  const bench_figure_t *figures;
  int figure_count;
  // Names of the slots, for figures with baseline_lowest (else NULL).
  const char *const *slot_names;
  // Optional: after the runs, whether figure |index| is reported (a figure
  // the machine could not measure, such as one that needs json-c, is left
  // out); NULL reports them all.
  bool (*keep_figure)(void *ctx, int index);
  // The most runs the adaptive extension may reach (0: BENCH_MAX_RUNS), for
  // groups whose runs are long.
  int max_runs;
} bench_group_t;

// Runs |group| on |ctx| and appends its figures to |report|. Returns 0 (also
// when the filter skips the group), or nonzero when setup or a measurement
// failed (no figure added then).
int bench_group_run(bench_report_t *report, const bench_group_t *group,
                    void *ctx);

// Prints the report as a table or as one JSON object (docs/benchmarks.md
// format, with the run's metadata). Returns 0.
int bench_print(const bench_report_t *report, bool json);

// The floor of any handoff, the baseline of the launch and DMA latency
// figures: one thread hands a function pointer to another that spins on a
// shared cache line, and spins for the answer. Starts a fresh thread (so
// that no spinning thread is left to compete with the figure measured next),
// warms up, and returns the mean ns per round trip over |iters|; 0 if the
// thread cannot be started.
double bench_spin_handoff_ns(int iters);

// Evaluates a target string like "<= 1.5" or ">= 0.95" against |x|; true
// without a target.
bool bench_target_met(const char *target, double x);

// Writes the run's metadata as a JSON object's members (no braces) to |f|:
// commit, build type, CPU model, core count, governor, load averages (the
// one taken by bench_meta_begin and now), the behaviour-changing environment
// variables, host and time (bench_meta.c).
void bench_meta_begin(void);
void bench_meta_write_json(FILE *f);

// Subcommands. Each returns a process exit code.
int accel_bench_launch(const bench_args_t *args);
int accel_bench_alloc(const bench_args_t *args);
int accel_bench_dma(const bench_args_t *args);
int accel_bench_kernels(const bench_args_t *args);
int accel_bench_topo(const bench_args_t *args);
int accel_bench_load(const bench_args_t *args);
int accel_bench_trace(const bench_args_t *args);
int accel_bench_serve(const bench_args_t *args);
int accel_bench_llm(const bench_args_t *args);
int accel_bench_shim(const bench_args_t *args);
int accel_bench_cuda(const bench_args_t *args);
int accel_bench_recovery(const bench_args_t *args);

// Families' figures of accel-bench kernels, added to |report| (0, or
// nonzero after printing why).
typedef struct accel_runtime accel_runtime_t;
int bench_kernels_attention(bench_report_t *report, accel_runtime_t *rt,
                            accel_device_t *dev, bool quick);
int bench_kernels_decoder(bench_report_t *report, accel_runtime_t *rt,
                          bool quick);
// The cost of ACCEL_CHECK_NUMERICS (numerics_bench.c): two runtimes of
// their own, the check on and off.
int bench_kernels_numerics(bench_report_t *report, bool quick);

#endif  // ACCEL_BENCH_BENCH_H_
