// accel-bench report: the history as one self-contained HTML page, a chart
// per figure over the runs (docs/benchmarks.md, "The report page").
#ifndef ACCEL_BENCH_REPORT_H_
#define ACCEL_BENCH_REPORT_H_

#include <stdio.h>

#include "results.h"

// Writes the page for |runs| (oldest first) to |out|, embedding the
// charting library |js| and its style sheet |css| (their text). Returns 0,
// or 1 after printing why.
int bench_report_write(FILE *out, const bench_run_t *runs, int run_count,
                       const char *js, const char *css);

// The command: accel-bench report --db DB --out FILE [--js DYGRAPH_JS].
// Returns the exit code.
int accel_bench_report_main(int argc, char **argv);

#endif  // ACCEL_BENCH_REPORT_H_
