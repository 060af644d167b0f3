// libFuzzer target for accel-bench's results files (tools/accel-bench/
// results.c): every input must be either parsed or refused with a message;
// a crash or a sanitizer report is a bug. A parsed run is then walked as
// compare and the report use it: every figure's judged number and samples,
// and a comparison of the run with itself. Built by
// scripts/fuzz-bench-results.sh.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "results.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile double g_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL) {
    return 0;
  }
  memcpy(text, data, size);
  text[size] = '\0';
  static FILE *devnull;
  if (devnull == NULL) {
    devnull = fopen("/dev/null", "w");
    stderr = devnull;  // parse errors are expected; keep the log readable
  }
  bench_run_t run;
  if (bench_run_parse(text, "fuzz", &run) == 0) {
    double acc = 0;
    for (int i = 0; i < run.count; ++i) {
      const bench_fig_t *f = &run.figs[i];
      acc += bench_fig_judged(f) + bench_fig_higher_is_better(f);
      for (int k = 0; k < f->sample_count; ++k) {
        acc += f->samples[k];
      }
    }
    g_sink = acc;
    bench_compare_options_t options = {.alpha = 0.01, .threshold = 0.1};
    bench_compare_runs(&run, &run, &options, devnull);
    bench_run_free(&run);
  }
  free(text);
  return 0;
}
