// A benchmark run as accel-bench's history tools see it: the figures of one
// or more subcommands with the run's metadata, read from a results file (the
// output of `accel-bench run --out`, or of one `accel-bench NAME --json`) or
// from the history database (history.c). docs/benchmarks.md has the format.
#ifndef ACCEL_BENCH_RESULTS_H_
#define ACCEL_BENCH_RESULTS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// One figure. Numbers that the file gives as null are NAN; strings it gives
// as null are NULL.
typedef struct bench_fig {
  char *bench;  // "launch"
  char *name;   // "roundtrip_empty_command"
  char *unit;
  char *baseline_name;
  char *target;   // "<= 1.5"
  char *method;   // "paired", "sampled", "exact"
  char *verdict;  // "met", "missed", "inconclusive"
  double value, baseline, ratio, ci_low, ci_high;
  int pairs;
  double *samples;  // the judged samples (per-pair ratios, or values)
  int sample_count;
} bench_fig_t;

// One run: its metadata and figures. Owns every string and array in it.
typedef struct bench_run {
  char *commit;      // "<40 hex>[-dirty]" or "unknown"
  char *time;        // "2026-11-25T10:00:00Z"
  char *build_type;
  char *host;
  char *meta_json;   // the whole "run" object, as JSON text
  bench_fig_t *figs;
  int count;
  int capacity;
} bench_run_t;

// The number a figure is judged by: its ratio, or its value without a
// baseline.
double bench_fig_judged(const bench_fig_t *f);

// Whether a larger judged number is better for |f|: a ">=" or ">" target,
// or, without a target, a unit that is a rate ("GB/s").
bool bench_fig_higher_is_better(const bench_fig_t *f);

// Parses |text|: a results file ({"format": "accel-bench-results/1", "run",
// "benches": [...]}) or one subcommand's --json output. Returns 0, or 1
// after printing what was wrong (the run is then empty). |what| names the
// source in messages.
int bench_run_parse(const char *text, const char *what, bench_run_t *out);

// Reads and parses the file at |path|.
int bench_run_load(const char *path, bench_run_t *out);

// Appends a figure (copied) to |run|; returns it, or NULL when memory ran out.
bench_fig_t *bench_run_add(bench_run_t *run, const bench_fig_t *fig);

// The figure |bench|/|name| of |run|, or NULL.
const bench_fig_t *bench_run_find(const bench_run_t *run, const char *bench,
                                  const char *name);

// Releases what |run| owns and empties it.
void bench_run_free(bench_run_t *run);

// A copy of the file at |path| as a NUL-terminated string (free it), or NULL
// after printing why; |out_size| (optional) gets its length.
char *bench_read_file(const char *path, size_t *out_size);

#endif  // ACCEL_BENCH_RESULTS_H_
