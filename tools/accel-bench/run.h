// accel-bench run and save: a run of several benchmarks kept as one results
// file and/or saved into the history database (docs/benchmarks.md).
#ifndef ACCEL_BENCH_RUN_H_
#define ACCEL_BENCH_RUN_H_

// accel-bench run (--all | NAME...) [--out FILE] [--save DB] [benchmark
// options]: runs each benchmark in a child process (this executable, with
// --json and the options given), gathers their reports into one results
// document with the run's metadata, writes it to FILE (atomically: a
// temporary file renamed) or to stdout, and saves it into DB. Nothing is
// written or saved when a benchmark fails. |names| lists the benchmarks of
// --all. Returns the exit code.
int accel_bench_run_main(int argc, char **argv, const char *const *names,
                         int name_count);

// accel-bench save --db DB FILE...: saves results files into DB, each file
// one run in its own transaction. Returns the exit code.
int accel_bench_save_main(int argc, char **argv);

#endif  // ACCEL_BENCH_RUN_H_
