// The benchmark history: runs and their figures in a SQLite database at a
// path the user chooses, one row per figure per run (docs/benchmarks.md has
// the schema). Writers from several processes at once are safe (WAL, a busy
// timeout, one IMMEDIATE transaction per run), and a run killed while
// saving leaves no trace: its transaction is rolled back.
#ifndef ACCEL_BENCH_HISTORY_H_
#define ACCEL_BENCH_HISTORY_H_

#include <stdint.h>

#include "results.h"

// Saves |run| (its metadata and every figure) into the database at |path|,
// creating it and its tables if needed, in one transaction. Writes the new
// run's id to |out_id| (optional). Returns 0, or 1 after printing why.
int bench_history_save(const char *path, const bench_run_t *run,
                       int64_t *out_id);

// Loads the latest run (by time, then id) whose commit starts with |commit|
// (at least 4 characters) into |out|. Returns 0, or 1 after printing why
// (no such run, an ambiguous prefix naming several commits, no database).
int bench_history_load_commit(const char *path, const char *commit,
                              bench_run_t *out);

// Loads every run, oldest first (by time, then id), into a new array of
// |*out_count| runs (free each with bench_run_free, then the array).
// Returns 0, or 1 after printing why.
int bench_history_load_all(const char *path, bench_run_t **out_runs,
                           int *out_count);

#endif  // ACCEL_BENCH_HISTORY_H_
