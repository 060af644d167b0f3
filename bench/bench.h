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

// ---- figures described as data ------------------------------------------
// A benchmark subcommand describes its figures instead of measuring them in
// one long function: a group names its setup, one measurement run (which
// takes every sample of the group side by side, in the order the subcommand
// chooses: interleaving is the measure's job), its teardown and the figures
// read from those samples. bench_group_run runs the warm-up (run -1, its
// samples dropped) and |runs| runs, then adds each figure to the report as
// the median of its samples and, with a baseline, the ratio its |pairing|
// names.

// How a figure's ratio is formed from its samples.
typedef enum bench_pairing {
  // Median of the per-run ratios value / baseline (bench_add_paired).
  BENCH_PAIRED = 0,
  // Median value / median baseline (bench_add).
  BENCH_MEDIANS = 1,
} bench_pairing_t;

// One figure read from a group's samples.
typedef struct bench_figure {
  const char *name;           // "copy_1_engine_4KiB"; borrowed for the run
  const char *unit;           // "GB/s", "us", "ns"
  int value_slot;             // index of the value in each run's samples
  const char *baseline_name;  // NULL: no baseline (ratio and baseline null)
  int baseline_slot;          // index of the baseline sample (if any)
  const char *target;         // "<= 1.5" or NULL: reported, no target
  bench_pairing_t pairing;    // how the ratio is formed (with a baseline)
  // When true: the baseline is, of the group's other slots, the one with the
  // lowest median (named by the group's slot_names), and baseline_name and
  // baseline_slot are ignored ("the fastest of the general allocators").
  bool baseline_lowest;
} bench_figure_t;

#define BENCH_MAX_RUNS 64
#define BENCH_MAX_SLOTS 8

// A group of figures measured together.
typedef struct bench_group {
  int runs;   // measured runs after the warm-up, 1..BENCH_MAX_RUNS
  int slots;  // samples per run, 1..BENCH_MAX_SLOTS
  // Optional: prepares |ctx| before the warm-up; nonzero fails the group.
  int (*setup)(void *ctx);
  // Takes one run's |slots| samples into |out_samples|; |run| is -1 for the
  // warm-up, else 0..runs-1. Returns nonzero on failure (after printing why).
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
} bench_group_t;

// Runs |group| on |ctx| and appends its figures to |report|. Returns 0, or
// nonzero when setup or a measurement failed (no figure added then).
int bench_group_run(bench_report_t *report, const bench_group_t *group,
                    void *ctx);

// Prints the report as a table or as one JSON object (DESIGN.md format).
// In the table a ratio marked "p" is paired (the median of per-run ratios,
// not value / baseline of the medians shown), and a note under it says so.
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
int accel_bench_kernels(const bench_args_t *args);
int accel_bench_topo(const bench_args_t *args);
int accel_bench_load(const bench_args_t *args);
int accel_bench_trace(const bench_args_t *args);
int accel_bench_serve(const bench_args_t *args);
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

#endif  // ACCEL_BENCH_BENCH_H_
